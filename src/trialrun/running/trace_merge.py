"""How what a service saw lands in a case's ``AgentRun``: its failure, and time order."""

from __future__ import annotations

import time

from trialrun.base.results import AgentRun, Failure, Status

MISMATCH = "cassette mismatch"
"""What a proxy's or the gateway's error says when replay had no recording for a call."""

_CONSEQUENCES = frozenset({"agent_crashed", "task_error", "idle_timeout", "protocol_error"})
"""Failures an agent shows after a replay miss it could not handle: the miss is the cause."""


def fail_mismatch(run: AgentRun, message: str, *, kind: str = "cassette_mismatch") -> None:
    if run.failure is not None:
        if run.failure.kind not in _CONSEQUENCES:
            return
        message = f"{message} (then: {run.failure.message})"
    fail(run, kind, message, "fail")


def fail(run: AgentRun, kind: str, message: str, status: Status) -> None:
    run.failure = Failure(kind=kind, message=message, status=status, stderr_tail=run.stderr_tail)
    event = {"type": "agent_error", "case_id": run.case_id, "timestamp": time.time()}
    run.events.append({**event, "kind": kind, "message": message})


def order_by_time(run: AgentRun) -> None:
    """Events, and tool calls after them, in the order they happened (stable for ties)."""
    run.events.sort(key=lambda event: float(event.get("timestamp") or 0.0))
    position = {
        event.get("call_id"): index
        for index, event in enumerate(run.events)
        if event.get("type") == "tool_call"
    }
    run.tool_calls.sort(key=lambda call: position.get(call.call_id, len(position)))
