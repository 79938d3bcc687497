"""What every tool backend promises the session: answer a call, report leftovers, close.

The session talks to one ``ToolBackend`` per case and never knows whether the answer came from a
cassette (replay), a Python function (live) or a function whose answers are being written down
(record). That seam is what lets replay be the default in CI and live/record the exception.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from trialrun.base.results import JsonObject

if TYPE_CHECKING:
    from trialrun.config.models import Normalization


# Not frozen, though nothing changes an outcome once made: one is made per tool call, and a
# frozen dataclass's __init__ sets each field through object.__setattr__, on every call.
@dataclass(slots=True)
class ToolOutcome:
    """The answer to one tool call, exactly as it is sent back to the agent; read-only."""

    ok: bool
    result: Any = None
    error: str | None = None


LocalTool = Callable[[], Awaitable[ToolOutcome]]
"""Runs a tool the agent holds in-process (``tool_call`` with ``local: true``) and reports it."""


class ToolBackend(Protocol):
    """Answers the tool calls of one case."""

    async def call(
        self, name: str, args: JsonObject, local: LocalTool | None = None
    ) -> ToolOutcome:
        """Answer one call. Replay raises ``CassetteMismatch`` when nothing was recorded for it.

        ``local`` is given when the agent can run the tool itself: a live backend then asks it
        to, instead of looking the tool up; replay ignores it and answers from the cassette.
        """
        ...

    def close(self, *, clean: bool) -> None:
        """End the case. A recorder commits its cassette only when ``clean`` is true."""
        ...

    def unused(self) -> int:
        """How many recordings were never consumed (0 for backends that do not replay)."""
        ...


def normalized_outcome(
    ok: bool, result: Any, error: str | None, rules: Normalization | None
) -> ToolOutcome:
    """Build the outcome the agent sees, with the suite's normalization applied.

    Normalization runs on replayed data too (which was normalized when recorded), so it must be
    idempotent; the normalizer guarantees that. It is imported lazily because most suites have no
    rules and the CLI's start-up time matters.
    """
    if rules is None or rules.is_empty:
        return ToolOutcome(ok=ok, result=result, error=error)
    from trialrun.config.normalize import normalize

    normalized_error = normalize(error, rules) if error is not None else None
    return ToolOutcome(
        ok=ok,
        result=normalize(result, rules),
        error=normalized_error if isinstance(normalized_error, str) else error,
    )
