"""Local servers hold under abuse: the model gateway and the MCP proxy over HTTP (issue 28).

Each case's services answer only the holder of the case's key; the standalone servers do when
given a token. Floods of connections, idle sockets and hostile ``Content-Length`` values are
answered, never stall the server, and never show a traceback or a source path; credentials in
an upstream URL are never shown. All traffic stays on loopback.
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from builders import HANG_GUARD_S, call_cli
from hangup_peers import http_post, read_response
from trialrun.gateway import Gateway
from trialrun.gateway.cassette import Recording, write_cassette
from trialrun.mcp_proxy.cassette import CallRecord
from trialrun.mcp_proxy.cassette import write_cassette as write_mcp_cassette

CHAT_PATH = "/v1/chat/completions"
CHAT = [{"role": "user", "content": "reset password"}]
SECRET_REPLY = "Use the reset link 7f3a."
TIMEOUT_S = 60.0  # generous: the answers below take milliseconds on a quiet machine


def chat_recording() -> Recording:
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": SECRET_REPLY}}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
    }
    return Recording(
        provider="openai",
        method="POST",
        path=CHAT_PATH,
        request={"model": "gpt-4o-mini", "messages": CHAT},
        status=200,
        content_type="application/json",
        body=json.dumps(body),
    )


CHAT_BODY = json.dumps({"model": "gpt-4o-mini", "messages": CHAT}).encode()


def post(host: str, port: int, path: str, body: bytes, **headers: str) -> tuple[int, bytes]:
    """One request on its own connection: (status, body)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.settimeout(TIMEOUT_S)
        sock.connect((host, port))
        head = http_post(path, body, keep_alive=False)
        extra = "".join(f"{name.replace('_', '-')}: {value}\r\n" for name, value in headers.items())
        sock.sendall(head.replace(b"\r\n\r\n", b"\r\n" + extra.encode() + b"\r\n", 1))
        response = read_response(sock)
    head_bytes, _, payload = response.partition(b"\r\n\r\n")
    return int(head_bytes.split(b" ", 2)[1]), payload


def raw_request(host: str, port: int, head: bytes) -> bytes:
    """Send a hand-written request head; everything the server answers until it closes."""
    with socket.create_connection((host, port), timeout=TIMEOUT_S) as sock:
        sock.sendall(head)
        data = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return data
            data += chunk


def status_of(response: bytes) -> int:
    return int(response.split(b" ", 2)[1])


def assert_no_internals(reply: bytes) -> None:
    assert b"Traceback" not in reply and b".py" not in reply and b"/work/" not in reply


@pytest.fixture
def replay_gateway(tmp_path: Path) -> Iterator[Gateway]:
    gateway = Gateway(upstreams={"openai": "http://127.0.0.1:9", "anthropic": "http://127.0.0.1:9"})
    gateway.start()
    yield gateway
    gateway.stop()


def address(gateway: Gateway) -> tuple[str, int]:
    host, _, port = gateway.url.removeprefix("http://").rpartition(":")
    return host.strip("[]"), int(port)


# ---- keys ----------------------------------------------------------------------------------


def test_a_runs_recordings_are_served_only_to_the_holder_of_its_key(
    tmp_path: Path, replay_gateway: Gateway
) -> None:
    import openai

    cassette = tmp_path / "r.jsonl"
    write_cassette(cassette, [chat_recording()])
    scope = replay_gateway.open_run("r1", cassette, "replay", key="k" * 43)
    other = replay_gateway.open_run("r2", cassette, "replay", key="o" * 43)
    host, port = address(replay_gateway)
    assert "/key/" + "k" * 43 in scope.openai_base_url
    for prefix in ("", "/key/" + "x" * 43, "/key/", "/key/" + "o" * 43, "/key/" + "k" * 42):
        status, body = post(host, port, f"{prefix}/run/r1/openai{CHAT_PATH}", CHAT_BODY)
        assert status == 401, prefix
        assert SECRET_REPLY.encode() not in body and b"r1" not in body
    # The refused requests used nothing up: the agent, with the URL it was given, gets it all.
    env = scope.env({})
    client = openai.OpenAI(api_key="sk-replay", base_url=env["OPENAI_BASE_URL"], max_retries=0)
    answer = client.chat.completions.create(model="gpt-4o-mini", messages=CHAT)  # type: ignore[arg-type]
    assert answer.choices[0].message.content == SECRET_REPLY
    calls = replay_gateway.close_run("r1", clean=True)
    assert [call.status for call in calls] == [200]  # refusals are not the run's calls
    assert other.run_id == "r2"
    assert all("k" * 43 not in request.target for request in replay_gateway.unserved())


