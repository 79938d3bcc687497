"""Where the trialrun home is and how its stored compare runs are laid out.

``compare`` writes runs under ``store_root()``; ``team`` reads them to publish and keeps its
caches under ``trialrun_home()``.
"""

from __future__ import annotations

import os
from pathlib import Path

HOME_ENV = "TRIALRUN_HOME"
RECEIPT_FILE = "receipt.json"


def trialrun_home() -> Path:
    """``$TRIALRUN_HOME``, or ``~/.trialrun`` when it is unset or empty."""
    configured = os.environ.get(HOME_ENV, "")
    return Path(configured).expanduser() if configured else Path.home() / ".trialrun"


def store_root() -> Path:
    """Where local compare runs live: ``<home>/evals/local``."""
    return trialrun_home() / "evals" / "local"
