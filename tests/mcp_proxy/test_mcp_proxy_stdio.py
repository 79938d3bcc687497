"""The stdio proxy end to end: the real MCP SDK client, the real test server, record then replay.

Replay runs with a server command that does not exist: any answer must come from the cassette.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mcp_proxy_support import (  # type: ignore[import-not-found]
    ABSENT_SERVER,
    STANDARD_STEPS,
    events_sequence,
    run_agent,
    stdio_params,
)
from trialrun.mcp_proxy import load_cassette, read_events

pytest.importorskip("mcp")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One recording of the standard session (2026-07-28 era), shared by the replay tests."""
    root = tmp_path_factory.mktemp("mcp-record")
    cassette, events = root / "docs.jsonl", root / "record-events.jsonl"
    transcript = run_agent(stdio_params(cassette, "record", events=events), STANDARD_STEPS)
    return {"cassette": cassette, "events": events, "transcript": transcript}


def replay(recorded: dict[str, Any], tmp_path: Path, steps: Any, mode: str = "auto") -> Any:
    params = stdio_params(
        recorded["cassette"], "replay", events=tmp_path / "events.jsonl", server=ABSENT_SERVER
    )
    return run_agent(params, steps, mode=mode)


def test_recording_sees_the_live_server(recorded: dict[str, Any]) -> None:
    transcript = recorded["transcript"]
    assert transcript[0] == ["era", "2026-07-28"]
    by_tool = {step[1]: step for step in transcript if step[0] == "call"}
    assert by_tool["slow_index"][3] == [
        [1.0, 3.0, "step 1"],
        [2.0, 3.0, "step 2"],
        [3.0, 3.0, "step 3"],
    ]
    assert by_tool["create_issue"][2]["isError"] is True
    assert by_tool["lookup_user"][2] == {
        "rpc_error": {"code": -32602, "message": "no such user: u-404"}
    }
    cassette = load_cassette(recorded["cassette"])
    assert [c.tool for c in cassette.calls] == [
        "search_docs", "slow_index", "create_issue", "lookup_user", "stamp", "stamp",
    ]  # fmt: skip
    assert {e.method for e in cassette.exchanges} == {"server/discover", "tools/list"}
    text = recorded["cassette"].read_text()
    assert "progressToken" not in text and '"id"' not in text


def test_replay_without_server_gives_the_same_transcript_and_events(
    recorded: dict[str, Any], tmp_path: Path
) -> None:
    assert replay(recorded, tmp_path, STANDARD_STEPS) == recorded["transcript"]
    assert events_sequence(tmp_path / "events.jsonl") == events_sequence(recorded["events"])
    replayed, live = read_events(tmp_path / "events.jsonl"), read_events(recorded["events"])
    assert all(e["replayed"] for e in replayed) and not any(e["replayed"] for e in live)
    assert [e["result"] for e in replayed] == [e["result"] for e in live]
    assert replayed[3]["error"] == "JSON-RPC error -32602: no such user: u-404"
    assert replayed[2]["ok"] is False and replayed[2]["error"].startswith("Error executing tool")


def test_changed_argument_is_a_cassette_mismatch_and_the_proxy_stays_up(
    recorded: dict[str, Any], tmp_path: Path
) -> None:
    steps = [
        ("call", "search_docs", {"q": "reset passwd"}),
        ("call", "search_docs", {"q": "reset password"}),
    ]
    transcript = replay(recorded, tmp_path, steps)
    error = transcript[1][2]["rpc_error"]
    assert error["code"] == -32000
    assert error["message"].startswith("cassette mismatch")
    assert 'search_docs {"q":"reset passwd"}' in error["message"]
    assert 'Nearest recorded: search_docs {"q":"reset password"}' in error["message"]
    assert transcript[2][2]["structuredContent"]["query"] == "reset password"
    events = read_events(tmp_path / "events.jsonl")
    assert [e["ok"] for e in events] == [False, True]
    assert events[0]["error"].startswith("cassette mismatch")


def test_repeated_identical_calls_replay_in_recorded_order(
    recorded: dict[str, Any], tmp_path: Path
) -> None:
    steps = [("call", "stamp", {})] * 3
    transcript = replay(recorded, tmp_path, steps)
    assert [t[2].get("structuredContent") for t in transcript[1:3]] == [
        {"result": 1},
        {"result": 2},
    ]
    third = transcript[3][2]["rpc_error"]["message"]
    assert "cassette mismatch" in third and "2 identical recordings were already used" in third


def test_meta_differences_do_not_matter(recorded: dict[str, Any], tmp_path: Path) -> None:
    steps = [("call", "search_docs", {"q": "reset password"}, {"traceparent": "00-abc-def-01"})]
    transcript = replay(recorded, tmp_path, steps)
    assert transcript[1][2] == recorded["transcript"][2][2]


def test_modern_cassette_replays_to_a_legacy_client(
    recorded: dict[str, Any], tmp_path: Path
) -> None:
    transcript = replay(recorded, tmp_path, STANDARD_STEPS, mode="legacy")
    assert transcript[0] == ["era", "2025-11-25"]
    for legacy, modern in zip(transcript[1:], recorded["transcript"][1:], strict=True):
        if legacy[0] == "call" and "content" in modern[2]:
            assert legacy[2]["content"] == modern[2]["content"]
            assert "_meta" not in legacy[2]  # the 2026 serverInfo stamp is dropped
        else:
            assert legacy[2:] == modern[2:]


@pytest.mark.slow
def test_legacy_recording_replays_to_an_auto_client_and_big_results_pass(tmp_path: Path) -> None:
    cassette = tmp_path / "legacy.jsonl"
    steps = [*STANDARD_STEPS[:3], ("call", "big_result", {"mb": 3})]
    live = run_agent(stdio_params(cassette, "record"), steps, mode="legacy")
    assert live[0] == ["era", "2025-11-25"]
    assert len(live[-1][2]["content"][0]["text"]) == 3 * 1024 * 1024
    assert cassette.stat().st_size > 3 * 1024 * 1024
    # An auto client probes server/discover, gets -32601 and falls back to the handshake.
    again = run_agent(stdio_params(cassette, "replay", server=ABSENT_SERVER), steps, mode="auto")
    assert again == live
