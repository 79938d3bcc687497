"""``@tool``: arguments bound by name, return types rebuilt, and the decorator's own errors."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import os
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel

import trialrun.agent as sdk
from sdk_agents.fake_runner import FakeRunner, Served
from trialrun.agent import client
from trialrun.agent.channel import Channel
from trialrun.agent.client import Session


@pytest.fixture
def record() -> Iterator[tuple[Served, list[dict[str, Any]]]]:
    """A record-mode session that ``connect()`` returns; yields what the runner saw."""
    yield from _session(FakeRunner("record"))


def _session(runner: FakeRunner) -> Iterator[tuple[Served, list[dict[str, Any]]]]:
    runner_end, agent_end = socket.socketpair()
    thread, served = runner.start(runner_end, task_input={})
    session = Session.open(Channel(agent_end), mode=runner.mode)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(client, "_connected", (os.getpid(), session))
        yield served, served.recorded
    session.close()
    thread.join(5)


@dataclasses.dataclass
class Order:
    order_id: int
    placed: datetime.date


class Hits(BaseModel):
    titles: list[str]


class Shop:
    def __init__(self) -> None:
        self.secret = object()

    @sdk.tool
    def find(self, q: str, *tags: str, limit: int = 5, **filters: Any) -> list[str]:
        return [q, *tags]


@sdk.tool(name="lookup", exclude=("ctx",))
def look_up(ctx: object, order_id: int, verbose: bool = False) -> Order:
    return Order(order_id, datetime.date(2026, 1, 2))


@sdk.tool
async def search(q: str) -> Hits:
    return Hits(titles=[q])


def test_arguments_are_bound_by_name_with_defaults_and_without_self(
    record: tuple[Served, list[dict[str, Any]]],
) -> None:
    _, recorded = record
    assert Shop().find("shoes", "red", "new", colour="blue") == ["shoes", "red", "new"]
    assert recorded[0]["tool"] == "find"
    assert recorded[0]["args"] == {
        "q": "shoes",
        "tags": ["red", "new"],
        "limit": 5,
        "colour": "blue",
    }


def test_positional_and_keyword_calls_are_the_same_call(
    record: tuple[Served, list[dict[str, Any]]],
) -> None:
    _, recorded = record
    look_up(object(), 7)
    look_up(ctx=object(), order_id=7, verbose=False)
    assert recorded[0]["tool"] == recorded[1]["tool"] == "lookup"
    assert recorded[0]["args"] == recorded[1]["args"] == {"order_id": 7, "verbose": False}


def test_results_come_back_as_the_declared_return_type(
    record: tuple[Served, list[dict[str, Any]]],
) -> None:
    _, recorded = record
    assert look_up(None, 3) == Order(3, datetime.date(2026, 1, 2))
    assert asyncio.run(search("x")) == Hits(titles=["x"])
    assert recorded[0]["result"] == {"order_id": 3, "placed": "2026-01-02"}
    assert recorded[1]["result"] == {"titles": ["x"]}


def test_a_replayed_result_that_does_not_fit_the_return_type_is_a_type_error() -> None:
    cassette = [{"tool": "search", "args": {"q": "x"}, "ok": True, "result": {"nope": 1}}]
    for _ in _session(FakeRunner("replay", cassette)):
        with pytest.raises(TypeError, match="does not match the function's return annotation"):
            asyncio.run(search("x"))


def test_a_wrong_call_raises_the_functions_own_type_error_and_sends_nothing(
    record: tuple[Served, list[dict[str, Any]]],
) -> None:
    served, _ = record
    with pytest.raises(TypeError, match="order_id"):
        look_up(None)  # type: ignore[call-arg]
    assert served.messages == []


def test_an_unresolvable_return_annotation_hands_back_json(
    record: tuple[Served, list[dict[str, Any]]],
) -> None:
    @sdk.tool
    def later() -> NotDefinedAnywhere:  # type: ignore[name-defined]  # noqa: F821
        return {"a": (1, 2)}

    assert later() == {"a": [1, 2]}


def test_decorator_misuse_is_explained() -> None:
    with pytest.raises(TypeError, match="needs a name"):
        sdk.tool(lambda: 1)
    with pytest.raises(TypeError, match="collection of parameter names"):
        sdk.tool(exclude="ctx")
    assert sdk.tool(name="named")(lambda: 1)() == 1


def test_the_decorated_function_keeps_its_name_signature_and_docs() -> None:
    import inspect

    assert look_up.__name__ == "look_up"
    assert list(inspect.signature(look_up).parameters) == ["ctx", "order_id", "verbose"]
    assert inspect.iscoroutinefunction(search)


def test_tools_work_from_worker_threads(record: tuple[Served, list[dict[str, Any]]]) -> None:
    served, _ = record
    threads = [threading.Thread(target=look_up, args=(None, n)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert sorted(c["args"]["order_id"] for c in served.of_type("tool_call")) == list(range(6))
    assert served.violations == []
