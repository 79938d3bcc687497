"""The OpenAI Agents SDK adapter: each ``FunctionTool`` of an agent calls through the runner.

Checked against openai-agents 0.24. The hook is ``FunctionTool.on_invoke_tool(ctx, args_json)``,
which the run loop awaits for every function call of the model; the arguments arrive as the
model's JSON string. The wrapper sends them (parsed) as the tool call, and in record/live runs the
original invoker, so the SDK's own argument validation and failure handling still happen. What the
tool returned goes to the runner as JSON data and comes back as the result the model sees (the
SDK shows the model ``str(result)``, or the structured form of a ``{"type": "text", ...}`` dict).

An ``ok: false`` answer goes through the tool's failure formatter exactly as an exception in the
tool would (by default "An error occurred while running the tool..."); with the formatter
disabled (``failure_error_function=None``) the ``ToolCallError`` propagates and ends the run.

The agent's handoff agents and agents used as tools are wrapped too, each agent once; an agent
used as a tool is not itself recorded as one call, its own tools are. Each handoff is reported to
the runner as it happens (``Session.handoff``), which puts a tool-like ``handoff:<agent>`` event
in the trace for assertions; the handoff itself always runs here (it returns an agent, not data
a cassette could hold). An ``Agent`` listed directly in ``handoffs`` is replaced by the
``handoff(agent)`` object the SDK would have built for it, so that there is an invoker to wrap.
Tools served by MCP servers (``mcp_servers=``) are not function tools of the agent: route those
through the MCP proxy.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from trialrun.agent.client import ToolCallError, connect
from trialrun.agent.extras import missing_framework

try:
    from agents.agent import Agent
    from agents.handoffs import Handoff, handoff
    from agents.tool import FunctionTool, maybe_invoke_function_tool_failure_error_function
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise missing_framework("openai-agents", "openai-agents", exc) from exc

T = TypeVar("T")

_WRAPPED = "__trialrun_wrapped__"
INVALID_ARGUMENTS_KEY = "_invalid_json_arguments"
"""Where arguments that are not a JSON object go, so even a malformed call is recorded."""

Invoker = Callable[[Any, str], Awaitable[Any]]


def wrap_agent(agent: T) -> T:
    """Wrap the function tools of ``agent`` and of every agent reachable from it, in place."""
    if not isinstance(agent, Agent):
        raise TypeError(f"expected an agents.Agent, found {type(agent).__name__}")
    pending: list[Agent[Any]] = [agent]
    seen: set[int] = set()
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        for candidate in current.tools:
            if not isinstance(candidate, FunctionTool):
                continue
            inner_agent = _agent_behind(candidate)
            if inner_agent is not None:
                pending.append(inner_agent)
            else:
                wrap_function_tool(candidate)
        for index, leads_to in enumerate(current.handoffs):
            target = leads_to if isinstance(leads_to, Agent) else _handoff_target(leads_to)
            if target is not None:
                pending.append(target)
            current.handoffs[index] = _reported_handoff(current, leads_to)
    return agent


def _reported_handoff(source: Agent[Any], leads_to: Any) -> Any:
    """``leads_to`` (an agent or a ``Handoff``) as a ``Handoff`` that reports itself when taken.

    A copy per agent that lists it: the same ``Handoff`` may be listed by several agents, and
    each copy names its own source.
    """
    found = handoff(leads_to) if isinstance(leads_to, Agent) else leads_to
    if not isinstance(found, Handoff) or getattr(found.on_invoke_handoff, _WRAPPED, False):
        return leads_to
    original = found.on_invoke_handoff

    async def invoke(ctx: Any, input_json: str) -> Any:
        target = await original(ctx, input_json)
        session = connect()
        if session is not None:
            name = getattr(target, "name", None) or found.agent_name
            session.handoff(str(name), source=source.name)
        return target

    setattr(invoke, _WRAPPED, True)
    # A shallow copy keeps the fields the SDK sets after construction (its weak reference to
    # the target agent), which dataclasses.replace would drop.
    reported = copy.copy(found)
    reported.on_invoke_handoff = invoke
    return reported


def wrap_function_tool(function_tool: FunctionTool) -> FunctionTool:
    """Make one ``FunctionTool`` call through the runner (idempotent; returns the same tool)."""
    original: Invoker = function_tool.on_invoke_tool
    if getattr(original, _WRAPPED, False):
        return function_tool

    async def invoke(ctx: Any, args_json: str) -> Any:
        session = connect()
        if session is None:
            return await original(ctx, args_json)
        name = getattr(ctx, "tool_name", None) or function_tool.name
        try:
            return await session.acall_tool(
                name, _arguments(args_json), lambda: original(ctx, args_json)
            )
        except ToolCallError as error:
            message = await maybe_invoke_function_tool_failure_error_function(
                function_tool=function_tool, context=ctx, error=error
            )
            if message is None:  # the tool's failures are meant to end the run
                raise
            return message

    setattr(invoke, _WRAPPED, True)
    function_tool.on_invoke_tool = invoke
    return function_tool


def _arguments(args_json: str) -> dict[str, Any]:
    try:
        parsed = json.loads(args_json) if args_json.strip() else {}
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        return parsed
    # The SDK's invoker reports bad JSON to the model; recording the raw text keeps that call
    # (and its error message) in the cassette like any other.
    return {INVALID_ARGUMENTS_KEY: args_json}


def _agent_behind(function_tool: FunctionTool) -> Agent[Any] | None:
    """The agent of an ``agent.as_tool()`` tool (private SDK fields, read defensively)."""
    if not getattr(function_tool, "_is_agent_tool", False):
        return None
    inner = getattr(function_tool, "_agent_instance", None)
    return inner if isinstance(inner, Agent) else None


def _handoff_target(handoff: Any) -> Agent[Any] | None:
    """The agent a ``handoff(agent)`` object leads to (the SDK keeps a weak reference)."""
    reference = getattr(handoff, "_agent_ref", None)
    target = reference() if callable(reference) else None
    return target if isinstance(target, Agent) else None
