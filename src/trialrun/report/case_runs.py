"""How the reports show a case run more than once (``--repeat K``, ``--retries N``).

summary.json gets, per such case, ``runs`` (each run's status, failure kind and wall time),
``passes``, ``pass_rate``, ``pass_rate_interval`` (Wilson, 95%) and, for ``--repeat``,
``pass_hat_k``: ``all_passed`` (pass^K as observed: every one of the K runs passed) and
``estimate`` (``pass_rate ** K``, the chance that K fresh runs all pass if the runs are
independent at the observed rate). A case run once gets none of these keys.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trialrun.base.proportions import wilson_interval
from trialrun.base.redact import redact_text
from trialrun.base.results import CaseResult, CaseRuns
from trialrun.base.visible import visible

TailOf = Callable[[CaseResult], str]


def runs_summary(runs: CaseRuns, stderr_tail: TailOf) -> dict[str, Any]:
    """The summary.json keys of a case run more than once; ``stderr_tail(run)`` is a run's
    stderr tail, redacted and bounded."""
    interval = wilson_interval(runs.passes, len(runs.runs))
    assert interval is not None  # a case run more than once has runs
    doc: dict[str, Any] = {
        "runs": [_run_doc(number, run, stderr_tail) for number, run in enumerate(runs.runs, 1)],
        "passes": runs.passes,
        "pass_rate": runs.pass_rate,
        "pass_rate_interval": [interval.low, interval.high],
    }
    if runs.repeat > 1:
        doc["pass_hat_k"] = {
            "k": runs.repeat,
            "all_passed": runs.passes == len(runs.runs),
            "estimate": runs.pass_rate**runs.repeat,
        }
    else:
        doc["retries"] = runs.retries
    if runs.min_pass_rate is not None:
        doc["min_case_pass_rate"] = runs.min_pass_rate
    doc["blocking"] = runs.blocking
    return doc


def _run_doc(number: int, run: CaseResult, stderr_tail: TailOf) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "run": number,
        "status": run.status,
        "failure_kind": run.failure.kind if run.failure is not None else None,
        "wall_ms": run.run.wall_ms,
    }
    tail = stderr_tail(run)
    if tail:
        doc["stderr_tail"] = tail
    return doc


def runs_text(case: CaseResult) -> str:
    """``6/9 passed (67%, 95% CI 35-88%)`` or ``passed on retry 2``; "" for a case run once."""
    runs = case.runs
    if runs is None:
        return ""
    total = len(runs.runs)
    if runs.repeat == 1 and case.status == "flaky":
        return f"passed on retry {runs.retries}"
    interval = wilson_interval(runs.passes, total)
    assert interval is not None
    text = (
        f"{runs.passes}/{total} passed ({runs.pass_rate:.0%}, 95% CI "
        f"{interval.low:.0%}-{interval.high:.0%})"
    )
    if runs.repeat == 1:
        text += f" after {runs.retries} retries"
    return text


def runs_view(case: CaseResult) -> dict[str, Any] | None:
    """What report.html shows of a case's runs (the page escapes it); None for a case run once."""
    runs = case.runs
    if runs is None:
        return None
    if runs.min_pass_rate is not None:
        gate = f"min_case_pass_rate {runs.min_pass_rate:g}"
    elif case.status == "flaky":
        gate = "fails the run (flaky: fail)" if runs.blocking else "tolerated (flaky: warn)"
    else:
        gate = ""
    rows = [
        {
            "number": number,
            "status": run.status,
            "wall_ms": run.run.wall_ms,
            "failure_kind": run.failure.kind if run.failure is not None else None,
            "failure_message": (
                _first_line(run.failure.message) if run.failure is not None else None
            ),
        }
        for number, run in enumerate(runs.runs, 1)
    ]
    return {"text": runs_text(case), "gate": gate, "rows": rows}


def _first_line(text: str) -> str:
    """Redacted as a whole first (a secret may span lines), hidden characters as escapes."""
    lines = visible(redact_text(text)).splitlines()
    return lines[0] if lines else ""
