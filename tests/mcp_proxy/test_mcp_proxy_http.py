"""The streamable-HTTP proxy: a real proxy process, the real SDK client over HTTP, runs by path."""

from __future__ import annotations

import http.client
import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from builders import HANG_GUARD_S
from hangup_peers import http_post, read_response, reset
from mcp_proxy_support import (  # type: ignore[import-not-found]
    ABSENT_SERVER,
    MODERN_META,
    SERVER_COMMAND,
    STANDARD_STEPS,
    call,
    events_sequence,
    run_agent,
)
from trialrun.mcp_proxy import load_cassette, read_events
from trialrun.mcp_proxy.cassette import CallRecord, ExchangeRecord, write_cassette

pytest.importorskip("mcp")


class HttpProxy:
    def __init__(self, mode: str, cassette_dir: Path, server: list[str], events_dir: Path) -> None:
        argv = [sys.executable, "-m", "trialrun", "mcp-proxy", "--http", "127.0.0.1:0"]
        argv += ["--cassette-dir", str(cassette_dir), "--events-dir", str(events_dir)]
        argv += ["--mode", mode, "--", *server]
        self.process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert self.process.stdout is not None
        self.base = self.process.stdout.readline().decode().strip()
        assert self.base.startswith("http://127.0.0.1:"), self.base
        self.port = int(self.base.rsplit(":", 1)[1])

    def url(self, run_id: str) -> str:
        return f"{self.base}/run/{run_id}/mcp"

    def request(
        self, method: str, path: str, body: Any = None, raw: bytes | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=HANG_GUARD_S)
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        }
        connection.request(method, path, body=data, headers=headers)
        response = connection.getresponse()
        payload = response.read()
        connection.close()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, payload

    def stop(self) -> tuple[int, str]:
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(HANG_GUARD_S)
        assert self.process.stderr is not None
        return code, self.process.stderr.read().decode()


@pytest.fixture
def proxies() -> Iterator[list[HttpProxy]]:
    started: list[HttpProxy] = []
    yield started
    for proxy in started:
        if proxy.process.poll() is None:
            proxy.process.kill()
            proxy.process.wait()


def start(proxies: list[HttpProxy], *args: Any) -> HttpProxy:
    proxy = HttpProxy(*args)
    proxies.append(proxy)
    return proxy


def test_record_then_replay_over_http_with_a_cursor_per_run(
    tmp_path: Path, proxies: list[HttpProxy]
) -> None:
    cassettes, live_events, replay_events = tmp_path / "c", tmp_path / "ev1", tmp_path / "ev2"
    recorder = start(proxies, "record", cassettes, SERVER_COMMAND, live_events)
    live = {run: run_agent(recorder.url(run), STANDARD_STEPS) for run in ("r1", "r2")}
    # Each run had its own server: the counter started at 1 in both.
    for transcript in live.values():
        assert [t[2]["structuredContent"] for t in transcript[-2:]] == [
            {"result": 1},
            {"result": 2},
        ]
        assert transcript[3][3] == [
            [1.0, 3.0, "step 1"],
            [2.0, 3.0, "step 2"],
            [3.0, 3.0, "step 3"],
        ]
    assert recorder.stop()[0] == 0
    assert sorted(p.name for p in cassettes.iterdir()) == ["r1.jsonl", "r2.jsonl"]

    player = start(proxies, "replay", cassettes, ABSENT_SERVER, replay_events)
    assert run_agent(player.url("r1"), STANDARD_STEPS) == live["r1"]
    # r1's recordings are used up; r2 still has its own.
    assert run_agent(player.url("r2"), STANDARD_STEPS) == live["r2"]
    again = run_agent(player.url("r1"), [("call", "stamp", {})])
    assert "cassette mismatch" in again[1][2]["rpc_error"]["message"]
    assert player.stop()[0] == 0
    replayed = events_sequence(replay_events / "r2.jsonl")
    assert replayed == events_sequence(live_events / "r2.jsonl")
    assert all(e["replayed"] for e in read_events(replay_events / "r2.jsonl"))


