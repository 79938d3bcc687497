"""The PydanticAI adapter: a capability whose ``wrap_tool_execute`` sends tool calls to the runner.

Checked against pydantic-ai-slim 2.68. ``AbstractCapability.wrap_tool_execute(ctx, *, call,
tool_def, args, handler)`` encloses the execution of each function tool with already validated
arguments; not calling ``handler`` skips the real tool. The capability asks to be the innermost
one, so other capabilities' wrap hooks (instrumentation spans, say) run in replay as well; the
``before/after_tool_execute`` hooks run inside ``handler`` and so only where the tool really runs.

Use it per run, ``agent.run_sync(prompt, capabilities=[trialrun_capability()])``, at
construction, ``Agent(..., capabilities=[trialrun_capability()])``, or let
``trialrun.agent.wrap(agent)`` return an agent whose every run carries it.

The recorded result is the tool's return value as JSON data (a pydantic model becomes its JSON
object), which is also what the model is shown. An ``ok: false`` answer is raised as
``ModelRetry(error)``: exactly what a tool raising ``ModelRetry`` does, and for a tool that
crashed, the model sees the error and may retry instead of the run ending at once. Output tools
and deferred tools (external, needing approval) are not recorded.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from trialrun.agent.client import ToolCallError, connect
from trialrun.agent.extras import missing_framework

try:
    from pydantic_ai.agent import AbstractAgent, WrapperAgent
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.capabilities.abstract import CapabilityOrdering, WrapToolExecuteHandler
    from pydantic_ai.exceptions import (
        ApprovalRequired,
        CallDeferred,
        ModelRetry,
        SkipToolExecution,
    )
    from pydantic_ai.messages import ToolCallPart
    from pydantic_ai.tools import RunContext, ToolDefinition
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise missing_framework("pydantic_ai", "pydantic-ai", exc) from exc

T = TypeVar("T")

_CONTROL_FLOW = (ApprovalRequired, CallDeferred, SkipToolExecution)


@dataclass
class TrialrunCapability(AbstractCapability[Any]):
    """Sends each function-tool call of a run through the trialrun runner."""

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # not meant for agent spec files

    def get_ordering(self) -> CapabilityOrdering:
        return CapabilityOrdering(position="innermost")

    async def wrap_tool_execute(
        self,
        ctx: RunContext[Any],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: dict[str, Any],
        handler: WrapToolExecuteHandler,
    ) -> Any:
        session = connect()
        if session is None or tool_def.kind != "function":
            return await handler(args)
        try:
            return await session.acall_tool(call.tool_name, args, lambda: handler(args))
        except ToolCallError as error:
            if isinstance(error.__cause__, _CONTROL_FLOW):
                raise error.__cause__ from None  # deferral and skipping are not tool results
            raise ModelRetry(error.error) from error


def trialrun_capability() -> TrialrunCapability:
    """The capability for ``capabilities=[...]`` of ``Agent(...)`` or of one run."""
    return TrialrunCapability()


class TrialrunAgent(WrapperAgent[Any, Any]):
    """An agent whose runs all carry the trialrun capability (what ``wrap(agent)`` returns)."""

    @asynccontextmanager
    async def iter(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        # Every run API of an agent (run, run_sync, run_stream, run_stream_events) enters iter().
        extra = list(kwargs.pop("capabilities", None) or ())
        kwargs["capabilities"] = [*extra, trialrun_capability()]
        async with self.wrapped.iter(*args, **kwargs) as run:
            yield run

    def __getattr__(self, name: str) -> Any:
        # Registration decorators and settings of the wrapped agent stay reachable.
        return getattr(self.wrapped, name)


def wrap_agent(agent: T) -> T:
    """``agent`` with the trialrun capability on every run (a ``TrialrunAgent``)."""
    if isinstance(agent, TrialrunAgent):
        return agent
    if not isinstance(agent, AbstractAgent):
        raise TypeError(f"expected a pydantic_ai Agent, found {type(agent).__name__}")
    wrapped: Any = TrialrunAgent(agent)
    return wrapped  # type: ignore[no-any-return]
