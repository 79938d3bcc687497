"""The LangChain / LangGraph adapter: tool calls of a ``ToolNode`` go through the runner.

Checked against langchain 1.5 and langgraph 1.2. Both run tools in ``langgraph.prebuilt.ToolNode``,
which accepts a ``wrap_tool_call(request, execute)`` interceptor (and an async twin); LangChain's
``create_agent`` builds it from the ``wrap_tool_call`` hooks of its middleware. Three ways in:

* ``create_agent(model, tools, middleware=[..., trialrun_middleware()])``; put it last, so it is
  the innermost layer and other middleware (retries, logging) runs in replay too;
* ``ToolNode(tools, wrap_tool_call=tool_call_wrapper, awrap_tool_call=atool_call_wrapper)``;
* ``trialrun.agent.wrap(graph)`` on a compiled graph: installs the wrapper, innermost, in every
  ``ToolNode`` of the graph (and of its subgraphs).

The recorded result is what the model sees: the ``ToolMessage`` content (a string, or a list of
content blocks). A ``ToolMessage`` with ``status="error"`` (a ``ToolException`` handled by the
tool, bad arguments) is recorded as ``ok: false`` with that content as the error, and any
``ok: false`` answer reaches the model as such an error message; so does an exception raised by
the tool, where without trialrun it would end the graph run. Tools that return a ``Command``
(state updates) cannot be recorded; graph interrupts propagate unchanged. Tools called inside
your own graph nodes bypass ``ToolNode``: decorate those functions with ``@trialrun.agent.tool``.

A sync run (``invoke``/``stream``) runs a turn's tool calls in a thread pool, in any order; so each
call of a turn goes to the runner only after the calls the model listed before it (the last
``AIMessage``'s ``tool_calls`` in ``request.state``, less those already answered) went there or
ended without it (``callorder``). Only the sending waits, not the interceptors around it. The
wrapper ``wrap()`` installs sees a call end that another wrapper answered itself; the middleware,
innermost, does not, and the calls after such a call wait ``callorder.PATIENCE`` for it.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from trialrun.agent import callorder
from trialrun.agent.calllock import _loop_running_here
from trialrun.agent.callorder import TurnOrder, turns_of
from trialrun.agent.client import Session, ToolCallError, connect
from trialrun.agent.extras import missing_framework

try:
    from langchain_core.messages import AIMessage, ToolMessage
    from langgraph.errors import GraphBubbleUp
    from langgraph.prebuilt import ToolNode
    from langgraph.prebuilt.tool_node import ToolCallRequest
    from langgraph.pregel import Pregel
    from langgraph.types import Command
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise missing_framework("langgraph", "langgraph", exc) from exc

T = TypeVar("T")

ToolOutcome = ToolMessage | Command[Any]
Execute = Callable[[ToolCallRequest], ToolOutcome]
AsyncExecute = Callable[[ToolCallRequest], Awaitable[ToolOutcome]]

_WRAPPED = "__trialrun_wrapped__"


class UnsupportedToolResultError(TypeError):
    """A tool returned something trialrun cannot record and replay (a ``Command``)."""


class _ErrorMessage(Exception):
    """The tool answered with an error ``ToolMessage``: recorded as ``ok: false``."""


def tool_call_wrapper(request: ToolCallRequest, execute: Execute) -> ToolOutcome:
    """``ToolNode(wrap_tool_call=...)``: the call goes through the runner under ``trialrun run``."""
    session = connect()
    if session is None:
        return execute(request)
    call = request.tool_call
    turn = _turn_of(session, request)
    call_id = str(call.get("id"))
    try:
        if turn is not None:
            _wait_turn(session, turn, call_id, call["name"])
        content = session.call_tool(
            call["name"],
            dict(call["args"]),
            lambda: _recorded_content(execute(request)),
            queued=None if turn is None else lambda: turn.passed(call_id),
        )
    except ToolCallError as error:
        return _error_message(request, error)
    finally:
        if turn is not None:
            turn.passed(call_id)  # also when it ended before it queued (bad arguments)
    return _message(request, content)


async def atool_call_wrapper(request: ToolCallRequest, execute: AsyncExecute) -> ToolOutcome:
    """``ToolNode(awrap_tool_call=...)``: the async twin of ``tool_call_wrapper``."""
    session = connect()
    if session is None:
        return await execute(request)
    call = request.tool_call

    async def run() -> Any:
        return _recorded_content(await execute(request))

    try:
        content = await session.acall_tool(call["name"], dict(call["args"]), run)
    except ToolCallError as error:
        return _error_message(request, error)
    return _message(request, content)


def trialrun_middleware() -> Any:
    """An ``AgentMiddleware`` for ``create_agent(..., middleware=[trialrun_middleware()])``."""
    try:
        from langchain.agents.middleware import AgentMiddleware
    except ImportError as exc:
        raise missing_framework("langchain", "langchain", exc) from exc

    class TrialrunMiddleware(AgentMiddleware):
        """Sends each tool call through the trialrun runner (innermost when listed last)."""

        def wrap_tool_call(self, request: ToolCallRequest, handler: Execute) -> ToolOutcome:
            return tool_call_wrapper(request, handler)

        async def awrap_tool_call(
            self, request: ToolCallRequest, handler: AsyncExecute
        ) -> ToolOutcome:
            return await atool_call_wrapper(request, handler)

    return TrialrunMiddleware()


def wrap_graph(graph: T) -> T:
    """Install the trialrun wrapper in every ``ToolNode`` of a compiled graph, in place."""
    if not isinstance(graph, Pregel):
        raise TypeError(f"expected a compiled LangGraph graph, found {type(graph).__name__}")
    found = _install_in(graph, seen=set())
    if not found:
        raise TypeError(
            "this graph has no ToolNode, so trialrun.agent.wrap() cannot reach its tool calls; "
            "decorate the tool functions your nodes call with @trialrun.agent.tool"
        )
    return graph


def _install_in(graph: Pregel[Any, Any, Any, Any], seen: set[int]) -> int:
    if id(graph) in seen:
        return 0
    seen.add(id(graph))
    found = 0
    for node in graph.nodes.values():
        bound = getattr(node, "bound", None)
        if isinstance(bound, ToolNode):
            _install(bound)
            found += 1
        elif isinstance(bound, Pregel):
            found += _install_in(bound, seen)
    return found


def _install(node: ToolNode) -> None:
    # ToolNode keeps its interceptors in these two attributes (langgraph 1.2); refuse rather than
    # guess if a later version renamed them.
    if not (hasattr(node, "_wrap_tool_call") and hasattr(node, "_awrap_tool_call")):
        raise TypeError(
            "this langgraph version's ToolNode cannot take the trialrun wrapper in place; build "
            "it as ToolNode(tools, wrap_tool_call=trialrun.agent.langchain.tool_call_wrapper, "
            "awrap_tool_call=trialrun.agent.langchain.atool_call_wrapper)"
        )
    existing_sync = node._wrap_tool_call
    existing_async = node._awrap_tool_call
    if getattr(existing_sync, _WRAPPED, False) or getattr(existing_async, _WRAPPED, False):
        return
    node._wrap_tool_call = _innermost_sync(existing_sync)
    # With only a sync interceptor, ToolNode runs it for async invocations too: keep that.
    if existing_async is not None or existing_sync is None:
        node._awrap_tool_call = _innermost_async(existing_async)


def _innermost_sync(outer: Any) -> Any:
    def wrapper(request: ToolCallRequest, execute: Execute) -> ToolOutcome:
        if outer is None:
            return tool_call_wrapper(request, execute)
        try:
            result: ToolOutcome = outer(request, lambda req: tool_call_wrapper(req, execute))
        finally:
            _ended(request)  # the user's wrapper may have answered it without trialrun
        return result

    setattr(wrapper, _WRAPPED, True)
    return wrapper


def _innermost_async(outer: Any) -> Any:
    async def wrapper(request: ToolCallRequest, execute: AsyncExecute) -> ToolOutcome:
        if outer is None:
            return await atool_call_wrapper(request, execute)

        async def inner(req: ToolCallRequest) -> ToolOutcome:
            return await atool_call_wrapper(req, execute)

        result: ToolOutcome = await outer(request, inner)
        return result

    setattr(wrapper, _WRAPPED, True)
    return wrapper


def _turn_of(session: Session, request: ToolCallRequest) -> TurnOrder | None:
    """The order of the model turn this call belongs to, or None when there is none to keep."""
    if _loop_running_here() is not None:
        # An async run calling the sync wrapper on its loop: its calls start in the model's
        # order, and waiting here would stall the very loop the earlier calls need.
        return None
    messages = _messages_of(request.state)
    last = next(
        (i for i in range(len(messages) - 1, -1, -1) if isinstance(messages[i], AIMessage)), None
    )
    if last is None:
        return None
    model_turn: AIMessage = messages[last]
    answered = {m.tool_call_id for m in messages[last + 1 :] if isinstance(m, ToolMessage)}
    # Calls for tools this node does not have (create_agent's structured output, names only a
    # middleware answers) may never come here: no call waits for them.
    tools = getattr(getattr(request, "runtime", None), "tools", None)
    names = {t.name for t in tools} if isinstance(tools, list) else None
    pending = [
        call.get("id")
        for call in model_turn.tool_calls
        if call.get("id") not in answered and (names is None or call["name"] in names)
    ]
    ids = [i for i in pending if isinstance(i, str)]
    if len(ids) < 2 or len(ids) != len(pending) or len(set(ids)) != len(ids):
        return None  # nothing to order, or calls that cannot be told apart
    if request.tool_call.get("id") not in ids:
        return None
    return turns_of(session).turn(("langchain", model_turn.id, tuple(ids)), ids)


def _messages_of(state: Any) -> list[Any]:
    if isinstance(state, list):
        return state
    if isinstance(state, dict):
        messages = state.get("messages")
    else:
        messages = getattr(state, "messages", None)
    return messages if isinstance(messages, list) else []


def _wait_turn(session: Session, turn: TurnOrder, call_id: str, name: str) -> None:
    missing = turn.wait_turn(call_id)
    if missing:
        session.log(
            f"tool call {call_id!r} ({name}) went to the runner without waiting any longer for "
            f"{', '.join(map(repr, missing))}, listed before it in the same model turn, which "
            f"did not reach trialrun within {callorder.PATIENCE:g} s; this turn's call order may "
            "differ between runs",
            level="warning",
            data={"call_id": call_id, "not_waited_for": missing},
        )


def _ended(request: ToolCallRequest) -> None:
    """A call left the wrappers: the calls after it need not wait for it any longer."""
    session = connect()
    turn = None if session is None else _turn_of(session, request)
    if turn is not None:
        turn.passed(str(request.tool_call.get("id")))


def _recorded_content(outcome: ToolOutcome) -> Any:
    """What the model sees of a tool's answer, as the runner records it."""
    if isinstance(outcome, ToolMessage):
        if outcome.status == "error":
            raise _ErrorMessage(_text(outcome.content))
        return outcome.content
    raise UnsupportedToolResultError(
        f"the tool returned a {type(outcome).__name__}, not a ToolMessage; trialrun records and "
        "replays the message the model sees, so tools that update graph state with a Command "
        "cannot be recorded"
    )


def _message(request: ToolCallRequest, content: Any) -> ToolMessage:
    call = request.tool_call
    if not isinstance(content, str | list):
        content = _text(content)
    return ToolMessage(content=content, tool_call_id=call.get("id") or "", name=call["name"])


def _error_message(request: ToolCallRequest, error: ToolCallError) -> ToolMessage:
    cause = error.__cause__
    if isinstance(cause, GraphBubbleUp | UnsupportedToolResultError):
        raise cause  # an interrupt, or a tool result that cannot be recorded: not data
    call = request.tool_call
    return ToolMessage(
        content=error.error, tool_call_id=call.get("id") or "", name=call["name"], status="error"
    )


def _text(content: Any) -> str:
    # LangChain's own rule for non-string tool output: JSON when possible, else str().
    if isinstance(content, str):
        return content
    try:
        return json.dumps(content, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(content)
