"""The case verdict: run failure, then assertions, then budgets; normalized output kept."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from trialrun.base.assertion_api import CheckSubject, CompileContext, CompiledAssertion
from trialrun.base.quoting import shortened
from trialrun.base.results import AgentRun, CheckFailure, Failure, ToolCall, Usage
from trialrun.checks.builtin import CALL_ORDER, REQUIRED_FIELDS
from trialrun.checks.verdict import judge_case
from trialrun.config.models import Budgets, CaseConfig, Normalization, ReplaceText

CTX = CompileContext(resolve_path=Path)


@dataclass(frozen=True)
class Case:
    """Shaped like the loader's Case."""

    assertions: list[CompiledAssertion] = field(default_factory=list)
    budgets: Budgets = field(default_factory=Budgets)
    normalization: Normalization = field(default_factory=Normalization)
    config: CaseConfig = field(
        default_factory=lambda: CaseConfig(id="t1", input={}, cassette="cassettes/t1.jsonl")
    )
    cassette_path: Path = Path("/suite/cassettes/t1.jsonl")


@dataclass
class Spy:
    """An assertion that records what it saw."""

    fail_with: str | None = None
    seen: list[CheckSubject] = field(default_factory=list)
    type: str = "spy"

    def check(self, subject: CheckSubject) -> list[CheckFailure]:
        self.seen.append(subject)
        return [CheckFailure(type=self.type, message=self.fail_with)] if self.fail_with else []


class Exploding:
    type = "exploding"

    def check(self, subject: CheckSubject) -> list[CheckFailure]:
        raise KeyError("boom")


def required(*fields: str) -> CompiledAssertion:
    return REQUIRED_FIELDS.compile({"fields": list(fields)}, CTX)


def agent_run(output: dict[str, Any] | None = None, **fields: Any) -> AgentRun:
    return AgentRun(case_id="t1", output=output, **fields)


def test_a_clean_run_passes() -> None:
    spy = Spy()
    result = judge_case(Case(assertions=[spy, required("a")]), agent_run({"a": 1}))
    assert result.status == "pass" and result.passed
    assert result.failure is None and result.check_failures == []
    assert result.case_id == "t1"
    assert result.assertions_total == 2
    assert result.cassette_path == "/suite/cassettes/t1.jsonl"
    assert spy.seen[0].output == {"a": 1}


def test_all_assertion_failures_are_collected_and_joined() -> None:
    order = CALL_ORDER.compile({"order": ["lookup_order", "search_docs"]}, CTX)
    calls = [ToolCall(call_id="c1", name="search_docs", args={}, ok=True)]
    result = judge_case(
        Case(assertions=[required("category", "reply"), Spy(), order]),
        agent_run({"category": "x"}, tool_calls=calls),
    )
    assert result.status == "fail"
    assert result.failure == Failure(
        "assertion_failed",
        "Missing required fields: reply\n"
        "Tool call order not satisfied: lookup_order -> search_docs",
        "fail",
    )
    assert [f.type for f in result.check_failures] == ["required_fields", "call_order"]
    assert result.check_failures[1].observed == "search_docs"


def test_a_run_failure_wins_and_assertions_are_not_evaluated() -> None:
    spy = Spy(fail_with="never")
    failure = Failure("agent_error", "Agent stdout closed unexpectedly", "error")
    result = judge_case(Case(assertions=[spy]), agent_run(None, failure=failure))
    assert result.status == "error"
    assert result.failure is failure
    assert result.check_failures == []
    assert result.assertions_total == 1  # configured, even though not evaluated
    assert spy.seen == []


def test_exceeded_budgets_are_recorded_for_information_on_a_failed_run() -> None:
    failure = Failure("cassette_mismatch", "Cassette mismatch.", "fail")
    calls = [ToolCall(call_id=f"c{i}", name="t", args={}, ok=True) for i in range(3)]
    run = agent_run(None, failure=failure, tool_calls=calls)
    budgets = Budgets(max_tool_calls=1, max_tokens_out=10)  # tokens: never reported
    result = judge_case(Case(budgets=budgets), run)
    assert result.status == "fail"
    assert result.failure is failure
    assert [f.message for f in result.check_failures] == [
        "Budget exceeded: max_tool_calls limit=1 actual=3"
    ]


def test_a_cassette_mismatch_is_counted_once_not_also_as_a_tool_error() -> None:
    failure = Failure("cassette_mismatch", "Cassette mismatch.", "fail")
    refused = ToolCall("c1", "t", {}, ok=False, error="Cassette mismatch.", refused=True)
    failed = ToolCall("c0", "t", {}, ok=False, error="boom")
    result = judge_case(
        Case(budgets=Budgets(max_tool_errors=0)),
        agent_run(None, failure=failure, tool_calls=[refused]),
    )
    assert result.failure is failure
    assert result.check_failures == []
    assert result.tool_errors_by_name() == {}
    # A tool that did answer with an error still counts.
    counted = judge_case(
        Case(budgets=Budgets(max_tool_errors=0)),
        agent_run(None, failure=failure, tool_calls=[failed, refused]),
    )
    assert [f.message for f in counted.check_failures] == [
        "Budget exceeded: max_tool_errors limit=0 actual=1"
    ]
    assert counted.tool_errors_by_name() == {"t": 1}


def test_assertion_failures_come_before_budget_failures() -> None:
    run = agent_run({}, wall_ms=50)
    result = judge_case(Case(assertions=[required("a")], budgets=Budgets(max_wall_ms=10)), run)
    assert result.failure is not None
    assert result.failure.kind == "assertion_failed"
    assert [f.type for f in result.check_failures] == ["required_fields", "budget:max_wall_ms"]


