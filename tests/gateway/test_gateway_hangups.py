"""Clients and upstreams that hang up on ``trialrun gateway``: ordinary traffic, never a traceback.

The gateway runs as users run it (a subprocess); the peers are raw sockets that reset their
connection (SO_LINGER 0) or stop halfway, as an SDK closing its keep-alive pool at exit or a
killed agent does.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from builders import HANG_GUARD_S
from gateway_fake_upstream import FakeUpstream
from hangup_peers import RawUpstream, http_post, read_response, reset
from trialrun.gateway import Gateway
from trialrun.gateway.wire import Handler

CHAT = "/run/r1/openai/v1/chat/completions"
BODY = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()


class Served:
    """``trialrun gateway --mode record`` in front of ``upstream_url``."""

    def __init__(self, cassettes: Path, upstream_url: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "trialrun", "gateway", "--quiet", "--mode", "record",
             "--cassette-dir", str(cassettes), "--upstream", f"openai={upstream_url}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        assert self.process.stdout is not None
        host, port = self.process.stdout.readline().strip().removeprefix("http://").split(":")
        self.address = (host, int(port))

    def connect(self) -> socket.socket:
        return socket.create_connection(self.address, timeout=HANG_GUARD_S)

    def stop(self) -> tuple[int, str]:
        self.process.send_signal(signal.SIGTERM)
        _, stderr = self.process.communicate(timeout=HANG_GUARD_S)
        return self.process.returncode, stderr


@pytest.fixture
def served(tmp_path: Path, upstream: FakeUpstream) -> Iterator[Served]:
    gateway = Served(tmp_path, upstream.url)
    yield gateway
    if gateway.process.poll() is None:
        gateway.stop()


def recorded_calls(cassette: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in cassette.read_text().splitlines()[1:]]


def test_a_client_that_resets_its_idle_keep_alive_connection_is_ordinary(
    tmp_path: Path, served: Served
) -> None:
    client = served.connect()
    client.sendall(http_post(CHAT, BODY))
    assert read_response(client).startswith(b"HTTP/1.1 200")
    time.sleep(0.1)  # the gateway waits for the next request on this connection
    reset(client)
    time.sleep(0.2)
    second = served.connect()
    second.sendall(http_post(CHAT, BODY, keep_alive=False))
    assert read_response(second).startswith(b"HTTP/1.1 200")  # still serving
    second.close()

    code, stderr = served.stop()
    assert code == 0, stderr
    assert "Traceback" not in stderr and "Error" not in stderr, stderr
    assert len(recorded_calls(tmp_path / "r1.jsonl")) == 2


def test_a_client_that_hangs_up_mid_request_body_is_ordinary(
    tmp_path: Path, served: Served
) -> None:
    client = served.connect()
    client.sendall(http_post(CHAT, BODY)[:-5])
    time.sleep(0.2)  # the gateway is reading the body
    reset(client)
    time.sleep(0.2)

    code, stderr = served.stop()
    assert code == 0, stderr
    assert "Traceback" not in stderr and "Error" not in stderr, stderr


def test_a_client_that_hangs_up_before_the_answer_still_gets_it_recorded(
    tmp_path: Path,
) -> None:
    slow = RawUpstream("slow")
    served = Served(tmp_path, slow.url)
    try:
        client = served.connect()
        client.sendall(http_post(CHAT, BODY))
        assert slow.asked.wait(60), "the gateway never forwarded the request"
        reset(client)
        slow.release.set()  # the answer comes after the client is gone
        assert slow.answered.wait(60), "the gateway never read the answer to its end"
    finally:
        code, stderr = served.stop()
        slow.close()
    assert code == 0, stderr
    assert "Traceback" not in stderr and "Error" not in stderr, stderr
    [call] = recorded_calls(tmp_path / "r1.jsonl")
    assert json.loads(str(call["body"]))["id"] == "chatcmpl-raw"


@pytest.mark.parametrize(
    ("behaviour", "status", "words"),
    [
        ("reset-midway", 200, "the upstream response broke off before its end (not recorded)"),
        ("reset-at-once", 502, "could not reach the openai upstream"),
    ],
)
def test_an_upstream_that_resets_fails_the_call_not_the_gateway(
    tmp_path: Path, behaviour: str, status: int, words: str
) -> None:
    broken = RawUpstream(behaviour)
    gateway = Gateway(upstreams={"openai": broken.url})
    gateway.start()
    try:
        gateway.open_run("r1", tmp_path / "r1.jsonl", "record")
        host, port = gateway.url.removeprefix("http://").split(":")
        connection = http.client.HTTPConnection(host, int(port), timeout=HANG_GUARD_S)
        connection.request("POST", CHAT, body=BODY, headers={"Authorization": "Bearer k"})
        response = connection.getresponse()
        assert response.status == status
        broken_off = pytest.raises(http.client.IncompleteRead)
        with broken_off if status == 200 else contextlib.nullcontext():
            response.read()
        connection.close()
        [call] = gateway.close_run("r1", clean=True)
    finally:
        gateway.stop()
        broken.close()
    assert call.status == status and call.error is not None and words in call.error
    assert recorded_calls(tmp_path / "r1.jsonl") == []


def test_an_unexpected_error_in_a_handler_is_one_line_not_a_traceback(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken_auto_open(run_id: str) -> tuple[Path, str]:
        raise RuntimeError(f"auto_open is broken for {run_id}")

    gateway = Gateway(auto_open=broken_auto_open)  # type: ignore[arg-type]
    gateway.start()
    try:
        with caplog.at_level(logging.ERROR, logger="trialrun.gateway"):
            client = socket.create_connection(_address(gateway), timeout=HANG_GUARD_S)
            client.sendall(http_post(CHAT, BODY, keep_alive=False))
            # The SDK gets a 500 that names the kind of bug (not where it is: no source path),
            # then the connection closes; the gateway lives.
            head, _, body = read_response(client).partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 500 ") and b"\r\nConnection: close" in head
            message = json.loads(body)["error"]["message"]
            assert message.startswith("trialrun gateway internal error (RuntimeError)")
            assert ".py" not in message and "auto_open" not in message
            assert client.recv(65536) == b""
            client.close()
            _wait_for_an_error(caplog)
    finally:
        gateway.stop()
    [record] = [r for r in caplog.records if r.levelno >= logging.ERROR]
    line = record.getMessage()
    assert record.exc_info is None and "\n" not in line
    assert "RuntimeError: auto_open is broken for r1 (at " in line and CHAT in line
    assert "Traceback" not in capsys.readouterr().err


def test_an_unexpected_error_outside_a_request_is_one_line_not_a_traceback(
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken_parse(self: Handler) -> bool:
        raise ValueError("the request line parser is broken")

    monkeypatch.setattr(Handler, "parse_request", broken_parse)
    gateway = Gateway()
    gateway.start()
    try:
        with caplog.at_level(logging.ERROR, logger="trialrun.gateway"):
            client = socket.create_connection(_address(gateway), timeout=HANG_GUARD_S)
            client.sendall(http_post(CHAT, BODY))
            assert client.recv(65536) == b""
            client.close()
            _wait_for_an_error(caplog)
    finally:
        gateway.stop()
    [record] = [r for r in caplog.records if r.levelno >= logging.ERROR]
    line = record.getMessage()
    assert line.startswith("unexpected error on the connection from 127.0.0.1:")
    assert "ValueError: the request line parser is broken (at " in line and "\n" not in line
    assert "Traceback" not in capsys.readouterr().err


def _wait_for_an_error(caplog: pytest.LogCaptureFixture) -> None:
    """Until the connection's thread has logged its error (it may still be on its way to it)."""
    deadline = time.monotonic() + 60  # generous: only a missing log line waits that long
    while time.monotonic() < deadline and not any(
        record.levelno >= logging.ERROR for record in caplog.records
    ):
        time.sleep(0.01)


def _address(gateway: Gateway) -> tuple[str, int]:
    host, port = gateway.url.removeprefix("http://").split(":")
    return host, int(port)