def test_legacy_client_gets_a_session_id_and_delete_writes_the_run(
    tmp_path: Path, proxies: list[HttpProxy]
) -> None:
    cassettes = tmp_path / "c"
    recorder = start(proxies, "record", cassettes, SERVER_COMMAND, tmp_path / "ev")
    steps = STANDARD_STEPS[:3]
    live = run_agent(recorder.url("legacy"), steps, mode="legacy")
    assert live[0] == ["era", "2025-11-25"]
    # The legacy client ends its session with DELETE: the run's cassette is written now.
    assert [c.tool for c in load_cassette(cassettes / "legacy.jsonl").calls] == [
        "search_docs",
        "slow_index",
    ]
    recorder.stop()
    player = start(proxies, "replay", cassettes, ABSENT_SERVER, tmp_path / "ev2")
    assert run_agent(player.url("legacy"), steps, mode="legacy") == live
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    status, _, body = player.request("POST", "/run/fresh-run/mcp", initialize)
    # A run without a cassette answers with an error naming the file, instead of hanging.
    assert status == 200 and "cassette not found" in json.loads(body)["error"]["message"]


@pytest.fixture
def replay_dir(tmp_path: Path) -> Path:
    cassettes = tmp_path / "c"
    progress = ({"progress": 1, "total": 1, "message": "half"},)
    write_cassette(
        cassettes / "r.jsonl",
        None,
        [
            ExchangeRecord("tools/list", {}, result={"tools": []}),
            CallRecord("slow_index", {"n": 1}, True, {"content": []}, None, progress),
            CallRecord("slow_index", {"n": 1}, True, {"content": []}, None, progress),
        ],
    )
    return cassettes


