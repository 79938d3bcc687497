"""A case run more than once: ``--repeat K`` (a pass rate) and ``--retries N`` (more tries).

``run_again`` drives the extra runs of one case once its first run is judged; ``combine`` turns
its runs into the one ``CaseResult`` the reports see, with every run kept in ``runs``. A case
run once comes out exactly as it went in, so ``--repeat 1`` changes no artifact.

The case's status: ``pass`` when every run passed; ``flaky`` when some passed and some did not;
otherwise the status of its runs (``fail``, or ``error`` when every run errored). A flaky case
fails the run when the suite says ``flaky: fail`` (the default), unless ``min_case_pass_rate``
applies (``--repeat`` only): then its rate decides, and below it the case is a ``fail``
(``pass_rate_below_minimum``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace

from trialrun.base.results import CaseResult, CaseRuns, Failure, Status
from trialrun.config import Case, Suite


@dataclass(frozen=True)
class Repeats:
    """How often each case runs: ``repeat`` runs each, or one run and up to ``retries`` more."""

    repeat: int = 1
    retries: int = 0

    def __post_init__(self) -> None:
        if self.repeat < 1 or self.retries < 0:
            raise ValueError(
                f"expected repeat >= 1 and retries >= 0, found {self.repeat} and {self.retries}"
            )
        if self.repeat > 1 and self.retries > 0:
            raise ValueError("expected --repeat or --retries, found both")


ONCE = Repeats()
"""Every case runs once: no option given."""


async def run_again(
    first: CaseResult,
    again: Callable[[], Awaitable[CaseResult]],
    repeats: Repeats,
    suite: Suite,
    case: Case,
) -> CaseResult:
    """The case's result over all its runs: ``first``, then those ``again`` runs as asked."""
    runs = [first]
    if repeats.repeat > 1:
        while len(runs) < repeats.repeat:
            runs.append(await again())
    else:
        while runs[-1].status != "pass" and len(runs) <= repeats.retries:
            runs.append(await again())
    return combine(runs, repeats, suite, case)


def combine(runs: list[CaseResult], repeats: Repeats, suite: Suite, case: Case) -> CaseResult:
    """One result for the case from its runs (``runs[0]`` itself when it ran once)."""
    if len(runs) == 1:
        return runs[0]
    passes = sum(1 for run in runs if run.status == "pass")
    failing = [run for run in runs if run.status != "pass"]
    shown = failing[0] if failing else runs[0]
    if repeats.repeat > 1:
        minimum = case.config.min_case_pass_rate
        if minimum is None:
            minimum = suite.config.min_case_pass_rate
        retries = 0
    else:
        minimum, retries = None, len(runs) - 1
    record = CaseRuns(list(runs), repeats.repeat, retries, minimum)
    if not failing:
        return replace(shown, status="pass", runs=record)
    record.blocking = True
    if passes == 0:
        status: Status = "error" if all(run.status == "error" for run in runs) else "fail"
        return replace(shown, status=status, runs=record)
    if minimum is not None and passes / len(runs) < minimum:
        return replace(shown, status="fail", runs=record, failure=_below(record, shown))
    record.blocking = minimum is None and suite.config.flaky == "fail"
    return replace(shown, status="flaky", runs=record)


def _below(record: CaseRuns, shown: CaseResult) -> Failure:
    """Why a case whose pass rate is below its minimum fails, with its first failing run's
    reason (what a person fixes)."""
    assert record.min_pass_rate is not None
    message = (
        f"passed {record.passes} of {len(record.runs)} runs ({record.pass_rate:.0%}), expected at "
        f"least min_case_pass_rate {record.min_pass_rate:g}"
    )
    first = shown.failure
    if first is not None:
        message += f"; first failing run: {first.message}"
    stderr_tail = first.stderr_tail if first is not None else ""
    return Failure("pass_rate_below_minimum", message, "fail", stderr_tail)
