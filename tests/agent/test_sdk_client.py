"""The agent SDK's session against a fake runner on a socketpair, in this process.

Replay answers, the tool_run / tool_report round trip, ok=false, a runner that goes away or
misbehaves, serialized concurrent calls (threads and coroutines), cancellation, multi-megabyte
results, JSON conversion, nested calls, and the zero-cost path without ``TRIALRUN_FD``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import enum
import json
import math
import os
import select
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

import trialrun.agent as sdk
from builders import HANG_GUARD_S
from paths import AGENTS_DIR
from sdk_agents.fake_runner import FakeRunner, Served
from trialrun.agent import client
from trialrun.agent.channel import Channel, ChannelError
from trialrun.agent.client import Session, ToolCallError

Start = Callable[..., tuple[Session, Served, threading.Thread]]


@pytest.fixture
def start(monkeypatch: pytest.MonkeyPatch) -> Iterator[Start]:
    """Open a session against ``runner`` (served in a thread); ``connect()`` then returns it."""
    opened: list[Session] = []

    def open_session(
        runner: FakeRunner, task_input: Any = None
    ) -> tuple[Session, Served, threading.Thread]:
        runner_end, agent_end = socket.socketpair()
        thread, served = runner.start(runner_end, task_input=task_input or {"q": "x"})
        session = Session.open(Channel(agent_end), mode=runner.mode)
        monkeypatch.setattr(client, "_connected", (os.getpid(), session))
        opened.append(session)
        return session, served, thread

    yield open_session
    for session in opened:
        session.close()


def finish(session: Session, thread: threading.Thread) -> None:
    """End the conversation and wait until the fake runner has seen all of it."""
    session.close()
    thread.join(10)
    assert not thread.is_alive()


def never_runs() -> Any:
    raise AssertionError("the real tool ran during replay")


# -- replay and record ------------------------------------------------------------------------


def test_replay_answers_from_the_cassette_and_never_runs_the_tool(start: Start) -> None:
    cassette = [{"tool": "search", "args": {"q": "x"}, "ok": True, "result": {"hits": [1]}}]
    session, served, thread = start(FakeRunner("replay", cassette), task_input={"q": "x"})
    assert (session.task_id, session.input, session.mode) == ("t1", {"q": "x"}, "replay")

    assert session.call_tool("search", {"q": "x"}, never_runs) == {"hits": [1]}
    finish(session, thread)
    [call] = served.of_type("tool_call")
    assert call == {
        "type": "tool_call",
        "name": "search",
        "call_id": call["call_id"],
        "args": {"q": "x"},
        "local": True,
    }
    assert served.violations == []


def test_record_runs_the_tool_and_hands_back_the_runners_answer(start: Start) -> None:
    session, served, thread = start(FakeRunner("record"))
    result = session.call_tool("search", {"q": "x"}, lambda: {"pair": (1, 2), "q": "x"})
    # The agent continues with the JSON the runner recorded, exactly what replay will give it.
    assert result == {"pair": [1, 2], "q": "x"}
    finish(session, thread)
    assert served.recorded == [
        {
            "tool": "search",
            "args": {"q": "x"},
            "ok": True,
            "result": {"pair": [1, 2], "q": "x"},
            "error": None,
        }
    ]
    assert [m["type"] for m in served.messages] == ["tool_call", "tool_report"]


def test_a_failing_tool_is_reported_and_raised_as_tool_call_error(start: Start) -> None:
    session, served, thread = start(FakeRunner("record"))

    def boom() -> None:
        raise KeyError("no such order")

    with pytest.raises(ToolCallError) as raised:
        session.call_tool("get_order", {"id": 7}, boom)
    assert raised.value.error == "'no such order'" == str(raised.value)
    assert raised.value.tool == "get_order"
    assert isinstance(raised.value.__cause__, KeyError)  # record keeps the real exception
    finish(session, thread)
    assert served.recorded[0]["ok"] is False
    assert served.recorded[0]["error"] == "'no such order'"


def test_ok_false_in_replay_raises_tool_call_error_with_the_recorded_error(start: Start) -> None:
    cassette = [{"tool": "t", "args": {}, "ok": False, "result": None, "error": "rate limited"}]
    session, _, _ = start(FakeRunner("replay", cassette))
    with pytest.raises(ToolCallError, match=r"^rate limited$") as raised:
        session.call_tool("t", {}, never_runs)
    assert raised.value.__cause__ is None


def test_a_call_without_implementation_is_answered_by_the_runner(start: Start) -> None:
    runner = FakeRunner("record", tools={"add": lambda args: args["a"] + args["b"]})
    session, served, thread = start(runner)
    assert session.call_tool("add", {"a": 2, "b": 3}) == 5
    finish(session, thread)
    assert served.of_type("tool_call")[0]["local"] is False
    assert served.of_type("tool_report") == []


def test_an_exception_that_is_only_a_type_name_still_says_something(start: Start) -> None:
    session, _, _ = start(FakeRunner("record"))

    def silent() -> None:
        raise TimeoutError

    with pytest.raises(ToolCallError, match=r"^TimeoutError$"):
        session.call_tool("slow", {}, silent)


def test_an_async_function_given_to_call_tool_is_refused_not_hung(start: Start) -> None:
    session, served, thread = start(FakeRunner("record"))

    async def fetch() -> int:
        return 1

    with pytest.raises(ToolCallError, match="acall_tool"):
        session.call_tool("fetch", {}, fetch)
    finish(session, thread)
    assert served.recorded[0]["ok"] is False


# -- JSON conversion --------------------------------------------------------------------------


class Colour(enum.Enum):
    RED = "red"


class Model(BaseModel):
    name: str
    when: datetime.date


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Opaque:
    def __str__(self) -> str:
        return "opaque!"


def test_non_json_results_are_converted_before_they_travel(start: Start) -> None:
    session, served, thread = start(FakeRunner("record"))
    value = {
        "model": Model(name="a", when=datetime.date(2026, 1, 2)),
        "point": Point(1, 2),
        "colour": Colour.RED,
        "ids": {3},
        "opaque": Opaque(),
        7: "int key",
    }
    expected = {
        "model": {"name": "a", "when": "2026-01-02"},
        "point": {"x": 1, "y": 2},
        "colour": "red",
        "ids": [3],
        "opaque": "opaque!",
        "7": "int key",
    }
    assert session.call_tool("convert", {"at": datetime.date(2026, 1, 2)}, lambda: value) == (
        expected
    )
    finish(session, thread)
    assert served.recorded[0]["result"] == expected
    assert served.recorded[0]["args"] == {"at": "2026-01-02"}


@pytest.mark.parametrize("bad", [math.nan, math.inf, b"\xff\xfe"])
def test_a_result_json_cannot_hold_becomes_the_tools_error(start: Start, bad: Any) -> None:
    session, served, thread = start(FakeRunner("record"))
    with pytest.raises(ToolCallError, match="returned a value that is not JSON"):
        session.call_tool("weird", {}, lambda: {"value": bad})
    finish(session, thread)
    assert served.recorded[0]["ok"] is False
    assert served.violations == []


@pytest.mark.parametrize(
    ("args", "error"),
    [([1, 2], TypeError), ({"x": math.nan}, ValueError), ({"b": b"\xff"}, ValueError)],
)
def test_arguments_that_are_not_a_json_object_never_reach_the_runner(
    start: Start, args: Any, error: type[Exception]
) -> None:
    session, served, thread = start(FakeRunner("record"))
    with pytest.raises(error, match="arguments of tool 'bad'"):
        session.call_tool("bad", args, lambda: None)
    with pytest.raises(ValueError, match="tool name"):
        session.call_tool("", {}, lambda: None)
    assert session.call_tool("good", {}, lambda: 1) == 1  # the session is still in step
    finish(session, thread)
    assert served.tool_sequence() == ["good"]


# -- size and concurrency ---------------------------------------------------------------------


def test_results_of_several_megabytes_travel_both_ways(start: Start) -> None:
    # How the time grows with the size is measured by bench/sdk_framing_bench.py.
    blob = "x" * (6 * 1024 * 1024) + "é"
    session, served, thread = start(FakeRunner("record"))
    assert session.call_tool("dump", {}, lambda: {"blob": blob}) == {"blob": blob}
    finish(session, thread)
    assert served.recorded[0]["result"] == {"blob": blob}

    session, _, thread = start(FakeRunner("replay", served.recorded))
    assert session.call_tool("dump", {}, never_runs) == {"blob": blob}
    finish(session, thread)


def test_parallel_async_calls_are_serialized_in_the_order_they_were_made(start: Start) -> None:
    session, served, thread = start(FakeRunner("record"))

    async def work(i: int) -> dict[str, int]:
        await asyncio.sleep(0.001 * (i % 4))
        session.log(f"tool {i} running")  # held back until the round trip is over
        return {"i": i}

    async def main() -> list[Any]:
        return await asyncio.gather(
            *(session.acall_tool("work", {"i": i}, lambda i=i: work(i)) for i in range(25))
        )

    assert asyncio.run(main()) == [{"i": i} for i in range(25)]
    finish(session, thread)
    assert served.violations == []
    assert [c["args"]["i"] for c in served.of_type("tool_call")] == list(range(25))
    kinds = [m["type"] for m in served.messages]
    assert kinds == ["tool_call", "tool_report", "log"] * 25


def test_threads_and_coroutines_share_one_session_without_interleaving(start: Start) -> None:
    session, served, thread = start(FakeRunner("record"))
    results: dict[str, Any] = {}

    def in_thread(n: int) -> None:
        for k in range(5):
            key = f"thread-{n}-{k}"
            results[key] = session.call_tool("t", {"key": key}, lambda key=key: key)

    async def coroutines() -> None:
        async def one(key: str) -> str:
            await asyncio.sleep(0)
            return key

        keys = [f"task-{k}" for k in range(10)]
        answers = await asyncio.gather(
            *(session.acall_tool("t", {"key": k}, lambda k=k: one(k)) for k in keys)
        )
        results.update(zip(keys, answers, strict=True))

    workers = [threading.Thread(target=in_thread, args=(n,)) for n in range(4)]
    for worker in workers:
        worker.start()
    asyncio.run(coroutines())
    for worker in workers:
        worker.join(30)
    finish(session, thread)
    assert served.violations == []
    assert len(results) == 30 and all(key == value for key, value in results.items())
    kinds = [m["type"] for m in served.messages]
    assert kinds == ["tool_call", "tool_report"] * 30


def test_a_call_cancelled_while_its_tool_runs_leaves_the_session_usable(start: Start) -> None:
    session, served, thread = start(FakeRunner("record"))

    async def main() -> Any:
        started = asyncio.Event()

        async def forever() -> None:
            started.set()
            await asyncio.sleep(3600)

        task = asyncio.ensure_future(session.acall_tool("slow", {}, forever))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return await session.acall_tool("next", {}, lambda: asyncio.sleep(0, "fine"))

    assert asyncio.run(main()) == "fine"
    finish(session, thread)
    assert served.violations == []
    slow = served.recorded[0]
    assert (slow["tool"], slow["ok"]) == ("slow", False)
    assert "cancelled" in slow["error"]


def test_a_call_cancelled_while_waiting_for_the_runner_is_finished_behind_it(
    start: Start,
) -> None:
    cassette = [
        {"tool": "first", "args": {}, "ok": True, "result": 1},
        {"tool": "second", "args": {}, "ok": True, "result": 2},
    ]
    runner = FakeRunner("replay", cassette, hold_answers=True)
    session, served, thread = start(runner)

    async def main() -> Any:
        task = asyncio.ensure_future(session.acall_tool("first", {}, never_runs))
        assert await asyncio.to_thread(runner.call_arrived.wait, 60)  # out, its answer held
        task.cancel()
        runner.release.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        # The late answer to "first" must not be taken for the answer to "second".
        return await session.acall_tool("second", {}, never_runs)

    assert asyncio.run(main()) == 2
    finish(session, thread)
    assert served.tool_sequence() == ["first", "second"]


def test_a_record_call_cancelled_before_its_tool_ran_is_reported(start: Start) -> None:
    runner = FakeRunner("record", hold_answers=True)
    session, served, thread = start(runner)

    async def main() -> Any:
        task = asyncio.ensure_future(session.acall_tool("first", {}, never_runs))
        assert await asyncio.to_thread(runner.call_arrived.wait, 60)  # out, its tool_run held
        task.cancel()
        runner.release.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        return await session.acall_tool("second", {}, lambda: asyncio.sleep(0, 2))

    assert asyncio.run(main()) == 2
    finish(session, thread)
    assert served.violations == []
    first = served.recorded[0]
    assert (first["tool"], first["ok"]) == ("first", False)
    assert "cancelled before it ran" in first["error"]


def test_an_interrupted_sync_tool_reports_and_the_session_stays_in_step(start: Start) -> None:
    session, served, thread = start(FakeRunner("record"))

    def interrupted() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        session.call_tool("stuck", {}, interrupted)
    assert session.call_tool("after", {}, lambda: "ok") == "ok"
    finish(session, thread)
    assert served.violations == []
    assert [(r["tool"], r["ok"]) for r in served.recorded] == [("stuck", False), ("after", True)]


# -- nested calls and one-way messages --------------------------------------------------------


def test_a_tool_calling_another_tool_is_one_recorded_call(start: Start) -> None:
    @sdk.tool
    def inner(x: int) -> int:
        return x * 2

    @sdk.tool
    def outer(x: int) -> int:
        return inner(x) + 1

    session, served, thread = start(FakeRunner("record"))
    assert outer(5) == 11
    finish(session, thread)
    assert served.tool_sequence() == ["outer"]


def test_queued_is_called_before_a_call_is_sent_and_before_a_nested_call_runs(
    start: Start,
) -> None:
    events: list[str] = []
    session, served, thread = start(FakeRunner("record"))

    def inner() -> int:
        events.append("inner ran")
        return 2

    def outer() -> int:
        events.append("outer ran")
        value: int = session.call_tool("inner", {}, inner, queued=lambda: events.append("inner"))
        return value + 1

    assert session.call_tool("outer", {}, outer, queued=lambda: events.append("outer")) == 3
    finish(session, thread)
    assert events == ["outer", "outer ran", "inner", "inner ran"]
    assert served.tool_sequence() == ["outer"]


def test_a_nested_call_without_implementation_is_refused(start: Start) -> None:
    session, _, _ = start(FakeRunner("record"))

    def outer() -> Any:
        return session.call_tool("remote", {})

    with pytest.raises(ToolCallError, match="while tool 'outer' runs") as raised:
        session.call_tool("outer", {}, outer)
    assert isinstance(raised.value.__cause__, ChannelError)


def test_one_way_messages_carry_their_fields(start: Start) -> None:
    session, served, thread = start(FakeRunner("record"))
    session.log("hello", level="debug", data={"when": datetime.date(2026, 1, 2)})
    session.usage(tokens_in=3, tokens_out=4, cost_usd=0.5, model="m")
    session.final_output({"answer": Point(1, 2)})
    thread.join(10)
    assert served.messages == [
        {"type": "log", "level": "debug", "message": "hello", "data": {"when": "2026-01-02"}},
        {"type": "usage", "tokens_in": 3, "tokens_out": 4, "cost_usd": 0.5, "model": "m"},
        {"type": "final_output", "output": {"answer": {"x": 1, "y": 2}}},
    ]
    assert served.ended_by == "final_output"


def test_task_error_ends_the_case(start: Start) -> None:
    session, served, thread = start(FakeRunner("record"))
    session.task_error("cannot reach the model", data={"retries": 3})
    thread.join(10)
    assert served.messages == [
        {"type": "task_error", "message": "cannot reach the model", "data": {"retries": 3}}
    ]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"tokens_in": -1},
        {"tokens_out": 1.5},
        {"tokens_in": True},
        {"cost_usd": math.nan},
        # Beyond the runner's bounds, which would fail the case as a protocol error.
        {"tokens_in": 2**53},
        {"cost_usd": 1e10},
        {"cost_usd": 10**400},
    ],
)
def test_invalid_usage_is_refused_before_sending(start: Start, kwargs: dict[str, Any]) -> None:
    session, _, _ = start(FakeRunner("record"))
    with pytest.raises(ValueError, match="usage"):
        session.usage(**kwargs)


def test_final_output_and_data_must_be_mappings(start: Start) -> None:
    session, _, _ = start(FakeRunner("record"))
    with pytest.raises(TypeError, match="final_output must be a mapping"):
        session.final_output([1, 2])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="data must be a mapping"):
        session.log("x", data=[1])  # type: ignore[arg-type]


# -- a runner that goes away or misbehaves ----------------------------------------------------


def test_runner_gone_mid_call_raises_channel_error(start: Start) -> None:
    session, _, _ = start(FakeRunner("record", stop_after=0))
    with pytest.raises(ChannelError, match="closed the channel"):
        session.call_tool("search", {}, lambda: 1)


def test_runner_gone_before_task_start_raises_channel_error() -> None:
    runner_end, agent_end = socket.socketpair()
    runner_end.close()
    with pytest.raises(ChannelError, match="closed the channel"):
        Session.open(Channel(agent_end))


def raw_runner(*lines: bytes) -> Channel:
    """A channel whose runner sends ``lines`` and then just keeps the socket open."""
    runner_end, agent_end = socket.socketpair()
    runner_end.sendall(b"".join(lines))
    agent_end.settimeout(5)
    raw_runner.keep.append(runner_end)  # type: ignore[attr-defined]
    return Channel(agent_end)


raw_runner.keep = []  # type: ignore[attr-defined]
TASK_START = b'{"type":"task_start","task_id":"t1","input":{}}\n'


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ((b'{"type":"tool_result","call_id":"x"}\n',), "expected task_start"),
        ((b'{"type":"task_start","task_id":1}\n',), "no string task_id"),
        ((b"not json\n",), "not JSON"),
        ((b"[1, 2]\n",), "not a protocol message"),
        ((b'{"type": 3}\n',), "not a protocol message"),
        ((b"\xff\xfe\n",), "not JSON"),
    ],
)
def test_a_bad_first_message_is_a_channel_error(lines: tuple[bytes, ...], message: str) -> None:
    with pytest.raises(ChannelError, match=message):
        Session.open(raw_runner(*lines))


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (b'{"type":"tool_result","call_id":"sdk-99","ok":true}\n', "answered call 'sdk-99'"),
        (b'{"type":"tool_result","call_id":"sdk-1","ok":"yes"}\n', 'boolean "ok"'),
        (b'{"type":"tool_result","call_id":"sdk-1","ok":true,"error":5}\n', 'boolean "ok"'),
    ],
)
def test_a_wrong_answer_is_a_channel_error(answer: bytes, message: str) -> None:
    session = Session.open(raw_runner(TASK_START, answer))
    with pytest.raises(ChannelError, match=message):
        session.call_tool("t", {})


def test_unknown_runner_messages_are_skipped_for_forward_compatibility() -> None:
    answer = b'{"type":"tool_result","call_id":"sdk-1","ok":true,"result":4}\n'
    session = Session.open(raw_runner(TASK_START, b'{"type":"heartbeat"}\n\n', answer))
    assert session.call_tool("t", {}) == 4


def test_tool_run_twice_is_a_channel_error() -> None:
    run = b'{"type":"tool_run","call_id":"sdk-1"}\n'
    session = Session.open(raw_runner(TASK_START, run, run))
    with pytest.raises(ChannelError, match="tool_run twice"):
        session.call_tool("t", {}, lambda: 1)


def test_tool_run_for_a_call_the_agent_cannot_run_is_reported() -> None:
    runner_end, agent_end = socket.socketpair()
    runner_end.sendall(TASK_START + b'{"type":"tool_run","call_id":"sdk-1"}\n')
    agent_end.settimeout(5)
    session = Session.open(Channel(agent_end))

    def answer() -> None:
        reader = runner_end.makefile("rb")
        reader.readline()  # tool_call
        report = json.loads(reader.readline())
        runner_end.sendall(json.dumps({**report, "type": "tool_result"}).encode() + b"\n")

    helper = threading.Thread(target=answer)
    helper.start()
    with pytest.raises(ToolCallError, match="holds no implementation"):
        session.call_tool("remote", {})
    helper.join(5)
    runner_end.close()


# -- connecting -------------------------------------------------------------------------------


def test_without_trialrun_fd_connect_is_none_and_tools_just_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("TRIALRUN_FD", raising=False)
    monkeypatch.setattr(client, "_connected", None)

    @sdk.tool
    def where(city: str) -> Point:
        return Point(len(city), 0)

    @sdk.tool
    async def later(city: str) -> Point:
        return Point(0, len(city))

    assert sdk.connect() is None
    assert where("Oslo") == Point(4, 0)  # the function's own object, untouched
    assert asyncio.run(later("Lima")) == Point(0, 4)


@pytest.mark.parametrize("value", ["abc", "-3", "3.5"])
def test_a_malformed_trialrun_fd_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setattr(client, "_connected", None)
    monkeypatch.setenv("TRIALRUN_FD", value)
    with pytest.raises(ChannelError, match="TRIALRUN_FD must be a file descriptor number"):
        sdk.connect()


def test_trialrun_fd_naming_a_closed_descriptor_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)
    os.close(write_end)
    monkeypatch.setattr(client, "_connected", None)
    monkeypatch.setenv("TRIALRUN_FD", str(read_end))
    with pytest.raises(ChannelError, match="not an open socket in this process"):
        sdk.connect()


def test_trialrun_fd_naming_a_file_is_a_clear_error(tmp_path: Path) -> None:
    with (tmp_path / "f").open("w") as handle:
        with pytest.raises(ChannelError, match="not an open socket"):
            Channel.from_environment(str(handle.fileno()))
        handle.write("still open: the SDK did not close what is not its socket")


def test_a_datagram_socket_is_refused() -> None:
    first, second = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    with first, second, pytest.raises(ChannelError, match="stream socket"):
        Channel.from_environment(str(first.fileno()))


def test_the_channel_descriptor_is_not_inherited_by_tool_subprocesses() -> None:
    runner_end, agent_end = socket.socketpair()
    os.set_inheritable(agent_end.fileno(), True)
    channel = Channel.from_environment(str(agent_end.detach()))
    assert not os.get_inheritable(channel._sock.fileno())
    channel.close()
    runner_end.close()


def test_connect_is_cached_and_refused_in_a_forked_child(
    monkeypatch: pytest.MonkeyPatch, start: Start
) -> None:
    session, _, _ = start(FakeRunner("record"))
    assert sdk.connect() is session is sdk.connect()
    monkeypatch.setenv("TRIALRUN_FD", "999")
    monkeypatch.setattr(client, "_connected", (os.getpid() + 1, session))  # as seen after fork
    with pytest.raises(ChannelError, match="forked child"):
        sdk.connect()


# -- line framing -----------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=60)
@given(
    messages=st.lists(st.dictionaries(st.text(max_size=5), json_values, max_size=4), max_size=6),
    cuts=st.lists(st.integers(min_value=1, max_value=64), max_size=20),
)
def test_messages_arrive_whole_however_the_bytes_are_split(
    messages: list[dict[str, Any]], cuts: list[int]
) -> None:
    sent = [{**m, "type": "x"} for m in messages]
    data = b"".join(json.dumps(m, ensure_ascii=False).encode() + b"\n" for m in sent)
    runner_end, agent_end = socket.socketpair()
    channel = Channel(agent_end)

    def write() -> None:
        rest = data
        for cut in cuts:
            runner_end.sendall(rest[:cut])
            rest = rest[cut:]
        runner_end.sendall(rest)
        runner_end.close()

    writer = threading.Thread(target=write)
    writer.start()
    received = [channel.receive() for _ in sent]
    writer.join(5)
    with pytest.raises(ChannelError, match="closed the channel"):
        channel.receive()
    channel.close()
    assert received == sent


def test_a_sync_call_on_a_loop_busy_with_an_async_call_is_refused(start: Start) -> None:
    session, served, thread = start(FakeRunner("record"))

    async def main() -> Any:
        release = asyncio.Event()
        running = asyncio.Event()

        async def held() -> str:
            running.set()
            await release.wait()
            return "async done"

        pending = asyncio.ensure_future(session.acall_tool("slow", {}, held))
        await running.wait()
        with pytest.raises(RuntimeError, match=r"asyncio\.to_thread"):
            session.call_tool("blocking", {}, lambda: "never")
        release.set()
        return await pending

    assert asyncio.run(main()) == "async done"
    finish(session, thread)
    assert served.tool_sequence() == ["slow"]


@pytest.mark.parametrize(
    ("how", "words"),
    [
        ("close", "the trialrun runner closed the channel while the agent waited for its answer"),
        ("reset", "lost the channel to the trialrun runner while waiting for its answer "),
    ],
)
def test_a_real_agent_whose_runner_goes_away_gets_a_channel_error(how: str, words: str) -> None:
    runner_end, agent_end = socket.socketpair()
    agent = subprocess.Popen(
        [sys.executable, str(AGENTS_DIR / "sdk_runner_gone.py")],
        env={**os.environ, "TRIALRUN_FD": str(agent_end.fileno())},
        pass_fds=(agent_end.fileno(),),
        stderr=subprocess.PIPE,
        text=True,
    )
    agent_end.close()
    runner_end.sendall(b'{"type":"task_start","task_id":"t","input":1}\n')
    select.select([runner_end], [], [], 10)  # the agent's tool_call arrived
    if how == "close":
        runner_end.recv(65536)
    # Closing with the tool_call unread resets the agent's end (ECONNRESET on its read).
    runner_end.close()
    _, stderr = agent.communicate(timeout=HANG_GUARD_S)
    assert agent.returncode == 7, stderr
    assert f"agent saw: {words}" in stderr and "Traceback" not in stderr
