"""``mark_inside``: each recorded tools/call gets the tool whose body ran when it arrived."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from trialrun.mcp_proxy.cassette import CallRecord, ExchangeRecord, Record
from trialrun.mcp_proxy.marks import mark_inside


def call(q: str) -> CallRecord:
    return CallRecord("search", {"q": q}, True, {"content": []}, None)


def event(q: str, timestamp: Any) -> dict[str, Any]:
    return {"tool": "search", "args": {"q": q}, "timestamp": timestamp}


def window(begin: float, end: float, tool: str) -> Any:
    return lambda arrived: tool if begin <= arrived <= end else None


def marks(records: list[Record]) -> list[str | None]:
    return [r.inside_tool if isinstance(r, CallRecord) else "exchange" for r in records]


def test_identical_calls_pair_with_their_events_in_the_order_they_arrived() -> None:
    # Events are written as calls complete: the later call of two identical ones finished first.
    records: list[Record] = [ExchangeRecord("tools/list", {}, result={}), call("a"), call("a")]
    events = [event("a", 20.0), event("a", 10.0)]
    marked = mark_inside(records, events, window(15.0, 25.0, "research"))
    assert marks(marked) == ["exchange", None, "research"]
    assert marked[0] is records[0]


def test_calls_pair_by_tool_and_arguments_not_by_position() -> None:
    records: list[Record] = [call("outside"), call("inside")]
    events = [event("inside", 12.0), event("outside", 5.0)]
    assert marks(mark_inside(records, events, window(10.0, 20.0, "t"))) == [None, "t"]


def test_a_call_without_a_timed_event_stays_unmarked() -> None:
    records: list[Record] = [call("a"), call("b"), call("c")]
    events = [event("a", "soon"), event("b", None), {"tool": "search", "timestamp": 1.0}]
    assert marks(mark_inside(records, events, lambda arrived: "t")) == [None, None, None]


@given(st.lists(st.tuples(st.sampled_from("ab"), st.floats(0, 100)), max_size=8))
def test_every_call_with_an_event_is_judged_once(pairs: list[tuple[str, float]]) -> None:
    records: list[Record] = [call(q) for q, _ in sorted(pairs, key=lambda pair: pair[1])]
    judged: list[float] = []

    def inside(arrived: float) -> str | None:
        judged.append(arrived)
        return "t" if arrived >= 50 else None

    marked = mark_inside(records, [event(q, t) for q, t in pairs], inside)
    assert sorted(judged) == sorted(t for _, t in pairs)
    expected = [("t" if t >= 50 else None) for _, t in sorted(pairs, key=lambda pair: pair[1])]
    assert marks(marked) == expected
