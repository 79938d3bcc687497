"""A shard's cases run more than once (``--repeat K``, ``--retries N``), read back for merge.

Such a case has, per run, its events in run.jsonl numbered ``run`` (1, 2, ...), a ``case_end``
in the receipt with that ``attempt`` number, its status and the SHA-256 of that run's lines,
and an entry in summary.json's ``runs``. ``check_runs`` holds the three to each other, as
``shards`` does for a case run once; ``rebuild_runs`` gives back the ``CaseRuns`` the reports
and the run's verdict read (each run, the pass rate's inputs, and whether a flaky case blocks).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from trialrun.base.results import CaseResult, CaseRuns
from trialrun.errors import TrialrunError

Rebuild = Callable[[dict[str, Any], Sequence[dict[str, Any]]], CaseResult]


def run_number(event: dict[str, Any]) -> int | None:
    """The event's run number; None for a case run once; ValueError when it is no number."""
    number = event.get("run")
    if number is None:
        return None
    if not isinstance(number, int) or isinstance(number, bool) or number < 1:
        raise ValueError(f"expected a run number 1, 2, ..., found {number!r}")
    return number


def check_runs(
    path: Path,
    case_id: str,
    doc: dict[str, Any],
    ends: Sequence[dict[str, Any]],
    lines: Sequence[str],
    events: Sequence[dict[str, Any]],
    error: type[TrialrunError],
) -> None:
    """The receipt's ``case_end`` events of a case run more than once agree with its
    summary.json ``runs`` and its numbered lines in run.jsonl."""
    runs = doc.get("runs")
    if not isinstance(runs, list) or not all(isinstance(run, dict) for run in runs):
        raise error(
            f"{path}: case {case_id!r} ran {len(ends)} times in the receipt but summary.json "
            "has no list of its runs: the summary was changed after the run"
        )
    attempts = [end.get("attempt") for end in ends]
    if attempts != list(range(1, len(runs) + 1)):
        raise error(
            f"{path}: case {case_id!r}: expected the receipt's runs 1..{len(runs)} as "
            f"summary.json lists them, found attempts {attempts}"
        )
    by_run: dict[int | None, list[str]] = {}
    for line, event in zip(lines, events, strict=True):
        by_run.setdefault(run_number(event), []).append(line)
    for number, (end, run) in enumerate(zip(ends, runs, strict=True), start=1):
        if end.get("status") != run.get("status"):
            raise error(
                f"{path}: run {number} of case {case_id!r} ended with status "
                f"{end.get('status')!r} in the receipt but {run.get('status')!r} in "
                "summary.json: the summary was changed after the run"
            )
        written = "".join(by_run.get(number, [])).encode("utf-8")
        if end.get("traceSha256") != hashlib.sha256(written).hexdigest():
            raise error(
                f"{path}: the lines of run {number} of case {case_id!r} in run.jsonl do not "
                "hash to the traceSha256 its receipt recorded: run.jsonl was changed after "
                "the run"
            )
    if set(by_run) - set(range(1, len(runs) + 1)):
        raise error(
            f"{path}: case {case_id!r} has lines in run.jsonl for runs the receipt does not "
            f"name: {sorted(str(n) for n in set(by_run) - set(range(1, len(runs) + 1)))}"
        )


def rebuild_runs(
    doc: dict[str, Any], events: Sequence[dict[str, Any]], rebuild: Rebuild
) -> tuple[CaseRuns, list[dict[str, Any]]]:
    """The case's ``CaseRuns`` from its summary entry and numbered events, and the events of
    the run its reports show (the first that did not pass, else the first)."""
    by_run: dict[int, list[dict[str, Any]]] = {}
    for event in events:
        number = run_number(event)
        if number is not None:
            by_run.setdefault(number, []).append(event)
    results = []
    for number, run in enumerate(doc["runs"], start=1):
        run_doc = {
            "id": doc.get("id"),
            "status": run.get("status"),
            "failure_kind": run.get("failure_kind"),
            "wall_ms": run.get("wall_ms"),
            "stderr_tail": run.get("stderr_tail"),
        }
        results.append(rebuild(run_doc, by_run.get(number, [])))
    k = (doc.get("pass_hat_k") or {}).get("k")
    runs = CaseRuns(
        runs=results,
        repeat=int(k) if isinstance(k, int) else 1,
        retries=int(doc.get("retries") or 0),
        min_pass_rate=doc.get("min_case_pass_rate"),
        blocking=bool(doc.get("blocking")),
    )
    shown = next((at for at, r in enumerate(results) if r.status != "pass"), 0)
    return runs, by_run.get(shown + 1, [])
