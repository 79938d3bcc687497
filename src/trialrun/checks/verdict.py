"""The verdict on one case: the run's own failure, then assertions, then budgets.

Precedence (RunLedger's, with budgets always recorded):

1. The run already failed (agent error, timeout, cassette mismatch, ...): that failure and its
   status stand and assertions are not evaluated, since there may be no output to judge.
   Budgets that were exceeded are still listed in ``check_failures`` for information.
2. Otherwise the output is normalized and every assertion runs; any failure makes the case
   ``assertion_failed`` (status fail) with the messages joined by newlines.
3. Otherwise any budget failure makes it ``budget_exceeded`` (status fail), with RunLedger's
   message ``Budget exceeded: <field> limit=<l> actual=<a>; ...``.

An assertion whose ``check`` raises, or returns anything but ``CheckFailure`` items that reports
can write (a plugin bug), does not stop the run: the case becomes an error naming the assertion.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from trialrun.base.assertion_api import CheckSubject, CompiledAssertion
from trialrun.base.foreign import FOREIGN_FAILURES, failure_text
from trialrun.base.jsonvalue import json_problem
from trialrun.base.results import AgentRun, CaseResult, CheckFailure, Failure
from trialrun.checks.budgets import budget_failure_message, check_budgets, is_unverifiable
from trialrun.config.normalize import normalize

if TYPE_CHECKING:
    # Only for annotations: the config records are loaded by whoever built the rules.
    from trialrun.config.models import Budgets, CaseConfig, Normalization


class JudgedCase(Protocol):
    """The parts of the loader's ``Case`` a verdict needs."""

    @property
    def config(self) -> CaseConfig: ...

    @property
    def cassette_path(self) -> Path: ...

    @property
    def assertions(self) -> Sequence[CompiledAssertion]: ...

    @property
    def budgets(self) -> Budgets: ...

    @property
    def normalization(self) -> Normalization: ...


def judge_case(case: JudgedCase, run: AgentRun) -> CaseResult:
    """Turn what the agent did into a pass/fail/error verdict; ``run`` is not modified."""
    output = normalize(run.output, case.normalization) if run.output is not None else None
    judged_run = dataclasses.replace(run, output=output)
    budget_failures = check_budgets(case.budgets, run)

    def verdict(failure: Failure | None, check_failures: list[CheckFailure]) -> CaseResult:
        return CaseResult(
            case_id=case.config.id,
            status=failure.status if failure is not None else "pass",
            run=judged_run,
            assertions_total=len(case.assertions),
            check_failures=check_failures,
            failure=failure,
            cassette_path=str(case.cassette_path),
        )

    if run.failure is not None:
        exceeded = [failure for failure in budget_failures if not is_unverifiable(failure)]
        if run.failure.kind == "timeout":
            # The deadline already is the max_wall_ms verdict; whether the kill landed a
            # millisecond past the limit is scheduling noise, not a second finding.
            exceeded = [failure for failure in exceeded if failure.type != "budget:max_wall_ms"]
        return verdict(run.failure, exceeded)
    if output is None:
        # The session always sets a failure when no final_output arrived; be safe anyway.
        missing = Failure("agent_error", "Agent finished without sending final_output", "error")
        return verdict(missing, budget_failures)

    subject = CheckSubject(output=output, tool_calls=run.tool_calls)
    assertion_failures, crashed = _run_assertions(case.assertions, subject)
    if assertion_failures:
        message = "\n".join(failure.message for failure in assertion_failures)
        failure = Failure("assertion_failed", message, "error" if crashed else "fail")
        return verdict(failure, [*assertion_failures, *budget_failures])
    if budget_failures:
        failure = Failure("budget_exceeded", budget_failure_message(budget_failures), "fail")
        return verdict(failure, budget_failures)
    return verdict(None, [])


def _run_assertions(
    assertions: Sequence[CompiledAssertion], subject: CheckSubject
) -> tuple[list[CheckFailure], bool]:
    failures: list[CheckFailure] = []
    crashed = False
    for assertion in assertions:
        # Third-party code: whatever goes wrong is reported on this case, the run goes on.
        try:
            found = list(assertion.check(subject))
            problem = _not_failures(found)
        except FOREIGN_FAILURES as exc:
            problem = f"raised {failure_text(exc)}"
        if problem is None:
            failures.extend(found)
        else:
            crashed = True
            failures.append(
                CheckFailure(type=assertion.type, message=f"Assertion {assertion.type} {problem}")
            )
    return failures, crashed


def _not_failures(found: Sequence[object]) -> str | None:
    """What is wrong with a check's answer, if anything, for the reports to write it."""
    for item in found:
        if not isinstance(item, CheckFailure):
            return f"returned {type(item).__name__}, expected CheckFailure items"
        if not isinstance(item.type, str) or not isinstance(item.message, str):
            return "returned a CheckFailure whose type or message is not a string"
        texts = (item.expected, item.observed)
        if not all(text is None or isinstance(text, str) for text in texts):
            return "returned a CheckFailure whose expected or observed is not a string or None"
        if item.details is not None:
            problem = json_problem(item.details) if isinstance(item.details, dict) else "not a dict"
            if problem is not None:
                return f"returned a CheckFailure whose details are not JSON: {problem}"
    return None
