"""The stdio proxy spoken to as raw JSON-RPC lines: bad input, signals, tokens, exit codes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from builders import HANG_GUARD_S
from mcp_proxy_support import (  # type: ignore[import-not-found]
    ABSENT_SERVER,
    SERVER_COMMAND,
    RawProxy,
    call,
)
from processes import process_gone
from trialrun.mcp_proxy import load_cassette, proxy_command, read_events
from trialrun.mcp_proxy.cassette import CallRecord, ExchangeRecord, write_cassette

pytest.importorskip("mcp")

DISCOVER_RESULT = {
    "supportedVersions": ["2026-07-28"],
    "capabilities": {"tools": {"listChanged": True}},
    "resultType": "complete",
    "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "real-docs", "version": "1.0.0"}},
}


def replay_proxy(cassette: Path, events: Path | None = None) -> RawProxy:
    return RawProxy(
        proxy_command(ABSENT_SERVER, cassette=cassette, mode="replay", name="docs", events=events)
    )


@pytest.fixture
def small_cassette(tmp_path: Path) -> Path:
    cassette = tmp_path / "small.jsonl"
    progress = ({"progress": 1, "total": 2}, {"progress": 2, "total": 2, "message": "done"})
    write_cassette(
        cassette,
        None,
        [
            ExchangeRecord("server/discover", {}, result=DISCOVER_RESULT),
            CallRecord(
                "slow_index", {"n": 2}, True, {"content": [], "isError": False}, None, progress
            ),
            CallRecord(
                "slow_index", {"n": 2}, True, {"content": [], "isError": False}, None, progress
            ),
        ],
    )
    return cassette


def test_garbage_gets_a_parse_error_and_the_proxy_keeps_going(small_cassette: Path) -> None:
    proxy = replay_proxy(small_cassette)
    proxy.send(b"this is not json {")
    error = proxy.recv()
    assert error["id"] is None and error["error"]["code"] == -32700
    proxy.send({"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert proxy.recv() == {"jsonrpc": "2.0", "id": 1, "result": {}}
    assert proxy.close()[0] == 0


def test_arguments_nested_too_deeply_get_a_parse_error_and_the_proxy_keeps_going(
    small_cassette: Path,
) -> None:
    proxy = replay_proxy(small_cassette)
    deep = "[" * 500 + "]" * 500
    proxy.send(
        b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", '
        b'"params": {"name": "search", "arguments": {"q": ' + deep.encode() + b"}}}"
    )
    error = proxy.recv()
    assert error["error"]["code"] == -32700
    assert "nested more than 100 levels deep" in error["error"]["message"]
    proxy.send({"jsonrpc": "2.0", "id": 2, "method": "ping"})
    assert proxy.recv() == {"jsonrpc": "2.0", "id": 2, "result": {}}
    proxy.send(b'{"jsonrpc": "2.0", "id": 3, "method": "ping", "params": {"x": 1e400}}')
    error = proxy.recv()
    assert error["error"]["code"] == -32700
    assert "1e400 is beyond the range of a JSON number" in error["error"]["message"]
    assert proxy.close()[0] == 0


def test_unknown_methods_and_notifications_in_replay(small_cassette: Path) -> None:
    proxy = replay_proxy(small_cassette)
    proxy.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    proxy.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9}})
    proxy.send({"jsonrpc": "2.0", "id": "x", "method": "sampling/teleport", "params": {}})
    reply = proxy.recv()  # the notifications produced no output: this is the first line
    assert reply["id"] == "x" and reply["error"]["code"] == -32601
    proxy.send({"jsonrpc": "2.0", "id": 2, "method": "resources/read", "params": {"uri": "x://y"}})
    assert "cassette mismatch" in proxy.recv()["error"]["message"]
    proxy.send([{"jsonrpc": "2.0", "id": 3, "method": "ping"}])
    assert proxy.recv()["error"]["code"] == -32600
    assert proxy.close()[0] == 0


def test_progress_is_re_emitted_with_the_callers_token_only_when_asked(
    small_cassette: Path, tmp_path: Path
) -> None:
    events = tmp_path / "events.jsonl"
    proxy = replay_proxy(small_cassette, events)
    proxy.send(call(7, "slow_index", {"n": 2}, progressToken=7))
    first, second, response = proxy.recv_until_response(7)
    assert first["method"] == "notifications/progress"
    assert first["params"] == {"progress": 1, "total": 2, "progressToken": 7}
    assert second["params"]["progressToken"] == 7 and second["params"]["message"] == "done"
    assert response["result"] == {"content": [], "isError": False, "resultType": "complete"}
    proxy.send(call("no-token", "slow_index", {"n": 2}))
    [only] = proxy.recv_until_response("no-token")  # the second recording, no progress
    assert "result" in only
    assert proxy.close()[0] == 0
    assert [(e["tool"], e["ok"], e["replayed"]) for e in read_events(events)] == [
        ("slow_index", True, True),
        ("slow_index", True, True),
    ]


def test_missing_cassette_exits_2_with_one_line(tmp_path: Path) -> None:
    proxy = replay_proxy(tmp_path / "absent.jsonl")
    code, stderr = proxy.close()
    assert code == 2
    assert stderr.splitlines() == [
        f"error: {tmp_path / 'absent.jsonl'}: cassette not found "
        "(replay needs a recorded cassette: run once with --mode record)"
    ]


def test_corrupt_cassette_exits_2_naming_the_line(tmp_path: Path) -> None:
    cassette = tmp_path / "bad.jsonl"
    cassette.write_text(
        '{"method": "ping", "params": {}, "result": {}}\n\n{"tool": "x", "args": [1]\n'
    )
    code, stderr = replay_proxy(cassette).close()
    assert code == 2
    assert len(stderr.splitlines()) == 1
    assert stderr.startswith(f"error: {cassette}:3: invalid JSON")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_in_record_mode_writes_the_cassette_and_stops_the_server(
    tmp_path: Path, signum: int
) -> None:
    cassette, pid_file = tmp_path / "rec.jsonl", tmp_path / "server.pid"
    argv = proxy_command(SERVER_COMMAND, cassette=cassette, mode="record", name="docs")
    proxy = RawProxy(argv, env={"DOCS_SERVER_PID": str(pid_file)})
    proxy.send(b"not json")  # answered by the proxy, never forwarded to the server
    assert proxy.recv()["error"]["code"] == -32700
    proxy.send(call("tok", "slow_index", {"n": 2}, progressToken="tok-1"))
    received = proxy.recv_until_response("tok")
    assert [m["params"]["progressToken"] for m in received[:-1]] == ["tok-1", "tok-1"]
    proxy.process.send_signal(signum)
    assert proxy.process.wait(HANG_GUARD_S) == 0
    [recorded] = load_cassette(cassette).calls
    assert recorded.tool == "slow_index" and recorded.ok
    assert [p["progress"] for p in recorded.progress] == [1, 2]
    assert "tok-1" not in cassette.read_text()
    assert process_gone(int(pid_file.read_text()))


def test_server_dying_mid_session_keeps_what_was_recorded(tmp_path: Path) -> None:
    cassette = tmp_path / "crash.jsonl"
    proxy = RawProxy(proxy_command(SERVER_COMMAND, cassette=cassette, mode="record", name="d"))
    proxy.send(call(1, "search_docs", {"q": "a"}))
    assert "result" in proxy.recv_until_response(1)[-1]
    proxy.send(call(2, "crash_server", {}))
    assert proxy.process.wait(HANG_GUARD_S) == 1
    assert "exited (code 3) mid-session" in proxy.process.stderr.read().decode()  # type: ignore[union-attr]
    assert [c.tool for c in load_cassette(cassette).calls] == ["search_docs"]


def test_server_command_that_cannot_start_exits_2(tmp_path: Path) -> None:
    cassette = tmp_path / "never.jsonl"
    proxy = RawProxy(proxy_command(ABSENT_SERVER, cassette=cassette, mode="record", name="d"))
    code, stderr = proxy.close()
    assert code == 2
    assert stderr.splitlines() == [
        f"error: cannot start MCP server: command not found: {ABSENT_SERVER[0]}"
    ]
    assert not cassette.exists()


def test_server_exiting_before_answering_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    cassette = tmp_path / "never.jsonl"
    cassette.write_text("keep me\n")
    events = tmp_path / "events.jsonl"
    failing = [sys.executable, "-c", "import sys; sys.exit('no module named mcp')"]
    argv = proxy_command(failing, cassette=cassette, mode="record", name="d", events=events)
    proxy = RawProxy(argv)
    assert proxy.process.wait(HANG_GUARD_S) == 2
    stderr = proxy.process.stderr.read().decode()  # type: ignore[union-attr]
    # The server's own line passes through unchanged, and the error line quotes it.
    said, error = stderr.splitlines()
    assert said == "no module named mcp"
    assert error.startswith("error: MCP server exited with code 1 before answering: ")
    assert error.endswith(" (its stderr: no module named mcp)")
    assert cassette.read_text() == "keep me\n"
    # For trialrun run, which reads it beside the events file: the line without "error: ".
    failure = events.with_name("events.jsonl.failure").read_text()
    assert failure == error.removeprefix("error: ") + "\n"


def test_huge_messages_are_ordinary_traffic(tmp_path: Path) -> None:
    cassette = tmp_path / "huge.jsonl"
    text = "ü" * (4 * 1024 * 1024)
    write_cassette(
        cassette,
        None,
        [
            CallRecord(
                "dump",
                {"k": "v" * 100_000},
                True,
                {"content": [{"type": "text", "text": text}]},
                None,
            )
        ],
    )
    proxy = replay_proxy(cassette)
    proxy.send(call(1, "dump", {"k": "v" * 100_000}))
    assert proxy.recv()["result"]["content"][0]["text"] == text
    assert proxy.close()[0] == 0


@pytest.mark.parametrize("mode", ["record", "replay"])
def test_a_client_that_closes_the_pipe_it_reads_is_a_hang_up_not_a_server_fault(
    tmp_path: Path, small_cassette: Path, mode: str
) -> None:
    cassette = tmp_path / "rec.jsonl" if mode == "record" else small_cassette
    argv = proxy_command(SERVER_COMMAND, cassette=cassette, mode=mode, name="docs")
    proxy = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proxy.stdin is not None and proxy.stdout is not None and proxy.stderr is not None
    proxy.stdout.close()  # the agent is gone: every answer the proxy writes hits EPIPE
    request = (
        call(1, "search_docs", {"q": "a"}) if mode == "record" else call(1, "slow_index", {"n": 2})
    )
    proxy.stdin.write(json.dumps(request).encode() + b"\n")
    proxy.stdin.flush()
    code = proxy.wait(HANG_GUARD_S)
    stderr = proxy.stderr.read().decode()
    proxy.stdin.close()
    assert code == 0, stderr
    assert "Traceback" not in stderr and "mid-session" not in stderr, stderr
    if mode == "record":
        assert [c.tool for c in load_cassette(cassette).calls] == ["search_docs"]


GATED_SERVER = [
    sys.executable,
    str(Path(__file__).parent.parent / "mcp_servers" / "gated_server.py"),
]


def _gated(tmp_path: Path, cassette: Path, *extra: str) -> tuple[RawProxy, Path]:
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    argv = proxy_command([*GATED_SERVER, str(gate)], cassette=cassette, mode="record", name="d")
    # Options go before the `--` that starts the server command.
    split = argv.index("--")
    return RawProxy([*argv[:split], *extra, *argv[split:]]), gate


def _stderr_line(proxy: RawProxy) -> str:
    assert proxy.process.stderr is not None
    return proxy.process.stderr.readline().decode()


def test_piped_input_waits_for_every_answer_before_the_cassette_is_written(
    tmp_path: Path,
) -> None:
    cassette = tmp_path / "piped.jsonl"
    proxy, gate = _gated(tmp_path, cassette)
    proxy.send(call(1, "search_docs", {"q": "a"}))
    proxy.send(call(2, "search_docs", {"q": "b"}))
    assert proxy.process.stdin is not None
    proxy.process.stdin.close()  # the whole input was piped: EOF before any answer
    # The proxy says it waits (so a user piping input knows why nothing happens yet); only then
    # does the server answer, as a server still importing its libraries would.
    assert _stderr_line(proxy) == (
        "trialrun mcp-proxy: input ended with 2 requests unanswered; waiting up to 30 s "
        "for the server (--answer-timeout)\n"
    )
    with gate.open("wb") as opened:
        opened.write(b"xx")
    assert proxy.process.wait(HANG_GUARD_S) == 0
    assert [c.args for c in load_cassette(cassette).calls] == [{"q": "a"}, {"q": "b"}]
    assert [m["id"] for m in (proxy.recv(), proxy.recv())] == [1, 2]


def test_a_cassette_is_never_replaced_by_one_with_fewer_answers_than_requests(
    tmp_path: Path,
) -> None:
    cassette = tmp_path / "good.jsonl"
    write_cassette(cassette, None, [CallRecord("search_docs", {"q": "a"}, True, {}, None)])
    before = cassette.read_bytes()
    proxy, _ = _gated(tmp_path, cassette, "--answer-timeout", "0")  # the gate never opens
    proxy.send(call(1, "search_docs", {"q": "a"}))
    code, stderr = proxy.close()
    assert code == 1
    assert stderr.splitlines()[-1] == (
        f"error: {cassette}: 1 of 1 request unanswered: no answer within 0 s "
        "(--answer-timeout); the cassette was not written"
    )
    assert cassette.read_bytes() == before


@pytest.mark.parametrize("value", ["-1", "nan", "inf", "soon"])
def test_answer_timeout_must_be_a_number_of_seconds(tmp_path: Path, value: str) -> None:
    argv = proxy_command(SERVER_COMMAND, cassette=tmp_path / "c.jsonl", mode="record", name="d")
    split = argv.index("--")
    done = subprocess.run(
        [*argv[:split], "--answer-timeout", value, *argv[split:]],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "--answer-timeout" in done.stderr and "Traceback" not in done.stderr
