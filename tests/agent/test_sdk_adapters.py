"""The framework adapters in this process, with scripted models, against the fake runner.

The end-to-end record/replay of each framework through ``trialrun run`` is in test_sdk_e2e.py;
here are the other ways in (explicit ToolNode wrappers, per-run capability), the error paths
(``ok: false`` as each framework shows it, unrecordable results), composition with the user's
own hooks, idempotence, ``wrap()`` refusals and the missing-framework message.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import socket
import sys
from collections.abc import Callable, Iterator
from typing import Annotated, Any, TypedDict

import pytest

import trialrun.agent as sdk
from sdk_agents.fake_runner import FakeRunner, Served
from trialrun.agent import client
from trialrun.agent.channel import Channel
from trialrun.agent.client import Session

Connect = Callable[[FakeRunner], Served]


@pytest.fixture
def runner_session(monkeypatch: pytest.MonkeyPatch) -> Iterator[Connect]:
    """``connect()`` returns a session with the given fake runner for the rest of the test."""
    sessions: list[Session] = []

    def connect(runner: FakeRunner) -> Served:
        runner_end, agent_end = socket.socketpair()
        _, served = runner.start(runner_end, task_input={})
        session = Session.open(Channel(agent_end), mode=runner.mode)
        monkeypatch.setattr(client, "_connected", (os.getpid(), session))
        sessions.append(session)
        return served

    yield connect
    for session in sessions:
        session.close()


def no_runner(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRIALRUN_FD", raising=False)
    monkeypatch.setattr(client, "_connected", None)


# -- wrap() and imports -------------------------------------------------------------------------


def test_wrap_refuses_unknown_objects_and_says_what_to_use() -> None:
    with pytest.raises(TypeError) as raised:
        sdk.wrap(object())
    message = str(raised.value)
    assert "builtins.object" in message
    assert "OpenAI Agents SDK Agent" in message and "@trialrun.agent.tool" in message


@pytest.mark.parametrize(
    ("adapter", "blocked", "extra"),
    [
        ("trialrun.agent.openai_agents", "agents", "openai-agents"),
        ("trialrun.agent.langchain", "langgraph", "langgraph"),
        ("trialrun.agent.pydantic_ai", "pydantic_ai", "pydantic-ai"),
    ],
)
def test_a_missing_framework_names_the_extra_to_install(
    monkeypatch: pytest.MonkeyPatch, adapter: str, blocked: str, extra: str
) -> None:
    for name in list(sys.modules):
        if name == blocked or name.startswith(blocked + "."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, blocked, None)  # import fails as if not installed
    monkeypatch.delitem(sys.modules, adapter, raising=False)
    with pytest.raises(ImportError, match=rf"pip install 'trialrun\[{extra}\]'"):
        importlib.import_module(adapter)


def test_importing_the_sdk_imports_no_framework_and_nothing_heavy() -> None:
    import subprocess

    probe = (
        "import sys, trialrun.agent\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'asyncio', 'pydantic', "
        "'pydantic_core', 'agents', 'langchain', 'langgraph', 'pydantic_ai', 'concurrent'}))"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "[]"


# -- OpenAI Agents SDK ----------------------------------------------------------------------------


def openai_run(tools: list[Any], steps: list[Any]) -> tuple[Any, Any]:
    from agents.agent import Agent
    from agents.run import Runner
    from agents.testing import ScriptedModel
    from agents.tracing import set_tracing_disabled

    set_tracing_disabled(True)
    model = ScriptedModel(steps)
    agent = sdk.wrap(Agent(name="a", model=model, tools=tools))
    assert sdk.wrap(agent) is agent
    result = asyncio.run(Runner.run(agent, "go"))
    return result, model


def outputs_seen(model: Any) -> list[str]:
    return [
        item["output"]
        for item in model.last_call.input
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    ]


def test_openai_ok_false_goes_through_the_tools_failure_formatter(
    runner_session: Connect,
) -> None:
    from agents.testing import assistant_message, function_call
    from agents.tool import function_tool

    @function_tool
    def lookup(order_id: int) -> str:
        """Look up."""
        raise AssertionError("replay must not run the tool")

    cassette = [{"tool": "lookup", "args": {"order_id": 1}, "ok": False, "error": "gone"}]
    served = runner_session(FakeRunner("replay", cassette))
    _, model = openai_run(
        [lookup],
        [[function_call("lookup", {"order_id": 1}, call_id="c1")], [assistant_message("ok")]],
    )
    # The SDK's default formatter, as for an exception raised by the tool itself.
    assert outputs_seen(model) == ["An error occurred while running the tool. Please try again."]
    assert served.violations == []


def test_openai_without_a_failure_formatter_the_error_ends_the_run(
    runner_session: Connect,
) -> None:
    from agents.testing import assistant_message, function_call
    from agents.tool import function_tool

    @function_tool(failure_error_function=None)
    def strict(q: str) -> str:
        """Strict."""
        raise ValueError(f"bad {q}")

    from agents.exceptions import UserError

    runner_session(FakeRunner("record"))
    with pytest.raises(UserError, match="Error running tool strict: bad x") as raised:
        openai_run(
            [strict],
            [[function_call("strict", {"q": "x"}, call_id="c1")], [assistant_message("ok")]],
        )
    # As without trialrun, where the ValueError itself would be the cause.
    assert isinstance(raised.value.__cause__, sdk.ToolCallError)
    assert isinstance(raised.value.__cause__.__cause__, ValueError)


def test_openai_malformed_arguments_are_recorded_raw_and_replayed(
    runner_session: Connect,
) -> None:
    from agents.testing import assistant_message, function_call
    from agents.tool import function_tool

    from trialrun.agent.openai_agents import INVALID_ARGUMENTS_KEY

    @function_tool(strict_mode=False)
    def echo(q: str) -> str:
        """Echo."""
        return q

    steps = [[function_call("echo", "{not json", call_id="c1")], [assistant_message("ok")]]
    recorded = runner_session(FakeRunner("record"))
    _, model = openai_run([echo], steps)
    seen_in_record = outputs_seen(model)
    entry = recorded.recorded[0]
    assert entry["args"] == {INVALID_ARGUMENTS_KEY: "{not json"}

    runner_session(FakeRunner("replay", recorded.recorded))
    steps = [[function_call("echo", "{not json", call_id="c1")], [assistant_message("ok")]]
    _, model = openai_run([echo], steps)
    assert outputs_seen(model) == seen_in_record


def test_openai_outside_the_runner_tools_run_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    from agents.testing import assistant_message, function_call
    from agents.tool import function_tool

    no_runner(monkeypatch)

    @function_tool
    def double(n: int) -> int:
        """Double."""
        return n * 2

    _, model = openai_run(
        [double], [[function_call("double", {"n": 4}, call_id="c1")], [assistant_message("ok")]]
    )
    assert outputs_seen(model) == ["8"]


# -- LangGraph ------------------------------------------------------------------------------------


def scripted_graph(tool_node: Any, calls: list[dict[str, Any]]) -> Any:
    from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
    from langgraph.graph import START, StateGraph
    from langgraph.graph.message import add_messages
    from langgraph.prebuilt import tools_condition

    # The functional form: with postponed annotations a local class's hints would not resolve.
    State = TypedDict("State", {"messages": Annotated[list[AnyMessage], add_messages]})  # noqa: UP013

    def model(state: Any) -> dict[str, Any]:
        if any(isinstance(m, ToolMessage) for m in state["messages"]):
            return {"messages": [AIMessage(content="done")]}
        return {"messages": [AIMessage(content="", tool_calls=calls)]}

    builder = StateGraph(State)
    builder.add_node("model", model)
    builder.add_node("tools", tool_node)
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    builder.add_edge("tools", "model")
    return builder.compile()


def tool_messages(state: dict[str, Any]) -> list[tuple[str, Any, str]]:
    from langchain_core.messages import ToolMessage

    return [(m.name, m.content, m.status) for m in state["messages"] if isinstance(m, ToolMessage)]


def test_langgraph_explicit_tool_node_wrappers_record_then_replay(
    runner_session: Connect, monkeypatch: pytest.MonkeyPatch
) -> None:
    from langchain_core.tools import tool
    from langgraph.prebuilt import ToolNode

    from trialrun.agent.langchain import atool_call_wrapper, tool_call_wrapper

    ran: list[str] = []

    @tool
    def shout(text: str) -> str:
        """Shout."""
        ran.append(text)
        return text.upper()

    def graph() -> Any:
        node = ToolNode(
            [shout], wrap_tool_call=tool_call_wrapper, awrap_tool_call=atool_call_wrapper
        )
        return scripted_graph(node, [{"name": "shout", "args": {"text": "hi"}, "id": "c1"}])

    recorded = runner_session(FakeRunner("record"))
    first = tool_messages(graph().invoke({"messages": [("user", "go")]}))
    assert first == [("shout", "HI", "success")] and ran == ["hi"]

    runner_session(FakeRunner("replay", recorded.recorded))
    state = asyncio.run(graph().ainvoke({"messages": [("user", "go")]}))
    assert tool_messages(state) == first and ran == ["hi"]

    no_runner(monkeypatch)
    assert tool_messages(graph().invoke({"messages": [("user", "go")]})) == first
    assert ran == ["hi", "hi"]


def test_langgraph_ok_false_reaches_the_model_as_an_error_message(
    runner_session: Connect,
) -> None:
    from langchain_core.tools import tool
    from langgraph.prebuilt import ToolNode

    @tool
    def lookup(order_id: int) -> str:
        """Look up."""
        raise AssertionError("replay must not run the tool")

    cassette = [{"tool": "lookup", "args": {"order_id": 3}, "ok": False, "error": "no order 3"}]
    runner_session(FakeRunner("replay", cassette))
    graph = sdk.wrap(
        scripted_graph(ToolNode([lookup]), [{"name": "lookup", "args": {"order_id": 3}, "id": "c"}])
    )
    state = graph.invoke({"messages": [("user", "go")]})
    assert tool_messages(state) == [("lookup", "no order 3", "error")]


def test_langgraph_wrap_is_innermost_under_the_users_own_wrapper(
    runner_session: Connect,
) -> None:
    from langchain_core.messages import ToolMessage
    from langchain_core.tools import tool
    from langgraph.prebuilt import ToolNode

    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    seen: list[str] = []

    def auditing(request: Any, execute: Any) -> Any:
        result = execute(request)
        seen.append(f"{request.tool_call['name']} -> {result.content}")
        return ToolMessage(
            content=f"audited {result.content}", tool_call_id=result.tool_call_id, name="add"
        )

    recorded = runner_session(FakeRunner("record"))
    node = ToolNode([add], wrap_tool_call=auditing)
    graph = sdk.wrap(scripted_graph(node, [{"name": "add", "args": {"a": 1, "b": 2}, "id": "c"}]))
    assert sdk.wrap(graph) is graph  # installing twice changes nothing
    state = graph.invoke({"messages": [("user", "go")]})
    assert tool_messages(state) == [("add", "audited 3", "success")]
    assert seen == ["add -> 3"]
    assert recorded.recorded[0]["result"] == "3"  # what the tool gave, before the user's wrapper


def test_langgraph_a_tool_returning_a_command_cannot_be_recorded(
    runner_session: Connect,
) -> None:
    from langchain_core.tools import tool
    from langgraph.prebuilt import ToolNode
    from langgraph.types import Command

    from trialrun.agent.langchain import UnsupportedToolResultError

    def jump(target: str) -> Any:
        """Jump."""
        return Command(goto=target)

    jump = tool(jump)

    recorded = runner_session(FakeRunner("record"))
    graph = sdk.wrap(
        scripted_graph(ToolNode([jump]), [{"name": "jump", "args": {"target": "x"}, "id": "c"}])
    )
    with pytest.raises(UnsupportedToolResultError, match="Command"):
        graph.invoke({"messages": [("user", "go")]})
    assert recorded.recorded[0]["ok"] is False


def test_langgraph_wrap_of_a_graph_without_tool_node_is_refused() -> None:
    from langgraph.graph import START, StateGraph

    builder = StateGraph(TypedDict("Counter", {"n": int}))
    builder.add_node("inc", lambda state: {"n": state["n"] + 1})
    builder.add_edge(START, "inc")
    with pytest.raises(TypeError, match="no ToolNode"):
        sdk.wrap(builder.compile())


# -- PydanticAI -----------------------------------------------------------------------------------


def pydantic_agent(calls: list[tuple[str, dict[str, Any]]], shown: list[str]) -> Any:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import FunctionModel

    def scripted(messages: list[Any], info: Any) -> ModelResponse:
        returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
        if not returns:
            parts = [ToolCallPart(name, args, tool_call_id=f"c{i}") for i, (name, args) in
                     enumerate(calls)]  # fmt: skip
            return ModelResponse(parts=parts)
        shown.extend(p.model_response_str() for p in returns)
        return ModelResponse(parts=[TextPart("done")])

    return Agent(FunctionModel(scripted))


def test_pydantic_ai_per_run_capability_replays_and_ok_false_is_a_retry(
    runner_session: Connect,
) -> None:
    from trialrun.agent.pydantic_ai import trialrun_capability

    shown: list[str] = []
    agent = pydantic_agent([("lookup", {"order_id": 5})], shown)

    @agent.tool_plain
    def lookup(order_id: int) -> str:
        raise AssertionError("replay must not run the tool")

    cassette = [{"tool": "lookup", "args": {"order_id": 5}, "ok": False, "error": "no order 5"}]
    served = runner_session(FakeRunner("replay", cassette))
    result = agent.run_sync("go", capabilities=[trialrun_capability()])
    assert result.output == "done"
    assert shown == ['{"error":"no order 5"}']  # a retry prompt with the error, as ModelRetry gives
    assert served.violations == []


def test_pydantic_ai_capability_is_innermost_so_other_hooks_run_in_replay(
    runner_session: Connect,
) -> None:
    from dataclasses import dataclass

    from pydantic_ai.capabilities import AbstractCapability

    from trialrun.agent.pydantic_ai import trialrun_capability

    wrapped: list[str] = []

    @dataclass
    class Audit(AbstractCapability[Any]):
        async def wrap_tool_execute(self, ctx: Any, *, call: Any, tool_def: Any, args: Any,
                                    handler: Any) -> Any:  # fmt: skip
            result = await handler(args)
            wrapped.append(f"{call.tool_name}={result}")
            return result

    shown: list[str] = []
    agent = pydantic_agent([("double", {"n": 4})], shown)

    @agent.tool_plain
    def double(n: int) -> int:
        raise AssertionError("replay must not run the tool")

    cassette = [{"tool": "double", "args": {"n": 4}, "ok": True, "result": 8}]
    runner_session(FakeRunner("replay", cassette))
    # Listed first, the trialrun capability still ends up inside Audit.
    agent.run_sync("go", capabilities=[trialrun_capability(), Audit()])
    assert wrapped == ["double=8"] and shown == ["8"]


def test_pydantic_ai_wrap_returns_an_agent_that_forwards_to_the_original(
    runner_session: Connect, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trialrun.agent.pydantic_ai import TrialrunAgent

    shown: list[str] = []
    agent = pydantic_agent([("triple", {"n": 2})], shown)
    wrapped = sdk.wrap(agent)
    assert isinstance(wrapped, TrialrunAgent) and sdk.wrap(wrapped) is wrapped

    @wrapped.tool_plain  # registration falls through to the wrapped agent
    def triple(n: int) -> int:
        return n * 3

    recorded = runner_session(FakeRunner("record"))
    assert asyncio.run(wrapped.run("go")).output == "done"
    assert recorded.recorded == [
        {"tool": "triple", "args": {"n": 2}, "ok": True, "result": 6, "error": None}
    ]
    no_runner(monkeypatch)
    assert wrapped.run_sync("go").output == "done"
    assert shown == ["6", "6"]