AGENT = r"""
import json, os, re, sys, urllib.error, urllib.request

def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()

def status(url, body):
    request = urllib.request.Request(url, data=body, headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
        "Authorization": "Bearer sk-replay"})
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()

task = json.loads(sys.stdin.readline())
base = os.environ["OPENAI_BASE_URL"]
mcp = json.loads(os.environ["TRIALRUN_MCP_SERVERS"])["mcpServers"]["docs"]["url"]
with open(os.environ["KEYS_SEEN"], "w") as seen:  # for the test: the keys must not reach disk
    seen.write("\n".join(re.findall("/key/([^/]+)/", base + " " + mcp + "/")))
keyless = lambda url: re.sub("/key/[^/]+", "", url)
wrong = lambda url: re.sub("/key/[^/]+", "/key/" + "A" * 43, url)
chat = json.dumps({"model": "gpt-4o-mini", "messages": CHAT}).encode()
call = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"name": "search_docs", "arguments": {"q": "reset"}}}).encode()
chat_url = base + "/chat/completions"
refused = [status(keyless(chat_url), chat), status(wrong(chat_url), chat),
           status(keyless(mcp), call), status(wrong(mcp), call)]

import openai  # the SDK as users set it up: from the environment trialrun hands the agent
reply = openai.OpenAI(max_retries=0).chat.completions.create(model="gpt-4o-mini", messages=CHAT)
found = json.loads(status(mcp, call)[1])["result"]["content"][0]["text"]
send({"type": "final_output", "output": {
    "refused": [code for code, _ in refused],
    "leaked": [SECRET in text or "docs for reset" in text for _, text in refused],
    "reply": reply.choices[0].message.content, "docs": found}})
""".replace("CHAT", json.dumps(CHAT)).replace("SECRET", json.dumps(SECRET_REPLY))


