"""Budgets: strict limits, RunLedger's messages, and usage that was never reported."""

from __future__ import annotations

import pytest

from trialrun.base.results import AgentRun, ToolCall, Usage
from trialrun.checks.budgets import budget_failure_message, check_budgets, is_unverifiable
from trialrun.config.models import Budgets


def agent_run(
    *, wall_ms: int = 10, calls: int = 0, errors: int = 0, usage: Usage | None = None
) -> AgentRun:
    tool_calls = [
        ToolCall(call_id=f"c{i}", name="search_docs", args={}, ok=i >= errors) for i in range(calls)
    ]
    return AgentRun(case_id="t1", wall_ms=wall_ms, tool_calls=tool_calls, usage=usage or Usage())


def test_no_budgets_no_failures() -> None:
    assert check_budgets(Budgets(), agent_run(wall_ms=10**9, calls=50, errors=50)) == []


def test_max_tool_calls_matches_the_peer_message() -> None:
    [failure] = check_budgets(Budgets(max_tool_calls=1), agent_run(calls=3))
    assert failure.type == "budget:max_tool_calls"
    assert failure.message == "Budget exceeded: max_tool_calls limit=1 actual=3"
    assert failure.expected == "max_tool_calls <= 1"
    assert failure.observed == "3"
    assert failure.details == {"field": "max_tool_calls", "limit": 1, "actual": 3}


@pytest.mark.parametrize(
    ("budgets", "run", "field", "actual"),
    [
        (Budgets(max_wall_ms=100), agent_run(wall_ms=101), "max_wall_ms", "101"),
        (Budgets(max_tool_errors=0), agent_run(calls=2, errors=1), "max_tool_errors", "1"),
        (Budgets(max_tokens_out=500), agent_run(usage=Usage(tokens_out=501)), "max_tokens_out",
         "501"),
        (Budgets(max_cost_usd=0.25), agent_run(usage=Usage(cost_usd=0.3)), "max_cost_usd", "0.3"),
    ],
)  # fmt: skip
def test_each_budget_fails_above_its_limit(
    budgets: Budgets, run: AgentRun, field: str, actual: str
) -> None:
    [failure] = check_budgets(budgets, run)
    assert failure.type == f"budget:{field}"
    assert failure.message.startswith(f"Budget exceeded: {field} limit=")
    assert failure.message.endswith(f" actual={actual}")
    assert failure.observed == actual


def test_limits_are_strict_an_equal_value_passes() -> None:
    budgets = Budgets(
        max_wall_ms=100, max_tool_calls=2, max_tool_errors=1, max_tokens_out=5, max_cost_usd=0.5
    )
    run = agent_run(wall_ms=100, calls=2, errors=1, usage=Usage(tokens_out=5, cost_usd=0.5))
    assert check_budgets(budgets, run) == []


def test_zero_limits() -> None:
    assert check_budgets(Budgets(max_tool_calls=0), agent_run(calls=0)) == []
    assert len(check_budgets(Budgets(max_tool_calls=0), agent_run(calls=1))) == 1


def test_every_tool_call_counts_including_refused_and_failed_ones() -> None:
    run = agent_run(calls=1)
    run.tool_calls.append(
        ToolCall(call_id="x", name="not_allowed", args={}, ok=False, error="Tool not allowed")
    )
    [failure] = check_budgets(Budgets(max_tool_calls=1, max_tool_errors=1), run)
    assert failure.message == "Budget exceeded: max_tool_calls limit=1 actual=2"


def test_failures_come_in_a_fixed_order() -> None:
    budgets = Budgets(max_cost_usd=0.0, max_tool_calls=0, max_wall_ms=1, max_tool_errors=0,
                      max_tokens_out=0)  # fmt: skip
    run = agent_run(wall_ms=5, calls=1, errors=1, usage=Usage(tokens_out=1, cost_usd=0.01))
    fields = [failure.type for failure in check_budgets(budgets, run)]
    assert fields == [
        "budget:max_wall_ms",
        "budget:max_tool_calls",
        "budget:max_tool_errors",
        "budget:max_tokens_out",
        "budget:max_cost_usd",
    ]


@pytest.mark.parametrize(
    ("budgets", "field", "reported"),
    [
        (Budgets(max_tokens_out=1000), "max_tokens_out", "tokens_out"),
        (Budgets(max_cost_usd=1.0), "max_cost_usd", "cost_usd"),
    ],
)
def test_a_budget_without_reported_usage_cannot_be_verified_and_fails(
    budgets: Budgets, field: str, reported: str
) -> None:
    [failure] = check_budgets(budgets, agent_run())
    assert failure.type == f"budget:{field}"
    assert failure.message.startswith(f"Budget cannot be verified: {field} limit=")
    assert f"the agent sent no `usage` message with {reported}" in failure.message
    assert failure.observed == "<not reported>"
    assert is_unverifiable(failure)


def test_usage_with_only_the_other_figure_is_still_unverifiable() -> None:
    run = agent_run(usage=Usage(tokens_in=10, tokens_out=20))
    [failure] = check_budgets(Budgets(max_tokens_out=100, max_cost_usd=1.0), run)
    assert failure.type == "budget:max_cost_usd"
    assert is_unverifiable(failure)


def test_float_noise_is_not_shown() -> None:
    usage = Usage()
    usage.add(None, None, 0.1)
    usage.add(None, None, 0.2)
    [failure] = check_budgets(Budgets(max_cost_usd=0.25), agent_run(usage=usage))
    assert failure.message == "Budget exceeded: max_cost_usd limit=0.25 actual=0.3"


def test_case_message_joins_parts_like_the_peer() -> None:
    budgets = Budgets(max_tool_calls=1, max_wall_ms=1000, max_tokens_out=10)
    failures = check_budgets(budgets, agent_run(wall_ms=40029, calls=3))
    assert not is_unverifiable(failures[0])
    assert budget_failure_message(failures) == (
        "Budget exceeded: max_wall_ms limit=1000 actual=40029; "
        "max_tool_calls limit=1 actual=3; "
        "max_tokens_out limit=10 actual=unknown (the agent sent no usage message)"
    )
