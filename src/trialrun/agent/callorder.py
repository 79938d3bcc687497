"""The order in which one model turn's parallel tool calls go to the runner.

A model may ask for several tools in one turn, and a framework may run them concurrently in a
thread pool (LangGraph's sync ``ToolNode``), so which call reaches the runner first would change
from run to run, and with it the cassette order and ``call_order``. A ``TurnOrder`` holds each call
back until every call the model listed before it has *passed*: it holds its place in the queue to
the runner (the session's FIFO call lock, so it is sent first), or it finished without reaching
the runner (a wrapper answered it, it raised). Only the sending is ordered: what runs around it
(the framework's other interceptors) keeps its concurrency.

A predecessor may never come: a wrapper that trialrun cannot see answered it, or the graph sent
only some of the turn's calls. A call therefore waits for its predecessors at most ``PATIENCE``
seconds, then goes anyway, and the ones it gave up on count as passed for the rest of the turn.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Hashable, Sequence

PATIENCE = 5.0
"""Seconds a call waits for the calls listed before it before it goes without them."""


class TurnOrder:
    """One turn's calls, by id, in the order the model listed them; thread-safe."""

    def __init__(self, call_ids: Sequence[str]) -> None:
        if len(set(call_ids)) != len(call_ids):
            raise ValueError(f"the calls of a turn need distinct ids, found {list(call_ids)!r}")
        self._ids = tuple(call_ids)
        self._position = {call_id: i for i, call_id in enumerate(self._ids)}
        self._passed = [False] * len(self._ids)
        self._changed = threading.Condition()

    @property
    def call_ids(self) -> tuple[str, ...]:
        return self._ids

    def wait_turn(self, call_id: str, patience: float | None = None) -> list[str]:
        """Block until the calls listed before ``call_id`` passed; an unknown id never waits.

        Returns the ids of the predecessors it stopped waiting for after ``patience`` seconds
        (``PATIENCE`` when None), in the model's order; empty when all passed in time.
        """
        position = self._position.get(call_id)
        if position is None:
            return []
        with self._changed:
            if self._changed.wait_for(
                lambda: all(self._passed[:position]),
                timeout=PATIENCE if patience is None else patience,
            ):
                return []
            missing = [self._ids[i] for i in range(position) if not self._passed[i]]
            # The later calls of the turn would wait for the same missing ones: not again.
            for i in range(position):
                self._passed[i] = True
            self._changed.notify_all()
            return missing

    def passed(self, call_id: str) -> None:
        """``call_id`` holds its place in the queue to the runner, or will never take one."""
        position = self._position.get(call_id)
        if position is None:
            return
        with self._changed:
            if not self._passed[position]:
                self._passed[position] = True
                self._changed.notify_all()


class TurnOrders:
    """The turns of one session by key; a turn's order outlives it, so a call retried after its
    turn has passed finds its predecessors passed instead of waiting for them again."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._turns: dict[Hashable, TurnOrder] = {}

    def turn(self, key: Hashable, call_ids: Sequence[str]) -> TurnOrder:
        """The turn under ``key``, created with ``call_ids`` the first time it is asked for."""
        with self._lock:
            order = self._turns.get(key)
            if order is None:
                order = self._turns[key] = TurnOrder(call_ids)
            return order


_BY_OWNER: weakref.WeakKeyDictionary[object, TurnOrders] = weakref.WeakKeyDictionary()
_BY_OWNER_LOCK = threading.Lock()


def turns_of(owner: object) -> TurnOrders:
    """The ``TurnOrders`` kept for ``owner`` (a session) for as long as it lives."""
    with _BY_OWNER_LOCK:
        orders = _BY_OWNER.get(owner)
        if orders is None:
            orders = _BY_OWNER[owner] = TurnOrders()
        return orders