def test_each_cases_services_refuse_requests_without_the_cases_key(tmp_path: Path) -> None:
    pytest.importorskip("openai")
    suite = tmp_path / "evals" / "keys"
    (suite / "cases").mkdir(parents=True)
    (suite / "cassettes").mkdir()
    (suite / "agent.py").write_text(AGENT, encoding="utf-8")
    (suite / "suite.yaml").write_text(
        "suite_name: keys\n"
        f"agent_command: {json.dumps([sys.executable, 'agent.py'])}\n"
        "mode: replay\ncases_path: cases\ntool_registry: []\n"
        "mcp_servers:\n  docs:\n    command: [python3, absent_server.py]\n    transport: http\n"
        "model_gateway: {}\n",
        encoding="utf-8",
    )
    case = {"id": "t1", "input": {"q": "x"}, "cassette": "cassettes/t1.jsonl"}
    (suite / "cases" / "t1.yaml").write_text(json.dumps(case), encoding="utf-8")
    (suite / "cassettes" / "t1.jsonl").write_text("", encoding="utf-8")
    result = {"content": [{"type": "text", "text": "docs for reset"}], "isError": False}
    write_mcp_cassette(
        suite / "cassettes" / "t1.mcp-docs.jsonl",
        None,
        [CallRecord("search_docs", {"q": "reset"}, True, result, None)],
    )
    write_cassette(suite / "cassettes" / "t1.model.jsonl", [chat_recording()])
    seen = tmp_path / "keys-seen.txt"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))}
    done = subprocess.run(
        [sys.executable, "-m", "trialrun", "run", "evals/keys", "--no-baseline"],
        cwd=tmp_path,
        env={**env, "KEYS_SEEN": str(seen)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    [run_dir] = (tmp_path / "trialrun_out" / "keys").iterdir()
    [output] = [
        json.loads(line)["output"]
        for line in (run_dir / "run.jsonl").read_text(encoding="utf-8").splitlines()
        if json.loads(line)["type"] == "final_output"
    ]
    assert output == {
        "refused": [401, 401, 401, 401],
        "leaked": [False] * 4,
        "reply": SECRET_REPLY,
        "docs": "docs for reset",
    }
    keys = seen.read_text(encoding="utf-8").split()
    assert len(keys) == 2 and keys[0] != keys[1] and all(len(key) >= 43 for key in keys)
    for artifact in run_dir.iterdir():
        text = artifact.read_text(encoding="utf-8", errors="replace")
        assert not any(key in text for key in keys), artifact.name
    assert not any(key in done.stdout + done.stderr for key in keys)


def start_server(args: list[str], env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "trialrun", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
    )
    assert process.stdout is not None
    return process, process.stdout.readline().strip()


def stop_server(process: subprocess.Popen[str]) -> str:
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=TIMEOUT_S)
    return err


def test_the_standalone_servers_take_a_token_from_the_environment(tmp_path: Path) -> None:
    token = "t0ken-" + "Q" * 30
    write_cassette(tmp_path / "r1.jsonl", [chat_recording()])
    gateway, url = start_server(
        ["gateway", "--cassette-dir", str(tmp_path), "--mode", "replay", "--listen",
         "127.0.0.1:0", "-q"],
        {"TRIALRUN_GATEWAY_TOKEN": token},
    )  # fmt: skip
    mcp_dir = tmp_path / "mcp"
    mcp_dir.mkdir()
    result = {"content": [{"type": "text", "text": "docs for reset"}], "isError": False}
    record = CallRecord("search_docs", {"q": "reset"}, True, result, None)
    write_mcp_cassette(mcp_dir / "r1.jsonl", None, [record])
    proxy, mcp_url = start_server(
        ["mcp-proxy", "--http", "127.0.0.1:0", "--cassette-dir", str(mcp_dir), "--mode", "replay"],
        {"TRIALRUN_MCP_PROXY_TOKEN": token},
    )
    params = {"name": "search_docs", "arguments": {"q": "reset"}}
    call = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
    try:
        assert token not in url and token not in mcp_url
        host, port = url.removeprefix("http://").split(":")
        mcp_host, mcp_port = mcp_url.removeprefix("http://").split(":")
        for prefix in ("", "/key/nope"):
            status, body = post(host, int(port), f"{prefix}/run/r1/openai{CHAT_PATH}", CHAT_BODY)
            assert status == 401 and SECRET_REPLY.encode() not in body
            status, body = post(mcp_host, int(mcp_port), f"{prefix}/run/r1/mcp", call.encode())
            assert status == 401 and b"docs for reset" not in body
        status, body = post(host, int(port), f"/key/{token}/run/r1/openai{CHAT_PATH}", CHAT_BODY)
        assert status == 200 and SECRET_REPLY.encode() in body
        status, body = post(mcp_host, int(mcp_port), f"/key/{token}/run/r1/mcp", call.encode())
        assert status == 200 and b"docs for reset" in body
    finally:
        errors = stop_server(gateway) + stop_server(proxy)
    assert token not in errors and "Traceback" not in errors


def test_a_non_loopback_address_is_served_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import trialrun.gateway.standalone as standalone

    served: list[str] = []

    def serve(settings: Any, on_ready: Any) -> Any:  # nothing is bound: the warning comes first
        served.append(settings.host)
        return standalone.Served({}, [], interrupted=False)

    monkeypatch.setattr(standalone, "serve_until_signal", serve)
    outcomes = {}
    for listen in ("0.0.0.0:0", "[::]:0", "127.0.0.1:0", "[::1]:0", "localhost:0"):
        argv = ["gateway", "--cassette-dir", ".", "--mode", "live", "--listen", listen]
        code, out, err = call_cli(argv, capsys)
        assert code == 0, out + err
        outcomes[listen] = "warning:" in err
    assert outcomes == {
        "0.0.0.0:0": True,
        "[::]:0": True,
        "127.0.0.1:0": False,
        "[::1]:0": False,
        "localhost:0": False,
    }
    assert served == ["0.0.0.0", "::", "127.0.0.1", "::1", "localhost"]


def ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


@pytest.mark.skipif(not ipv6_loopback(), reason="this machine has no IPv6 loopback (::1)")
def test_both_servers_serve_on_ipv6_loopback(tmp_path: Path) -> None:
    import openai

    write_cassette(tmp_path / "r.jsonl", [chat_recording()])
    gateway = Gateway()
    try:
        gateway.start("::1", 0)
        assert gateway.url.startswith("http://[::1]:")
        scope = gateway.open_run("r", tmp_path / "r.jsonl", "replay", key="v6" * 22)
        client = openai.OpenAI(api_key="sk-replay", base_url=scope.openai_base_url, max_retries=0)
        answer = client.chat.completions.create(model="gpt-4o-mini", messages=CHAT)  # type: ignore[arg-type]
        assert answer.choices[0].message.content == SECRET_REPLY
    finally:
        gateway.stop()
    proxy, url = start_server(
        ["mcp-proxy", "--http", "[::1]:0", "--cassette-dir", str(tmp_path), "--mode", "replay"], {}
    )
    try:
        assert url.startswith("http://[::1]:")
        port = int(url.rpartition(":")[2])
        ping = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()
        assert post("::1", port, "/run/r/mcp", ping)[0] == 200
    finally:
        stop_server(proxy)


# ---- floods and idle sockets ---------------------------------------------------------------


def test_500_simultaneous_connections_are_all_answered(replay_gateway: Gateway) -> None:
    host, port = address(replay_gateway)
    answers: list[int | str] = []
    lock = threading.Lock()
    go = threading.Event()

    def client() -> None:
        go.wait()
        try:
            # A connection the listen queue dropped is retried by the kernel after 1, 3, 7 and
            # 15 s: a bound this wide fails only a server that lets them drop.
            with socket.create_connection((host, port), timeout=HANG_GUARD_S) as sock:
                sock.sendall(http_post(f"/run/none/openai{CHAT_PATH}", b"{}", keep_alive=False))
                outcome: int | str = status_of(read_response(sock))
        except OSError as exc:
            outcome = type(exc).__name__
        with lock:
            answers.append(outcome)

    threads = [threading.Thread(target=client) for _ in range(500)]
    for thread in threads:
        thread.start()
    go.set()
    for thread in threads:
        thread.join(TIMEOUT_S)
    assert sorted(set(answers), key=str) == [404] and len(answers) == 500


def test_idle_sockets_do_not_keep_a_real_request_waiting(
    tmp_path: Path, replay_gateway: Gateway
) -> None:
    from trialrun.base.localserver import MAX_CONNECTIONS

    host, port = address(replay_gateway)
    write_cassette(tmp_path / "r.jsonl", [chat_recording()])
    scope = replay_gateway.open_run("r", tmp_path / "r.jsonl", "replay", key="i" * 43)
    idle = [socket.create_connection((host, port), timeout=TIMEOUT_S) for _ in range(250)]
    try:
        key_path = scope.openai_base_url.split(f":{port}", 1)[1]
        status, body = post(host, port, key_path + "/chat/completions", CHAT_BODY)
        assert status == 200 and SECRET_REPLY.encode() in body
        # The server kept its bound: the connections idle the longest made room, closed.
        closed = 0
        deadline = time.monotonic() + TIMEOUT_S
        pending = list(idle)
        while closed < 250 + 1 - MAX_CONNECTIONS and time.monotonic() < deadline:
            readable, _, _ = select.select(pending, [], [], 1.0)
            for sock in readable:
                if sock.recv(1) == b"":
                    closed += 1
                pending.remove(sock)
        assert closed >= 250 + 1 - MAX_CONNECTIONS
    finally:
        for sock in idle:
            sock.close()


def test_an_idle_connection_is_closed_after_the_idle_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import trialrun.base.localserver as localserver

    monkeypatch.setattr(localserver, "IDLE_TIMEOUT_S", 0.2)
    gateway = Gateway()
    gateway.start()
    try:
        with socket.create_connection(address(gateway), timeout=TIMEOUT_S) as sock:
            sock.sendall(b"POST /run/x/openai/v1/chat/completions HTTP/1.1\r\n")  # and no more
            # The head never ends: the server gives up on it and closes, without an answer.
            assert sock.recv(65536) == b""
    finally:
        gateway.stop()


# ---- bodies --------------------------------------------------------------------------------


@pytest.fixture
def mcp_proxy(tmp_path: Path) -> Iterator[tuple[str, int]]:
    from trialrun.mcp_proxy.http import McpHttpProxy, make_server

    proxy = McpHttpProxy(mode="replay", cassette_dir=tmp_path, server_command=[], name="docs")
    server = make_server("127.0.0.1", 0, proxy)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield "127.0.0.1", server.server_address[1]
    server.shutdown()
    server.server_close()


@pytest.fixture
def open_gateway(tmp_path: Path, replay_gateway: Gateway) -> tuple[str, int]:
    """The gateway with run ``r`` open (no key): bodies reach the checks of a served path."""
    write_cassette(tmp_path / "r.jsonl", [chat_recording()])
    replay_gateway.open_run("r", tmp_path / "r.jsonl", "replay")
    return address(replay_gateway)


def request_head(path: str, length: str) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length}\r\nConnection: close\r\n\r\n"
    ).encode()