def test_http_surface_status_codes_and_sse(
    replay_dir: Path, tmp_path: Path, proxies: list[HttpProxy]
) -> None:
    proxy = start(proxies, "replay", replay_dir, ABSENT_SERVER, tmp_path / "ev")
    assert proxy.request("GET", "/run/r/mcp")[0] == 405
    assert proxy.request("GET", "/elsewhere")[0] == 404
    assert (
        proxy.request("POST", "/run/../mcp", {"jsonrpc": "2.0", "id": 1, "method": "ping"})[0]
        == 404
    )
    status, _, body = proxy.request("POST", "/run/r/mcp", raw=b"{nope")
    assert status == 400 and json.loads(body)["error"]["code"] == -32700
    notification = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert proxy.request("POST", "/run/r/mcp", notification)[0] == 202

    status, headers, body = proxy.request(
        "POST", "/run/r/mcp", call(5, "slow_index", {"n": 1}, progressToken="p")
    )
    assert status == 200 and headers["content-type"] == "text/event-stream"
    events = [
        json.loads(line[6:]) for line in body.decode().splitlines() if line.startswith("data: ")
    ]
    assert events[0]["params"] == {
        "progress": 1,
        "total": 1,
        "message": "half",
        "progressToken": "p",
    }
    assert events[1]["id"] == 5 and "result" in events[1]

    status, headers, body = proxy.request("POST", "/run/r/mcp", call(6, "slow_index", {"n": 1}))
    assert headers["content-type"] == "application/json"
    assert json.loads(body)["id"] == 6

    listing = {"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {"_meta": MODERN_META}}
    for _ in range(2):  # idempotent: never consumed
        assert json.loads(proxy.request("POST", "/run/r/mcp", listing)[2])["result"]["tools"] == []
    status, _, body = proxy.request(
        "POST", "/run/missing/mcp", {"jsonrpc": "2.0", "id": 8, "method": "ping"}
    )
    assert "cassette not found" in json.loads(body)["error"]["message"]
    assert proxy.request("DELETE", "/run/r/mcp")[0] == 200
    code, stderr = proxy.stop()
    assert code == 0 and "cassette not found" in stderr


def test_record_with_a_server_that_cannot_start_exits_2(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "trialrun", "mcp-proxy", "--http", "127.0.0.1:0"]
    argv += ["--cassette-dir", str(tmp_path), "--mode", "record", "--", *ABSENT_SERVER]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.splitlines() == [
        f"error: cannot start MCP server: command not found: {ABSENT_SERVER[0]}"
    ]


def test_clients_that_hang_up_are_ordinary_traffic(
    replay_dir: Path, tmp_path: Path, proxies: list[HttpProxy]
) -> None:
    proxy = start(proxies, "replay", replay_dir, ABSENT_SERVER, tmp_path / "ev")
    ping = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()
    request = http_post("/run/r/mcp", ping)
    idle = socket.create_connection(("127.0.0.1", proxy.port), timeout=HANG_GUARD_S)
    idle.sendall(request)
    read_response(idle)
    time.sleep(0.1)  # the proxy waits for the next request on this keep-alive connection
    reset(idle)
    mid_body = socket.create_connection(("127.0.0.1", proxy.port), timeout=HANG_GUARD_S)
    mid_body.sendall(request[:-3])
    time.sleep(0.1)  # the proxy reads the body
    reset(mid_body)
    gone = socket.create_connection(("127.0.0.1", proxy.port), timeout=HANG_GUARD_S)
    gone.sendall(request)
    reset(gone)  # before the answer: writing it fails
    time.sleep(0.3)
    assert proxy.request("POST", "/run/r/mcp", {"jsonrpc": "2.0", "id": 2, "method": "ping"})[0]
    code, stderr = proxy.stop()
    assert code == 0 and "Traceback" not in stderr and "Error" not in stderr, stderr


def test_a_server_that_dies_mid_run_fails_its_request_and_the_next_starts_a_new_one(
    tmp_path: Path, proxies: list[HttpProxy]
) -> None:
    cassettes = tmp_path / "c"
    recorder = start(proxies, "record", cassettes, SERVER_COMMAND, tmp_path / "ev")
    status, _, body = recorder.request("POST", "/run/r/mcp", call(1, "crash_server", {}))
    assert status == 200
    assert "the MCP server exited (code 3)" in json.loads(body)["error"]["message"]
    status, _, body = recorder.request("POST", "/run/r/mcp", call(2, "search_docs", {"q": "a"}))
    assert status == 200 and "result" in json.loads(body)
    code, stderr = recorder.stop()
    assert code == 0 and "Traceback" not in stderr, stderr
    assert [c.tool for c in load_cassette(cassettes / "r.jsonl").calls] == ["search_docs"]


def test_a_bug_while_serving_answers_500_naming_it_and_is_one_stderr_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import threading

    from trialrun.mcp_proxy.http import make_server

    class BrokenProxy:
        def key_of(self, run_id: str | None) -> str | None:
            return None

        def run(self, run_id: str) -> Any:
            raise RuntimeError(f"run {run_id} is broken")

    server = make_server("127.0.0.1", 0, BrokenProxy())  # type: ignore[arg-type]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        client = socket.create_connection(server.server_address[:2], timeout=HANG_GUARD_S)
        ping = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()
        client.sendall(http_post("/run/r7/mcp", ping))
        head, _, body = read_response(client).partition(b"\r\n\r\n")
        client.close()
    finally:
        server.shutdown()
        server.server_close()
    # The client learns that something broke instead of a dropped connection it would retry;
    # what and where (a source path) only stderr says.
    assert head.startswith(b"HTTP/1.1 500 ")
    assert body.startswith(b"trialrun mcp-proxy internal error (RuntimeError)")
    assert b".py" not in body and b"r7 is broken" not in body
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("trialrun mcp-proxy: error: error while serving POST '/run/r7/mcp': ")
    assert "RuntimeError: run r7 is broken (at " in line