def test_budgets_fail_a_case_whose_assertions_pass() -> None:
    run = agent_run({"a": 1}, wall_ms=40029, usage=Usage(cost_usd=0.5))
    budgets = Budgets(max_wall_ms=1000, max_cost_usd=0.1)
    result = judge_case(Case(assertions=[required("a")], budgets=budgets), run)
    assert result.status == "fail"
    assert result.failure == Failure(
        "budget_exceeded",
        "Budget exceeded: max_wall_ms limit=1000 actual=40029; max_cost_usd limit=0.1 actual=0.5",
        "fail",
    )
    assert [f.type for f in result.check_failures] == ["budget:max_wall_ms", "budget:max_cost_usd"]


def test_an_unverifiable_budget_fails_a_passing_case() -> None:
    result = judge_case(Case(budgets=Budgets(max_tokens_out=100)), agent_run({"a": 1}))
    assert result.status == "fail"
    assert result.failure is not None
    assert result.failure.message == (
        "Budget exceeded: max_tokens_out limit=100 actual=unknown (the agent sent no usage message)"
    )


def test_assertions_see_the_normalized_output_and_the_result_keeps_it() -> None:
    rules = Normalization(
        strip_keys=["request_id"], replace_text=[ReplaceText(pattern=r"\d+", replacement="N")]
    )
    spy = Spy()
    run = agent_run({"reply": "order 123", "request_id": "r-9"})
    result = judge_case(Case(assertions=[spy], normalization=rules), run)
    assert spy.seen[0].output == {"reply": "order N"}
    assert result.run.output == {"reply": "order N"}
    assert run.output == {"reply": "order 123", "request_id": "r-9"}  # caller's run untouched
    assert result.run is not run and result.run.case_id == "t1"


def test_a_crashing_assertion_makes_the_case_an_error_without_stopping_the_others() -> None:
    result = judge_case(Case(assertions=[Exploding(), required("a")]), agent_run({}))
    assert result.status == "error"
    assert result.failure is not None
    assert result.failure.kind == "assertion_failed"
    assert result.failure.message == (
        "Assertion exploding raised KeyError: 'boom'\nMissing required fields: a"
    )


class Returning:
    """A plugin's check that answers ``answer``, or raises it."""

    type = "plugin"

    def __init__(self, answer: Any) -> None:
        self.answer = answer

    def check(self, subject: CheckSubject) -> Any:
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer


class Mute(Exception):
    def __str__(self) -> str:
        raise RuntimeError("cannot say")


def _containing_itself() -> dict[str, Any]:
    details: dict[str, Any] = {}
    details["again"] = details
    return details


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (Mute(), "Assertion plugin raised Mute"),
        (KeyError(), "Assertion plugin raised KeyError"),
        (SystemExit(4), "Assertion plugin raised SystemExit: 4"),
        (None, "Assertion plugin raised TypeError: 'NoneType' object is not iterable"),
        (["no"], "Assertion plugin returned str, expected CheckFailure items"),
        (
            [CheckFailure(type="plugin", message={"a": 1})],  # type: ignore[arg-type]
            "Assertion plugin returned a CheckFailure whose type or message is not a string",
        ),
        (
            [CheckFailure(type="plugin", message="m", expected=3)],  # type: ignore[arg-type]
            "Assertion plugin returned a CheckFailure whose expected or observed is not a "
            "string or None",
        ),
        (
            [CheckFailure(type="plugin", message="m", details=_containing_itself())],
            "Assertion plugin returned a CheckFailure whose details are not JSON: objects and "
            f"arrays nested more than 100 levels deep at {shortened('$' + '.again' * 100, 200)}"
            " (or a value that contains itself)",
        ),
        (
            [CheckFailure(type="plugin", message="m", details=[1])],  # type: ignore[arg-type]
            "Assertion plugin returned a CheckFailure whose details are not JSON: not a dict",
        ),
    ],
    ids=[
        "str raises",
        "says nothing",
        "exits",
        "None",
        "a string",
        "message not text",
        "expected not text",
        "details contain themselves",
        "details a list",
    ],
)
def test_a_plugin_check_that_answers_what_reports_cannot_write_is_an_error_on_its_case(
    answer: Any, message: str
) -> None:
    result = judge_case(Case(assertions=[Returning(answer), required("a")]), agent_run({}))
    assert result.status == "error"
    assert result.failure is not None
    assert result.failure.message == f"{message}\nMissing required fields: a"


def test_a_plugin_check_may_answer_any_iterable_of_failures() -> None:
    failure = CheckFailure(type="plugin", message="no", details={"seen": [1, 2]})
    result = judge_case(Case(assertions=[Returning(iter([failure]))]), agent_run({}))
    assert result.status == "fail"
    assert result.check_failures == [failure]


def test_no_output_and_no_failure_is_an_agent_error() -> None:
    result = judge_case(Case(assertions=[Spy()]), agent_run(None))
    assert result.status == "error"
    assert result.failure is not None and result.failure.kind == "agent_error"


def test_a_wall_deadline_kill_is_not_reported_twice() -> None:
    for wall_ms in (1500, 1503):
        run = AgentRun(case_id="t1", wall_ms=wall_ms)
        run.failure = Failure("timeout", "Agent exceeded max_wall_ms=1500", "fail")
        result = judge_case(Case(budgets=Budgets(max_wall_ms=1500)), run)
        assert result.failure is not None and result.failure.kind == "timeout"
        assert [f.type for f in result.check_failures] == []
