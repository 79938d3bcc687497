"""Process checks shared by the tests that prove no process of a case outlives it."""

from __future__ import annotations

import time
from pathlib import Path


def process_gone(pid: int, within_s: float = 30.0) -> bool:
    """True once ``pid`` no longer runs (a zombie waiting for init counts as gone).

    A process that is gone answers at once; the bound only decides how long a leak takes to be
    reported, so it is generous enough for a killed process to be reaped on a loaded machine.
    """
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.02)
    return False
