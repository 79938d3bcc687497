"""Replay and record logic in-process: matching, era handling, progress tokens, pairing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trialrun.mcp_proxy import McpCassette, read_events
from trialrun.mcp_proxy.cassette import CallRecord, ExchangeRecord, Record
from trialrun.mcp_proxy.events import EventLog
from trialrun.mcp_proxy.record import Recorder
from trialrun.mcp_proxy.replay import ReplaySession

MODERN = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}
SERVER_INFO = {"io.modelcontextprotocol/serverInfo": {"name": "real-docs", "version": "1.0.0"}}
DISCOVER = {
    "supportedVersions": ["2026-07-28"],
    "capabilities": {"tools": {"listChanged": True}},
    "instructions": "Search the docs.",
    "resultType": "complete",
    "ttlMs": 0,
    "cacheScope": "private",
    "_meta": SERVER_INFO,
}
MODERN_RESULT = {
    "content": [{"type": "text", "text": "hit"}],
    "isError": False,
    "resultType": "complete",
    "_meta": {**SERVER_INFO, "vendor/x": 1},
}


def session(*records: Record, events: EventLog | None = None) -> ReplaySession:
    return ReplaySession(McpCassette(None, None, records), server_name="docs", events=events)


def request(request_id: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def tool_call(request_id: Any, tool: str, args: Any, **meta: Any) -> dict[str, Any]:
    return request(request_id, "tools/call", {"name": tool, "arguments": args, "_meta": meta})


def test_idempotent_answers_are_served_every_time_with_the_incoming_id() -> None:
    replay = session(ExchangeRecord("tools/list", {}, result={"tools": [{"name": "a"}]}))
    for request_id in (1, "two", 3):
        [reply] = replay.handle(request(request_id, "tools/list", {"_meta": {"x": 1}}))
        assert reply == {"jsonrpc": "2.0", "id": request_id, "result": {"tools": [{"name": "a"}]}}


def test_list_pages_are_keyed_by_cursor() -> None:
    replay = session(
        ExchangeRecord("tools/list", {}, result={"tools": [1], "nextCursor": "p2"}),
        ExchangeRecord("tools/list", {"cursor": "p2"}, result={"tools": [2]}),
    )
    assert replay.handle(request(1, "tools/list", {"cursor": "p2"}))[0]["result"] == {"tools": [2]}
    [miss] = replay.handle(request(2, "tools/list", {"cursor": "p3"}))
    assert miss["error"]["code"] == -32000
    assert miss["error"]["message"].startswith(
        "cassette mismatch: no recorded answer for tools/list"
    )
    assert 'Recorded for tools/list: {}; {"cursor":"p2"}' in miss["error"]["message"]


def test_calls_are_consumed_once_in_order_and_misses_name_the_nearest() -> None:
    replay = session(
        CallRecord("stamp", {}, True, {"n": 1}, None),
        CallRecord("search", {"q": "reset password"}, True, {"n": 2}, None),
        CallRecord("stamp", {}, True, {"n": 3}, None),
    )
    assert [replay.handle(tool_call(i, "stamp", {}))[0]["result"]["n"] for i in (1, 2)] == [1, 3]
    [again] = replay.handle(tool_call(3, "stamp", {}))
    assert "1 identical recording" not in again["error"]["message"]
    assert "2 identical recordings were already used" in again["error"]["message"]
    [miss] = replay.handle(tool_call(4, "search", {"q": "reset passwd"}))
    error = miss["error"]
    assert error["code"] == -32000 and error["message"].startswith("cassette mismatch")
    assert error["data"]["tool"] == "search" and error["data"]["args"] == {"q": "reset passwd"}
    assert error["data"]["nearest"][0]["args"] == {"q": "reset password"}
    [other] = replay.handle(tool_call(5, "unknown_tool", {}))
    assert "Nearest recorded:" in other["error"]["message"]  # other tools are shown instead
    [odd] = replay.handle(tool_call(6, "stamp", {"n": 10**400}))  # no double holds it
    assert odd["error"]["message"].startswith("cassette mismatch")


def test_progress_uses_the_incoming_token_and_only_when_asked() -> None:
    progress = ({"progress": 1, "total": 2}, {"progress": 2, "total": 2})
    record = CallRecord("slow", {"n": 2}, True, {"content": []}, None, progress)
    replay = session(record, record)
    first = replay.handle(tool_call(9, "slow", {"n": 2}, progressToken="tok-9"))
    assert [m.get("method") for m in first] == ["notifications/progress"] * 2 + [None]
    assert [m["params"]["progressToken"] for m in first[:2]] == ["tok-9", "tok-9"]
    assert [m["params"]["progress"] for m in first[:2]] == [1, 2]
    assert len(replay.handle(tool_call(10, "slow", {"n": 2}))) == 1


def test_errors_replay_as_recorded() -> None:
    rpc = {"code": -32602, "message": "no such user", "data": {"id": 1}}
    replay = session(
        CallRecord("lookup", {}, False, None, "JSON-RPC error -32602: no such user", rpc_error=rpc),
        CallRecord("create", {}, False, {"isError": True, "content": []}, "boom"),
    )
    assert replay.handle(tool_call(1, "lookup", {}))[0] == {"jsonrpc": "2.0", "id": 1, "error": rpc}
    assert replay.handle(tool_call(2, "create", {}))[0]["result"]["isError"] is True


def test_a_live_secret_matches_its_redacted_recording() -> None:
    replay = session(CallRecord("login", {"password": "[REDACTED]"}, True, {"ok": 1}, None))
    assert replay.handle(tool_call(1, "login", {"password": "hunter2"}))[0]["result"] == {"ok": 1}
    [miss] = replay.handle(tool_call(2, "login", {"password": "hunter3"}))
    assert "hunter3" not in str(miss)  # a miss never echoes the secret


def test_modern_recording_to_a_legacy_client() -> None:
    replay = session(
        ExchangeRecord("server/discover", {}, result=DISCOVER),
        CallRecord("search", {}, True, MODERN_RESULT, None),
    )
    [init] = replay.handle(request(0, "initialize", {"protocolVersion": "2025-06-18"}))
    assert init["result"] == {
        "protocolVersion": "2025-06-18",
        "capabilities": {"tools": {"listChanged": True}},
        "serverInfo": {"name": "real-docs", "version": "1.0.0"},
        "instructions": "Search the docs.",
    }
    [result] = replay.handle(tool_call(1, "search", {}))  # no protocol version in _meta: legacy
    assert result["result"] == {
        "content": [{"type": "text", "text": "hit"}],
        "isError": False,
        "_meta": {"vendor/x": 1},
    }


def test_legacy_recording_to_a_modern_client() -> None:
    initialize = {"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {"name": "s"}}
    replay = session(
        ExchangeRecord("initialize", {}, result=initialize),
        ExchangeRecord("tools/list", {}, result={"tools": []}),
    )
    [discover] = replay.handle(request(1, "server/discover", {"_meta": MODERN}))
    assert discover["error"]["code"] == -32601  # the client falls back to initialize
    assert replay.handle(request(2, "initialize", {}))[0]["result"] == initialize
    listing = replay.handle(request(3, "tools/list", {"_meta": MODERN}))[0]["result"]
    assert listing == {"tools": [], "resultType": "complete"}


def test_a_cassette_without_handshake_still_initializes() -> None:
    replay = session(
        CallRecord("t", {}, True, {}, None), ExchangeRecord("prompts/get", {"name": "p"}, result={})
    )
    [init] = replay.handle(request(0, "initialize", {}))
    assert init["result"]["capabilities"] == {"tools": {}, "prompts": {}}
    assert init["result"]["serverInfo"] == {"name": "docs", "version": "replay"}
    assert replay.handle(request(1, "ping"))[0]["result"] == {}
    assert replay.handle(request(2, "logging/setLevel", {"level": "info"}))[0]["result"] == {}


def test_reads_and_prompts_are_consumed_and_the_rest_is_method_not_found() -> None:
    replay = session(ExchangeRecord("resources/read", {"uri": "docs://a"}, result={"contents": []}))
    read = request(1, "resources/read", {"uri": "docs://a", "_meta": {"progressToken": 3}})
    assert replay.handle(read)[0]["result"] == {"contents": []}
    assert "cassette mismatch" in replay.handle(read)[0]["error"]["message"]
    assert replay.handle(request(2, "sampling/createMessage", {}))[0]["error"]["code"] == -32601
    assert replay.handle(request(3, "tools/call", {"name": 5}))[0]["error"]["code"] == -32602
    assert replay.handle({"jsonrpc": "2.0", "method": "notifications/initialized"}) == []
    assert replay.handle({"jsonrpc": "2.0", "id": 4, "result": {}}) == []  # a client answer
    assert replay.handle(42)[0]["error"]["code"] == -32600


def test_replay_writes_events(tmp_path: Path) -> None:
    events = EventLog(tmp_path / "e.jsonl", server="docs", replayed=True)
    replay = session(CallRecord("t", {"a": 1}, True, {"r": 1}, None), events=events)
    replay.handle(tool_call(1, "t", {"a": 1}))
    replay.handle(tool_call(2, "t", {"a": 2}))
    events.close()
    first, second = read_events(tmp_path / "e.jsonl")
    assert {
        k: first[k] for k in ("server", "tool", "args", "ok", "result", "error", "replayed")
    } == {
        "server": "docs",
        "tool": "t",
        "args": {"a": 1},
        "ok": True,
        "result": {"r": 1},
        "error": None,
        "replayed": True,
    }
    assert isinstance(first["timestamp"], float) and first["duration_ms"] >= 0
    assert second["ok"] is False and second["error"].startswith("cassette mismatch")


# ---- recording --------------------------------------------------------------------------------


def test_recorder_pairs_by_id_keeps_arrival_order_and_drops_ids_and_tokens() -> None:
    recorder = Recorder(server_name="docs", upstream=["srv"])
    recorder.from_client(tool_call(1, "a", {}, progressToken="p", traceparent="t-1", **MODERN))
    recorder.from_client(tool_call("1", "b", {"x": 1}))  # "1" is not 1
    recorder.from_client({"jsonrpc": "2.0", "method": "notifications/initialized"})
    progress = {"progressToken": "p", "progress": 1, "total": 1}
    recorder.from_server({"jsonrpc": "2.0", "method": "notifications/progress", "params": progress})
    recorder.from_server({"jsonrpc": "2.0", "id": "1", "result": {"content": [], "isError": True}})
    recorder.from_server([{"jsonrpc": "2.0", "id": 1, "result": {"content": []}}])
    recorder.from_server({"jsonrpc": "2.0", "id": 99, "result": {}})  # nobody asked: ignored
    first, second = recorder.records()
    assert isinstance(first, CallRecord) and isinstance(second, CallRecord)
    assert (first.tool, first.ok, first.progress) == ("a", True, ({"progress": 1, "total": 1},))
    assert first.meta == {"traceparent": "t-1"}
    assert (second.tool, second.ok, second.error) == (
        "b",
        False,
        "the tool reported an error (isError: true)",
    )


def test_recorder_keeps_the_first_idempotent_answer_and_notes_the_era() -> None:
    recorder = Recorder(server_name="docs", upstream=["srv"])
    for request_id, tools in ((1, ["a"]), (2, ["b"])):
        recorder.from_client(request(request_id, "tools/list", {"_meta": MODERN}))
        recorder.from_server({"jsonrpc": "2.0", "id": request_id, "result": {"tools": tools}})
    recorder.from_client(request(3, "initialize", {"protocolVersion": "2025-11-25"}))
    recorder.from_server({"jsonrpc": "2.0", "id": 3, "result": {"protocolVersion": "2025-11-25"}})
    recorder.from_client(request(4, "resources/read", {"uri": "u"}))
    recorder.from_server({"jsonrpc": "2.0", "id": 4, "error": {"code": -1, "message": "gone"}})
    records = recorder.records()
    assert [r.to_json() for r in records] == [
        {"method": "tools/list", "params": {}, "result": {"tools": ["a"]}},
        {"method": "initialize", "params": {}, "result": {"protocolVersion": "2025-11-25"}},
        {
            "method": "resources/read",
            "params": {"uri": "u"},
            "error": {"code": -1, "message": "gone"},
        },
    ]
    assert recorder.header()["era"] == "2025-11-25"
    assert recorder.answered


def test_a_miss_names_the_nearest_line_and_the_first_difference() -> None:
    replay = session(
        CallRecord("search", {"q": "reset password", "limit": 3}, True, {"n": 1}, None, line=2),
        CallRecord("stamp", {}, True, {"n": 2}, None, line=3),
    )
    [miss] = replay.handle(tool_call(1, "search", {"q": "reset passwd", "limit": 3}))
    message = miss["error"]["message"]
    # The first sentence is what it was; the explanation is the last one.
    assert message.startswith(
        'cassette mismatch: no unused recording of tools/call search {"limit"'
    )
    assert message.endswith(
        '. Nearest recording: line 2; first difference at args.q: recorded "reset password", '
        'requested "reset passwd".'
    )
    assert miss["error"]["data"]["difference"].startswith("nearest recording: line 2;")
    # Another tool than any recorded: the tool is the difference.
    [other] = replay.handle(tool_call(2, "fetch", {}))
    assert other["error"]["message"].endswith(
        'line 3; first difference at tool: recorded "stamp", requested "fetch".'
    )
    # A used-up recording says so.
    assert replay.handle(tool_call(3, "stamp", {}))[0]["result"] == {"n": 2}
    [again] = replay.handle(tool_call(4, "stamp", {"x": 1}))
    assert (
        "Nearest recording: line 3 (already used); first difference at args.x: recorded "
        "(absent), requested 1." in again["error"]["message"]
    )


def test_a_differing_secret_is_named_by_its_place_only() -> None:
    replay = session(CallRecord("login", {"password": "hunter2-old"}, True, {}, None, line=1))
    [miss] = replay.handle(tool_call(1, "login", {"password": "hunter2-new"}))
    message = miss["error"]["message"]
    assert "first difference at args.password (a redacted value)." in message
    assert "hunter2" not in message


def test_input_responses_are_compared_when_the_arguments_agree() -> None:
    record = CallRecord("ask", {"q": 1}, True, {}, None, input_responses={"a": "yes"}, line=4)
    replay = session(record)
    call = tool_call(1, "ask", {"q": 1})
    call["params"]["inputResponses"] = {"a": "no"}
    [miss] = replay.handle(call)
    assert miss["error"]["message"].endswith(
        'line 4; first difference at input_responses.a: recorded "yes", requested "no".'
    )
