"""Budgets: limits on what one case may spend (time, tool calls, tool errors, tokens, money).

A limit is exceeded when the actual value is strictly greater (RunLedger's rule). RunLedger
accepted ``max_tokens_out`` and ``max_cost_usd`` but never checked them; we check them against
the totals of the agent's ``usage`` messages. A token or cost budget the agent never reported
usage for cannot be verified, and a budget that cannot be verified is not met: it fails too,
with a message saying why.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from trialrun.base.results import AgentRun, CheckFailure

if TYPE_CHECKING:
    # Only for annotations: the config records are loaded by whoever built the rules.
    from trialrun.config.models import Budgets

NOT_REPORTED = "unknown (the agent sent no usage message)"


def check_budgets(budgets: Budgets, run: AgentRun) -> list[CheckFailure]:
    """One failure per budget that was exceeded or cannot be verified, in a fixed order."""
    observed: list[tuple[str, int | float | None, int | float | None]] = [
        ("max_wall_ms", budgets.max_wall_ms, run.wall_ms),
        # Every tool_call message counts, including one refused by the allow-list; a handoff
        # between agents is in the trace for assertions, but calls no tool.
        ("max_tool_calls", budgets.max_tool_calls, run.tool_call_count),
        ("max_tool_errors", budgets.max_tool_errors, run.tool_errors),
        ("max_tokens_out", budgets.max_tokens_out, run.usage.tokens_out),
        ("max_cost_usd", budgets.max_cost_usd, run.usage.cost_usd),
    ]
    failures: list[CheckFailure] = []
    for field, limit, actual in observed:
        if limit is None:
            continue
        if actual is None:
            failures.append(_unverifiable(field, limit))
        elif actual > limit:
            failures.append(_exceeded(field, limit, actual))
    return failures


def is_unverifiable(failure: CheckFailure) -> bool:
    """True for a budget failure that says "cannot be verified" rather than "exceeded"."""
    return failure.details is not None and failure.details.get("actual") is None


def budget_failure_message(failures: Sequence[CheckFailure]) -> str:
    """The case failure message, as RunLedger writes it: one prefix, parts joined by "; "."""
    return "Budget exceeded: " + "; ".join(_part(failure) for failure in failures)


def _part(failure: CheckFailure) -> str:
    details = failure.details or {}
    field, limit, actual = details.get("field"), details.get("limit"), details.get("actual")
    shown = NOT_REPORTED if actual is None else _number(actual)
    return f"{field} limit={_number(limit)} actual={shown}"


def _exceeded(field: str, limit: int | float, actual: int | float) -> CheckFailure:
    return CheckFailure(
        type=f"budget:{field}",
        message=f"Budget exceeded: {field} limit={_number(limit)} actual={_number(actual)}",
        expected=f"{field} <= {_number(limit)}",
        observed=_number(actual),
        details={"field": field, "limit": limit, "actual": actual},
    )


def _unverifiable(field: str, limit: int | float) -> CheckFailure:
    reported = "tokens_out" if field == "max_tokens_out" else "cost_usd"
    return CheckFailure(
        type=f"budget:{field}",
        message=(
            f"Budget cannot be verified: {field} limit={_number(limit)}, but the agent sent no "
            f"`usage` message with {reported}"
        ),
        expected=f"{field} <= {_number(limit)}",
        observed="<not reported>",
        details={"field": field, "limit": limit, "actual": None},
    )


def _number(value: object) -> str:
    # Sums of float costs pick up binary noise (0.1 + 0.2); nine decimals is far below a cent.
    if isinstance(value, float):
        return repr(round(value, 9))
    return str(value)
