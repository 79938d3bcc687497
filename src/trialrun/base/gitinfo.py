"""The commit and branch a run starts from, for the receipt's ``run_start``."""

from __future__ import annotations

import subprocess
from pathlib import Path


def git_state(root: Path) -> tuple[str | None, str]:
    """``(commit, branch)`` of the repository holding ``root``; ``(None, "")`` outside git or
    before the first commit. One git process, so every run pays for it once and briefly."""
    try:
        proc = subprocess.run(
            ["git", "rev-parse", "HEAD", "--abbrev-ref", "HEAD"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None, ""
    lines = proc.stdout.split()
    if proc.returncode != 0 or len(lines) != 2:
        return None, ""
    return lines[0], lines[1]