def test_a_body_over_the_limit_is_refused_before_it_is_read(
    open_gateway: tuple[str, int], mcp_proxy: tuple[str, int]
) -> None:
    for (host, port), path in (
        (open_gateway, "/run/r/openai/v1/chat/completions"),
        (mcp_proxy, "/run/r/mcp"),
    ):
        for length in ("100000000000", "99999999999999999999999999999999999999999999999"):
            reply = raw_request(host, port, request_head(path, length))
            assert status_of(reply) == 413, (path, reply)
            assert_no_internals(reply)


@pytest.mark.parametrize("length", ["-1", "-100", "+5", "5_0", "0x10", "1e11", "abc", "", "١٢"])
def test_a_malformed_content_length_is_a_400(
    open_gateway: tuple[str, int], mcp_proxy: tuple[str, int], length: str
) -> None:
    for (host, port), path in (
        (open_gateway, "/run/r/openai/v1/chat/completions"),
        (mcp_proxy, "/run/r/mcp"),
    ):
        reply = raw_request(host, port, request_head(path, length))
        assert status_of(reply) == 400, (path, length, reply)
        assert_no_internals(reply)


def test_disagreeing_lengths_and_a_negative_chunk_are_400s(open_gateway: tuple[str, int]) -> None:
    host, port = open_gateway
    path = "/run/r/openai/v1/chat/completions"
    twice = request_head(path, "2").replace(b"\r\n\r\n", b"\r\nContent-Length: 3\r\n\r\n")
    assert status_of(raw_request(host, port, twice + b"{}")) == 400
    chunked = (
        f"POST {path} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
        "Connection: close\r\n\r\n-5\r\n"
    ).encode()
    assert status_of(raw_request(host, port, chunked)) == 400


