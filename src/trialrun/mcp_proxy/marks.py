"""Which of the agent's tools was running when each recorded ``tools/call`` arrived.

A recording holds no arrival times (its lines would change on every re-record); the events file
of the same record run has one per call (``timestamp``). Both list the same calls: an event is
written exactly when a call becomes a record. Each recorded call, in file order (the order the
calls arrived), pairs with the earliest event not yet paired that has its tool and arguments
(redacted alike on both sides), so even identical calls pair in the order they arrived. A call
that update mode answered from an old recording (its event names that ``recording``) stays as
it was: its line is copied byte for byte.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from trialrun.mcp_proxy.cassette import CallRecord, Record, canonical


def mark_inside(
    records: Sequence[Record],
    events: Iterable[Mapping[str, Any]],
    inside: Callable[[float], str | None],
) -> list[Record]:
    """``records`` with ``inside_tool`` set on each call that arrived while a tool's body ran.

    ``inside`` names the tool running at a time (epoch seconds), or None. A call no event
    pairs with (an events file cut short) stays as it is.
    """
    arrivals: dict[str, deque[tuple[float, bool]]] = {}
    timed = [event for event in events if isinstance(event.get("timestamp"), int | float)]
    for event in sorted(timed, key=lambda event: float(event["timestamp"])):
        args = event.get("args")
        key = _key(event.get("tool"), args if isinstance(args, dict) else {})
        copied = event.get("recording") is not None
        arrivals.setdefault(key, deque()).append((float(event["timestamp"]), copied))
    marked: list[Record] = []
    for record in records:
        if isinstance(record, CallRecord):
            waiting = arrivals.get(_key(record.tool, record.args))
            arrived, copied = waiting.popleft() if waiting else (0.0, True)
            tool = None if copied else inside(arrived)
            if tool is not None:
                record = dataclasses.replace(record, inside_tool=tool)
        marked.append(record)
    return marked


def _key(tool: Any, args: Mapping[str, Any]) -> str:
    return f"{tool}\n{canonical(dict(args))}"
