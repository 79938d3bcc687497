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


# -- LangGraph: a turn's parallel calls reach the runner in the model's order ---------------------

TWO_CITIES = [
    {"name": "weather", "args": {"city": "Oslo"}, "id": "c1"},
    {"name": "weather", "args": {"city": "Lima"}, "id": "c2"},
]


def two_city_model() -> Any:
    """A chat model that asks for TWO_CITIES in one turn, then answers."""
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    class Scripted(GenericFakeChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

    turns = [AIMessage(content="", tool_calls=TWO_CITIES), AIMessage(content="done")]
    return Scripted(messages=iter(turns))


def weather_tool() -> Any:
    from langchain_core.tools import tool

    @tool
    def weather(city: str) -> str:
        """Weather."""
        return f"sunny in {city}"

    return weather


class SecondGoesFirst:
    """Makes the thread pool's worst order certain: c1 holds back in a wrapper outside trialrun
    until c2 got past it, i.e. c2 reached trialrun's turn gate (seen by watching ``wait_turn``)
    or, with no gate, went to the runner and was answered. Without ordering, c2 is sent first."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import threading

        from trialrun.agent.callorder import TurnOrder

        self.second_past = threading.Event()
        real_wait_turn = TurnOrder.wait_turn

        def observed(order: TurnOrder, call_id: str, patience: float | None = None) -> list[str]:
            if call_id == "c2":
                self.second_past.set()
            return real_wait_turn(order, call_id, patience)

        monkeypatch.setattr(TurnOrder, "wait_turn", observed)

    def reset(self) -> None:
        self.second_past.clear()

    def __call__(self, request: Any, execute: Any) -> Any:
        if request.tool_call["id"] == "c1":
            assert self.second_past.wait(timeout=120), "the second call never came"
            return execute(request)
        try:
            return execute(request)
        finally:
            self.second_past.set()


def replay_in_model_order(run: Callable[[FakeRunner, bool], Served], times: int) -> None:
    recorded = run(FakeRunner("record"), False)
    assert [c["args"]["city"] for c in recorded.recorded] == ["Oslo", "Lima"]
    for attempt in range(times):
        replayed = run(FakeRunner("replay", recorded.recorded), attempt % 2 == 1)
        assert [c["args"] for c in replayed.of_type("tool_call")] == [
            {"city": "Oslo"},
            {"city": "Lima"},
        ], f"replay {attempt + 1}"
        assert replayed.of_type("log") == [] and replayed.violations == []


def final_state(graph: Any, streamed: bool) -> dict[str, Any]:
    question = {"messages": [("user", "go")]}
    if streamed:
        *_, state = graph.stream(question, stream_mode="values")
        return dict(state)
    return dict(graph.invoke(question))


def test_langgraph_create_react_agent_replays_parallel_calls_in_the_models_order(
    runner_session: Connect, monkeypatch: pytest.MonkeyPatch
) -> None:
    """create_react_agent sends each call to its own ToolNode task (the Send API), in parallel
    threads under sync invoke() and stream()."""
    from langgraph.prebuilt import ToolNode, create_react_agent

    hold = SecondGoesFirst(monkeypatch)

    def run(runner: FakeRunner, streamed: bool) -> Served:
        served = runner_session(runner)
        hold.reset()
        node = ToolNode([weather_tool()], wrap_tool_call=hold)
        graph = sdk.wrap(create_react_agent(two_city_model(), node))
        state = final_state(graph, streamed)
        assert tool_messages(state) == [
            ("weather", "sunny in Oslo", "success"),
            ("weather", "sunny in Lima", "success"),
        ]
        return served

    replay_in_model_order(run, times=4)


def test_langgraph_tool_node_replays_parallel_calls_in_the_models_order(
    runner_session: Connect, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A StateGraph's ToolNode runs the whole turn in one task, its calls in a thread pool."""
    from langgraph.prebuilt import ToolNode

    hold = SecondGoesFirst(monkeypatch)

    def run(runner: FakeRunner, streamed: bool) -> Served:
        served = runner_session(runner)
        hold.reset()
        node = ToolNode([weather_tool()], wrap_tool_call=hold)
        state = final_state(sdk.wrap(scripted_graph(node, TWO_CITIES)), streamed)
        assert [m[1] for m in tool_messages(state)] == ["sunny in Oslo", "sunny in Lima"]
        return served

    replay_in_model_order(run, times=4)


def test_langchain_create_agent_middleware_replays_parallel_calls_in_the_models_order(
    runner_session: Connect, monkeypatch: pytest.MonkeyPatch
) -> None:
    from langchain.agents import create_agent
    from langchain.agents.middleware import AgentMiddleware

    from trialrun.agent.langchain import trialrun_middleware

    hold = SecondGoesFirst(monkeypatch)

    class Holding(AgentMiddleware):
        def wrap_tool_call(self, request: Any, handler: Any) -> Any:
            return hold(request, handler)

    def run(runner: FakeRunner, streamed: bool) -> Served:
        served = runner_session(runner)
        hold.reset()
        agent = create_agent(
            two_city_model(), [weather_tool()], middleware=[Holding(), trialrun_middleware()]
        )
        state = final_state(agent, streamed)
        assert sorted(tool_messages(state)) == [
            ("weather", "sunny in Lima", "success"),
            ("weather", "sunny in Oslo", "success"),
        ]
        return served

    replay_in_model_order(run, times=4)


def test_langgraph_a_call_answered_outside_trialrun_does_not_hold_up_the_next(
    runner_session: Connect, monkeypatch: pytest.MonkeyPatch
) -> None:
    """wrap() sees the user's own middleware answer c1 itself (a cache), so c2 goes at once:
    with patience long enough for any machine, a missed end would show as the warning."""
    from langchain.agents import create_agent
    from langchain.agents.middleware import AgentMiddleware
    from langchain_core.messages import ToolMessage

    from trialrun.agent import callorder

    monkeypatch.setattr(callorder, "PATIENCE", 120.0)

    class Caching(AgentMiddleware):
        def wrap_tool_call(self, request: Any, handler: Any) -> Any:
            if request.tool_call["id"] == "c1":
                return ToolMessage(content="cached", tool_call_id="c1", name="weather")
            return handler(request)

    served = runner_session(FakeRunner("record"))
    agent = sdk.wrap(create_agent(two_city_model(), [weather_tool()], middleware=[Caching()]))
    state = agent.invoke({"messages": [("user", "go")]})
    assert sorted(tool_messages(state)) == [
        ("weather", "cached", "success"),
        ("weather", "sunny in Lima", "success"),
    ]
    assert [c["args"]["city"] for c in served.recorded] == ["Lima"]
    assert served.of_type("log") == []


def test_langgraph_a_call_whose_own_wrapper_raises_does_not_hold_up_the_next(
    runner_session: Connect, monkeypatch: pytest.MonkeyPatch
) -> None:
    from langgraph.prebuilt import ToolNode

    from trialrun.agent import callorder

    monkeypatch.setattr(callorder, "PATIENCE", 120.0)

    def refusing(request: Any, execute: Any) -> Any:
        if request.tool_call["id"] == "c1":
            raise ValueError("refused c1")
        return execute(request)

    served = runner_session(FakeRunner("record"))
    node = ToolNode([weather_tool()], wrap_tool_call=refusing, handle_tool_errors=True)
    state = sdk.wrap(scripted_graph(node, TWO_CITIES)).invoke({"messages": [("user", "go")]})
    [(_, refused, status), lima] = tool_messages(state)
    assert "refused c1" in refused and status == "error"
    assert lima == ("weather", "sunny in Lima", "success")
    assert [c["args"]["city"] for c in served.recorded] == ["Lima"]
    assert served.of_type("log") == []


def test_langgraph_a_call_refused_before_it_is_sent_does_not_hold_up_the_next(
    runner_session: Connect, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tool_call_wrapper inside the user's own interceptor: c1's arguments are no JSON (NaN), so
    the session refuses it before it queues; trialrun's wrapper itself lets c2 go."""
    from langgraph.prebuilt import ToolNode

    from trialrun.agent import callorder
    from trialrun.agent.langchain import tool_call_wrapper

    monkeypatch.setattr(callorder, "PATIENCE", 120.0)

    def garbling(request: Any, execute: Any) -> Any:
        if request.tool_call["id"] == "c1":
            garbled = {**request.tool_call, "args": {"city": float("nan")}}
            request = request.override(tool_call=garbled)
        return tool_call_wrapper(request, execute)

    served = runner_session(FakeRunner("record"))
    node = ToolNode([weather_tool()], wrap_tool_call=garbling, handle_tool_errors=True)
    state = scripted_graph(node, TWO_CITIES).invoke({"messages": [("user", "go")]})
    [(_, refused, status), lima] = tool_messages(state)
    assert "not JSON data" in refused and status == "error"
    assert lima == ("weather", "sunny in Lima", "success")
    assert [c["args"]["city"] for c in served.recorded] == ["Lima"]
    assert served.of_type("log") == []


def test_langgraph_a_predecessor_that_never_comes_is_given_up_with_a_warning(
    runner_session: Connect, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A middleware listed before trialrun_middleware() answers c1: trialrun, innermost, never
    learns of it, so c2 waits its patience for c1, then goes and says so in the event log."""
    from langchain.agents import create_agent
    from langchain.agents.middleware import AgentMiddleware
    from langchain_core.messages import ToolMessage

    from trialrun.agent import callorder
    from trialrun.agent.langchain import trialrun_middleware

    monkeypatch.setattr(callorder, "PATIENCE", 0.0)

    class Caching(AgentMiddleware):
        def wrap_tool_call(self, request: Any, handler: Any) -> Any:
            if request.tool_call["id"] == "c1":
                return ToolMessage(content="cached", tool_call_id="c1", name="weather")
            return handler(request)

    served = runner_session(FakeRunner("record"))
    agent = create_agent(
        two_city_model(), [weather_tool()], middleware=[Caching(), trialrun_middleware()]
    )
    state = agent.invoke({"messages": [("user", "go")]})
    assert sorted(tool_messages(state))[1] == ("weather", "sunny in Lima", "success")
    [warning] = served.of_type("log")
    assert warning["level"] == "warning"
    assert warning["data"] == {"call_id": "c2", "not_waited_for": ["c1"]}
    assert "'c1'" in warning["message"] and "within 0 s" in warning["message"]


def test_langgraph_calls_inside_a_running_tool_are_not_held_for_each_other(
    runner_session: Connect, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tool that runs a graph of its own: that graph's calls run directly, inside the one
    recorded call, so none of them reaches the runner and none waits for another to end (here
    the first waits for the second to run)."""
    import threading

    from langchain_core.tools import tool
    from langgraph.prebuilt import ToolNode

    from trialrun.agent import callorder

    monkeypatch.setattr(callorder, "PATIENCE", 120.0)
    right_ran = threading.Event()

    @tool
    def left(x: int) -> int:
        """Left."""
        assert right_ran.wait(timeout=60), "left was held until it ended: right never ran"
        return x

    @tool
    def right(x: int) -> int:
        """Right."""
        right_ran.set()
        return x

    inner_calls = [
        {"name": "left", "args": {"x": 1}, "id": "x1"},
        {"name": "right", "args": {"x": 2}, "id": "x2"},
    ]
    inner = sdk.wrap(scripted_graph(ToolNode([left, right]), inner_calls))

    @tool
    def plan(goal: str) -> str:
        """Plan."""
        state = inner.invoke({"messages": [("user", goal)]})
        return ",".join(str(m[1]) for m in tool_messages(state))

    served = runner_session(FakeRunner("record"))
    outer = sdk.wrap(
        scripted_graph(ToolNode([plan]), [{"name": "plan", "args": {"goal": "g"}, "id": "c1"}])
    )
    state = outer.invoke({"messages": [("user", "go")]})
    assert tool_messages(state) == [("plan", "1,2", "success")]
    assert served.tool_sequence() == ["plan"] and served.of_type("log") == []


def test_langgraph_async_runs_and_single_calls_are_not_held(
    runner_session: Connect, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ainvoke starts a turn's calls in order on one loop: the sync wrapper on that loop's thread
    must not wait there (it would stall the loop); and a lone call has nobody to wait for."""
    from langgraph.prebuilt import ToolNode

    from trialrun.agent.callorder import TurnOrder
    from trialrun.agent.langchain import tool_call_wrapper

    waited: list[str] = []
    real_wait_turn = TurnOrder.wait_turn

    def observed(order: TurnOrder, call_id: str, patience: float | None = None) -> list[str]:
        waited.append(call_id)
        return real_wait_turn(order, call_id, patience)

    monkeypatch.setattr(TurnOrder, "wait_turn", observed)
    served = runner_session(FakeRunner("record"))
    node = ToolNode([weather_tool()], wrap_tool_call=tool_call_wrapper)  # sync only
    state = asyncio.run(scripted_graph(node, TWO_CITIES).ainvoke({"messages": [("user", "go")]}))
    assert [m[1] for m in tool_messages(state)] == ["sunny in Oslo", "sunny in Lima"]
    assert [c["args"]["city"] for c in served.recorded] == ["Oslo", "Lima"]

    served = runner_session(FakeRunner("record"))
    node = ToolNode([weather_tool()], wrap_tool_call=tool_call_wrapper)
    scripted_graph(node, TWO_CITIES[:1]).invoke({"messages": [("user", "go")]})
    assert waited == [] and len(served.recorded) == 1


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