@given(st.text(max_size=30))
def test_only_decimal_digits_are_a_content_length(text: str) -> None:
    from email.message import Message

    from trialrun.base.localserver import BadLength, declared_length

    headers = Message()
    headers["Content-Length"] = text
    try:
        length = declared_length(headers, 1000, service="test")
    except BadLength as exc:
        digits = text.strip(" \t")
        assert exc.status == (413 if digits.isascii() and digits.isdigit() else 400)
        assert exc.status == 400 or int(digits) > 1000
    else:
        assert re.fullmatch("[0-9]+", text.strip(" \t")) and length == int(text.strip(" \t"))


# ---- credentials in upstream URLs ----------------------------------------------------------


def test_credentials_in_an_upstream_url_are_never_shown(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from trialrun.errors import ConfigError

    password = "hunter2-" + "p" * 12
    upstream = f"http://agent:{password}@127.0.0.1:9"
    gateway = Gateway(upstreams={"openai": upstream})
    gateway.start()
    try:
        gateway.open_run("r", tmp_path / "r.jsonl", "record")
        host, port = address(gateway)
        with caplog.at_level("INFO", logger="trialrun.gateway"):
            status, body = post(host, port, "/run/r/openai/v1/chat/completions", CHAT_BODY)
        calls = gateway.close_run("r", clean=False)
    finally:
        gateway.stop()
    assert status == 502 and b"127.0.0.1:9" in body and password.encode() not in body
    assert password not in caplog.text and all(password not in (c.error or "") for c in calls)
    with pytest.raises(ConfigError) as bad:
        Gateway(upstreams={"openai": f"ftp://agent:{password}@host/x?q"})
    assert password not in str(bad.value)
    cli = subprocess.run(
        [sys.executable, "-m", "trialrun", "gateway", "--cassette-dir", str(tmp_path), "--mode",
         "live", "--upstream", f"openai=http://agent:{password}@127.0.0.1:9/?x=1"],
        capture_output=True, text=True, timeout=TIMEOUT_S,
    )  # fmt: skip
    assert cli.returncode == 2 and "error:" in cli.stderr
    assert password not in cli.stdout + cli.stderr


SERVER_SEEING_ITS_ENV = r"""
import json, os, sys
secret = os.environ.get("MCP_SECRET", "")
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    shown = []  # every command line on the machine that holds the secret, while we serve
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                shown += [pid] if secret and secret.encode() in handle.read() else []
        except OSError:
            pass
    text = json.dumps({"secret": secret, "shown": shown})
    answer = {"content": [{"type": "text", "text": text}], "isError": False}
    print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": answer}), flush=True)
"""


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="needs /proc")
def test_an_http_mcp_servers_env_reaches_it_off_its_command_line(tmp_path: Path) -> None:
    from trialrun.mcp_proxy.http import McpHttpProxy, make_server

    secret = "mcp-secret-" + "s" * 20
    (tmp_path / "server.py").write_text(SERVER_SEEING_ITS_ENV, encoding="utf-8")
    proxy = McpHttpProxy(
        mode="record",
        cassette_dir=tmp_path,
        server_command=[sys.executable, str(tmp_path / "server.py")],
        name="docs",
        server_env={"MCP_SECRET": secret},
    )
    server = make_server("127.0.0.1", 0, proxy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "whoami", "arguments": {}}}  # fmt: skip
        status, body = post(
            "127.0.0.1", server.server_address[1], "/run/r/mcp", json.dumps(call).encode()
        )
    finally:
        server.shutdown()
        server.server_close()
        proxy.close()
    assert status == 200
    seen = json.loads(json.loads(body)["result"]["content"][0]["text"])
    assert seen == {"secret": secret, "shown": []}
    assert secret not in (tmp_path / "r.jsonl").read_text(encoding="utf-8")
