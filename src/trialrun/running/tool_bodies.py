"""Calls made by tool bodies replay never runs: counted in record, not unused in replay, said once.

A tool the agent holds (an SDK-wrapped function) runs its real body in record; replay answers it
from the tool cassette and never runs the body. A model call, an MCP call through trialrun's
proxy or an HTTP request that body made is recorded all the same, marked with the tool's name
(``inside_tool``). In replay such a recording, of a tool the case called, is not an unused
recording: nothing could ask for it, and no re-recording would change that. Record says ahead of
time which calls replay will not repeat, replay which recordings it left alone, each in one log
line of the case.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol, TypeVar

from trialrun.base.results import AgentRun
from trialrun.config.models import Mode

T = TypeVar("T")


class Recorded(Protocol):
    """A recording that may have been made inside a tool's body."""

    @property
    def inside_tool(self) -> str | None: ...


KINDS = {
    "model": ("model call", "model calls"),
    "mcp": ("MCP call", "MCP calls"),
    "http": ("HTTP exchange", "HTTP exchanges"),
}
"""The kinds of call a tool body makes through trialrun, in the order the note lists them."""


def inside_tool(run: AgentRun) -> Callable[[float], str | None]:
    """Which tool was running (its body, in the agent or a tool module) at a given time.

    From the case's ``tool_call`` / ``tool_result`` events; MCP calls and handoffs run no body
    of the agent's. Only an unused recording is ever judged by it, so a call of another thread
    that happened to arrive during a tool's run costs nothing: replay still asks for it.
    """
    opened: dict[Any, tuple[float, str]] = {}
    windows: list[tuple[float, float, str]] = []
    for event in run.events:
        kind = event.get("type")
        if kind == "tool_call" and "mcp_server" not in event and event.get("kind") != "handoff":
            opened[event.get("call_id")] = (float(event["timestamp"]), str(event["name"]))
        elif kind == "tool_result" and event.get("call_id") in opened:
            begin, name = opened.pop(event.get("call_id"))
            windows.append((begin, float(event["timestamp"]), name))
    windows.sort()
    starts = [begin for begin, _end, _name in windows]

    def inside(arrived: float) -> str | None:
        index = bisect.bisect_right(starts, arrived) - 1
        if index >= 0 and arrived <= windows[index][1]:
            return windows[index][2]
        return None

    return inside


def answered_tools(run: AgentRun) -> frozenset[str]:
    """The agent's own tools the case called: MCP calls and handoffs run no body of the agent."""
    return frozenset(
        str(event.get("name"))
        for event in run.events
        if event.get("type") == "tool_call"
        and "mcp_server" not in event
        and event.get("kind") != "handoff"
    )


class ToolBodies:
    """One case's calls of tool bodies, by kind and tool, and the log line that says them."""

    def __init__(self, run: AgentRun, mode: Mode) -> None:
        self._run = run
        self._mode = mode
        self.inside = inside_tool(run) if mode == "record" else None
        """Record mode: which tool's body was running when a call arrived (its recording is
        marked with it); None otherwise."""
        self._counts: dict[str, dict[str, int]] = {kind: {} for kind in KINDS}
        self._answered: frozenset[str] | None = None

    def made(self, kind: str, tools: Iterable[str | None]) -> None:
        """Record mode: the tool (or None) inside which each call of ``kind`` was made, as
        ``inside`` told it."""
        counts = self._counts[kind]
        for tool in tools:
            if tool is not None:
                counts[tool] = counts.get(tool, 0) + 1

    def unused(self, kind: str, items: Iterable[T], tool_of: Callable[[T], str | None]) -> list[T]:
        """Replay: of the recordings no call used, those still unused; the ones made inside the
        body of a tool the case called (so answered from the tool cassette) are counted instead.
        """
        if self._answered is None:
            self._answered = answered_tools(self._run)
        left: list[T] = []
        for item in items:
            tool = tool_of(item)
            if tool is not None and tool in self._answered:
                self.made(kind, [tool])
            else:
                left.append(item)
        return left

    def kept_by_update(self, item: Recorded) -> bool:
        """Update mode: whether an old recording no request used stays all the same: it was
        made inside the body of a tool the case called, which update may have answered from
        the tool cassette without running the body (replay never asks for it either)."""
        if self._answered is None:
            self._answered = answered_tools(self._run)
        return item.inside_tool is not None and item.inside_tool in self._answered

    def note(self) -> None:
        """Append the case's one log line about them (nothing when there were none)."""
        parts: list[str] = []
        totals: dict[str, int] = {}
        for kind, (one, many) in KINDS.items():
            for tool, count in self._counts[kind].items():
                parts.append(f"{count} {one if count == 1 else many} inside {tool!r}")
                totals[tool] = totals.get(tool, 0) + count
        if not parts:
            return
        which = ", ".join(parts)
        if self._mode == "record":
            message = (
                f"calls made by tool bodies: {which}; replay answers those tools from the tool "
                "cassette and never runs their bodies, so it will not repeat these calls"
            )
        else:
            message = (
                f"recordings made by tool bodies while recording: {which}; replay answered "
                "those tools from the tool cassette, so it never asked for them (not unused)"
            )
        by_kind = {kind: dict(counts) for kind, counts in self._counts.items() if counts}
        self._run.events.append(
            {
                "type": "log",
                "case_id": self._run.case_id,
                "timestamp": time.time(),
                "level": "info",
                "message": message,
                "data": {"source": "trialrun", "inside_tool": totals, "by_kind": by_kind},
            }
        )
