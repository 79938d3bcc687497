"""The private scratch directories of the services (MCP configs and recordings, the run's CA)."""

from __future__ import annotations

from pathlib import Path

from trialrun.base import leftovers


def scratch_dir(prefix: str) -> Path:
    """A fresh private directory under trialrun's scratch root."""
    import tempfile  # with shutil under it, only for a suite whose services need a directory

    return Path(tempfile.mkdtemp(prefix=prefix, dir=leftovers.scratch_root()))
