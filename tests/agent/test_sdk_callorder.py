"""TurnOrder: a turn's calls pass in the model's order, and a missing one is given up."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trialrun.agent import callorder
from trialrun.agent.callorder import TurnOrder, turns_of

IDS = ["c1", "c2", "c3", "c4"]


def test_a_call_waits_until_every_call_listed_before_it_passed() -> None:
    order = TurnOrder(IDS[:3])
    waiting = threading.Event()
    result: list[list[str]] = []

    def third() -> None:
        waiting.set()
        result.append(order.wait_turn("c3", patience=120))

    thread = threading.Thread(target=third)
    thread.start()
    assert waiting.wait(60)
    order.passed("c2")
    assert thread.is_alive()  # c1 has not passed: c3 is still held however long this took
    order.passed("c1")
    thread.join(120)
    assert result == [[]]


def test_the_first_call_and_calls_outside_the_turn_never_wait() -> None:
    order = TurnOrder(IDS[:2])
    assert order.wait_turn("c1", patience=0) == []
    assert order.wait_turn("other", patience=0) == []
    order.passed("other")  # not in the turn: changes nothing
    assert order.wait_turn("c2", patience=0) == ["c1"]


def test_given_up_predecessors_count_as_passed_for_the_rest_of_the_turn() -> None:
    order = TurnOrder(IDS)
    order.passed("c2")
    assert order.wait_turn("c3", patience=0) == ["c1"]
    assert order.wait_turn("c4", patience=0) == ["c3"]  # c1 is not waited for twice
    order.passed("c3")
    assert order.wait_turn("c4", patience=0) == []
    assert order.wait_turn("c2", patience=0) == []


def test_the_default_patience_is_the_module_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(callorder, "PATIENCE", 0.0)
    assert TurnOrder(IDS[:2]).wait_turn("c2") == ["c1"]


def test_a_turn_needs_distinct_ids() -> None:
    with pytest.raises(ValueError, match=r"distinct ids, found \['c1', 'c1'\]"):
        TurnOrder(["c1", "c1"])


@given(
    st.permutations(IDS).flatmap(
        lambda ids: st.tuples(st.just(ids), st.lists(st.sampled_from(IDS), unique=True))
    ),
    st.sampled_from(IDS),
)
def test_what_a_call_gives_up_on_is_exactly_its_predecessors_not_yet_passed(
    turn_and_passed: tuple[list[str], list[str]], asking: str
) -> None:
    ids, passed = turn_and_passed
    order = TurnOrder(ids)
    for call_id in passed:
        order.passed(call_id)
    before = ids[: ids.index(asking)]
    assert order.wait_turn(asking, patience=0) == [i for i in before if i not in passed]
    assert order.wait_turn(asking, patience=0) == []


def test_each_owner_keeps_its_own_turns_by_key() -> None:
    class Owner:
        pass

    one, two = Owner(), Owner()
    turn = turns_of(one).turn("k", IDS[:2])
    assert turns_of(one).turn("k", ["ignored", "ids"]) is turn  # created once, then found
    assert turns_of(one).turn("k2", IDS[:2]) is not turn
    assert turns_of(two).turn("k", IDS[:2]) is not turn
    assert turn.call_ids == ("c1", "c2")
