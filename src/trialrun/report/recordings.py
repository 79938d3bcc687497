"""Views of the re-recording review (``running.recording_review``): what record and update
modes did to each case's recordings, for summary.json, the console, report.html and
``recordings-diff.json``.

Per case: ``kept``, ``replaced``, ``added``, ``dropped`` (update mode's words) and how many
replaced recordings were ``changed`` or ``volatile-only`` (the review's words). ``--fail-on-change``
fails a run on ``changed`` only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trialrun.base.results import CaseResult, JsonObject, RunResult

DIFF_SCHEMA_VERSION = 1
_COUNTS = ("kept", "replaced", "added", "dropped", "changed", "volatile_only")


def case_recordings(case: CaseResult) -> JsonObject | None:
    """A case's summary.json ``recordings`` object; None for a case that recorded nothing
    (replay and live runs, a case that never started)."""
    blocks = case.run.recording_review
    if blocks is None:
        if not case.run.recording_kept:
            return None
        return {"committed": False, **dict.fromkeys(_COUNTS, 0)}
    counts: JsonObject = {"committed": True, **dict.fromkeys(_COUNTS, 0)}
    for block in blocks:
        for name in ("kept", "replaced", "added", "dropped"):
            counts[name] += int(block["counts"][name])
        for recording in block["recordings"]:
            if recording["status"] == "changed":
                counts["changed"] += 1
            elif recording["status"] == "volatile-only":
                counts["volatile_only"] += 1
    return counts


def recordings_totals(case_docs: Sequence[dict[str, Any]]) -> JsonObject | None:
    """summary.json ``run.recordings``: the cases' counts added up, and how many cases kept
    their old recordings because they failed; None when no case recorded."""
    blocks = [doc["recordings"] for doc in case_docs if doc.get("recordings") is not None]
    if not blocks:
        return None
    totals: JsonObject = dict.fromkeys(_COUNTS, 0)
    for block in blocks:
        for name in _COUNTS:
            totals[name] += int(block.get(name, 0))
    totals["cases_not_committed"] = sum(1 for block in blocks if not block.get("committed"))
    return totals


def recordings_diff(run: RunResult) -> JsonObject | None:
    """The ``recordings-diff.json`` document; None when no case rewrote recordings."""
    reviewed = [case for case in run.cases if case.run.recording_review is not None]
    if not reviewed:
        return None
    totals = dict.fromkeys(("identical", "volatile-only", "changed", "added", "removed"), 0)
    for case in reviewed:
        for block in case.run.recording_review or []:
            for recording in block["recordings"]:
                totals[recording["status"]] += 1
    cases = [{"id": case.case_id, "files": case.run.recording_review} for case in reviewed]
    return {
        "schema_version": DIFF_SCHEMA_VERSION,
        "run_id": run.run_id,
        "mode": run.mode,
        "totals": totals,
        "cases": cases,
    }


def changed_lines(cases: Sequence[CaseResult]) -> list[str]:
    """``case: file line N: tool x (field): old -> new`` for every changed recording."""
    lines: list[str] = []
    for case in cases:
        for block in case.run.recording_review or []:
            for recording in block["recordings"]:
                if recording["status"] == "changed":
                    lines.append(
                        f"{case.case_id}: {block['file']} line {recording['new_line']}: "
                        f"{recording['recording']} ({recording['field']}): "
                        f"{recording['old']} -> {recording['new']}"
                    )
    return lines


def console_lines(cases: Sequence[CaseResult]) -> list[str]:
    """One line per case whose recordings changed (anything but all kept)."""
    lines: list[str] = []
    for case in cases:
        counts = case_recordings(case)
        if counts is None or not counts["committed"]:
            continue  # a failed case is listed under "Cassettes kept as they were"
        if not (counts["replaced"] or counts["added"] or counts["dropped"]):
            continue
        text = (
            f"  {case.case_id}: {counts['added']} added, {counts['replaced']} replaced, "
            f"{counts['dropped']} dropped, {counts['kept']} kept"
        )
        if counts["changed"]:
            text += f" ({counts['changed']} changed)"
        lines.append(text)
    return ["Recordings (added, replaced, dropped, kept):", *lines] if lines else []


def html_rows(cases: Sequence[CaseResult]) -> list[JsonObject]:
    """The report's recordings table: one row per recording that is not identical."""
    rows: list[JsonObject] = []
    for case in cases:
        for block in case.run.recording_review or []:
            for recording in block["recordings"]:
                if recording["status"] == "identical":
                    continue
                line = recording["new_line"] or recording["old_line"]
                rows.append(
                    {
                        "case": case.case_id,
                        "file": block["file"],
                        "line": line,
                        "recording": recording["recording"],
                        "status": recording["status"],
                        "field": recording.get("field", ""),
                        "old": recording.get("old", ""),
                        "new": recording.get("new", ""),
                    }
                )
    return rows
