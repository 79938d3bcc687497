"""Earlier runs of a suite, read from the output folder for report.html's history strip.

Only the run folders' summary.json files are read, newest first, and only as many as the strip
shows: a folder with thousands of runs costs a directory listing and a few files. A folder
without a readable summary (a run still going, one that crashed, a file someone broke) is
skipped; reading history never fails a run.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from trialrun.report.history_view import HISTORY_WINDOW, PastRun

SUMMARY_BYTES_MAX = 64 * 1024 * 1024
"""A summary.json larger than this is not one trialrun wrote for a suite: skipped."""


def past_runs(suite_out: Path, *, current: str, limit: int = HISTORY_WINDOW - 1) -> list[PastRun]:
    """Up to ``limit`` runs in ``suite_out`` (``<out>/<suite>``) before ``current``, oldest first.

    Run ids sort by the time they started (``rundir.new_run_id``), so the names say the order.
    """
    try:
        names = sorted(
            (entry.name for entry in os.scandir(suite_out) if _is_run_dir(entry)), reverse=True
        )
    except OSError:
        return []
    found: list[PastRun] = []
    for name in names:
        if len(found) >= limit:
            break
        if name >= current:  # this run, and any started after it (a parallel run)
            continue
        run = _read(suite_out / name / "summary.json", name)
        if run is not None:
            found.append(run)
    found.reverse()
    return found


def _is_run_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return not entry.name.startswith(".") and entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


def _read(path: Path, run_id: str) -> PastRun | None:
    try:
        with path.open("rb") as handle:
            data = handle.read(SUMMARY_BYTES_MAX + 1)
        if len(data) > SUMMARY_BYTES_MAX:
            return None
        document: Any = json.loads(data)
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(document, dict) or not isinstance(document.get("cases"), list):
        return None
    statuses: dict[str, str] = {}
    for case in document["cases"]:
        if isinstance(case, dict) and isinstance(case.get("id"), str):
            status = case.get("status")
            statuses[case["id"]] = status if isinstance(status, str) else "unknown"
    run = document.get("run")
    started = run.get("started_at") if isinstance(run, dict) else None
    return PastRun(run_id, started if isinstance(started, str) else "", statuses)
