"""``ToolBodies``: the calls of tool bodies, by kind and tool, said in one log line a case."""

from __future__ import annotations

from typing import Any

from trialrun.base.results import AgentRun
from trialrun.running.tool_bodies import ToolBodies, answered_tools


def agent_run(*events: dict[str, Any]) -> AgentRun:
    run = AgentRun(case_id="t1")
    run.events.extend(events)
    return run


def tool_call(name: str, **extra: Any) -> dict[str, Any]:
    return {"type": "tool_call", "name": name, "call_id": name, "timestamp": 1.0, **extra}


def notes(run: AgentRun) -> list[dict[str, Any]]:
    return [event for event in run.events if event["type"] == "log"]


def test_only_the_agents_own_tools_count_as_answered() -> None:
    run = agent_run(
        tool_call("research"),
        tool_call("search_docs", mcp_server="docs"),
        tool_call("handoff:billing", kind="handoff"),
        {"type": "tool_result", "call_id": "research", "timestamp": 2.0},
    )
    assert answered_tools(run) == {"research"}


def test_replay_counts_the_recordings_of_answered_tools_and_keeps_the_rest_unused() -> None:
    run = agent_run(tool_call("research"), tool_call("search", mcp_server="docs"))
    bodies = ToolBodies(run, "replay")
    unused = [("a", "research"), ("b", None), ("c", "search"), ("d", "gone")]
    assert bodies.unused("mcp", unused, lambda item: item[1]) == unused[1:]
    assert bodies.unused("model", [("e", "research")], lambda item: item[1]) == []
    bodies.note()
    [note] = notes(run)
    assert note["message"] == (
        "recordings made by tool bodies while recording: 1 model call inside 'research', "
        "1 MCP call inside 'research'; replay answered those tools from the tool cassette, "
        "so it never asked for them (not unused)"
    )
    assert note["data"] == {
        "source": "trialrun",
        "inside_tool": {"research": 2},
        "by_kind": {"model": {"research": 1}, "mcp": {"research": 1}},
    }


def test_record_says_what_replay_will_not_repeat_in_one_line() -> None:
    run = agent_run()
    bodies = ToolBodies(run, "record")
    bodies.made("http", ["fetch", None, "fetch"])
    bodies.made("mcp", [None, "research"])
    bodies.note()
    [note] = notes(run)
    assert note["message"] == (
        "calls made by tool bodies: 1 MCP call inside 'research', 2 HTTP exchanges inside "
        "'fetch'; replay answers those tools from the tool cassette and never runs their "
        "bodies, so it will not repeat these calls"
    )
    assert note["level"] == "info"


def test_no_calls_inside_tools_no_note() -> None:
    run = agent_run(tool_call("research"))
    bodies = ToolBodies(run, "replay")
    assert bodies.unused("http", ["x"], lambda item: None) == ["x"]
    bodies.made("model", [None])
    bodies.note()
    assert notes(run) == []
