"""The recorder's front: the HTTP server, a case's traffic and the run's authority are made only
when something needs them, and a case without the authority has its CONNECT refused before any
TLS, naming host:port."""

from __future__ import annotations

import base64
import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from trialrun.httprec.authority import RunAuthority
from trialrun.httprec.front import HttpRecorder
from trialrun.httprec.matching import Replay, RequestNormalizer
from trialrun.httprec.traffic import CaseTraffic


class Made:
    """Counts what the front asked to be made."""

    def __init__(self, scratch: Path) -> None:
        self.scratch = scratch
        self.authorities = 0
        self.traffics = 0

    def authority(self) -> RunAuthority:
        self.authorities += 1
        return RunAuthority(self.scratch)

    def refusing(self) -> CaseTraffic:
        self.traffics += 1
        normalizer = RequestNormalizer()
        replay = Replay([], normalizer)
        return CaseTraffic(
            "replay", self.scratch / "none.jsonl", normalizer, replay=replay, tls=False
        )


@pytest.fixture
def made(tmp_path: Path) -> Made:
    return Made(tmp_path)


@pytest.fixture
def front(made: Made) -> Iterator[HttpRecorder]:
    recorder = HttpRecorder(made.authority)
    yield recorder
    recorder.stop()


def exchange(front: HttpRecorder, head: str, run_id: str = "case-1", key: str = "k" * 20) -> str:
    """Send one request head with the case's credentials; the whole answer's text."""
    token = base64.b64encode(f"{run_id}:{key}".encode()).decode()
    with socket.create_connection(front.address, timeout=60) as conn:
        conn.sendall(
            f"{head}\r\nProxy-Authorization: Basic {token}\r\nConnection: close\r\n\r\n".encode()
        )
        chunks = []
        while chunk := conn.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


def body_of(answer: str) -> dict[str, object]:
    found: dict[str, object] = json.loads(answer.split("\r\n\r\n", 1)[1])
    return found


def test_a_front_nobody_connects_to_makes_nothing_and_stops(made: Made) -> None:
    front = HttpRecorder(made.authority)
    front.open_case("case-1", "k" * 20, made.refusing)
    assert front.close_case("case-1") is None
    front.stop()
    assert (made.authorities, made.traffics) == (0, 0)
    assert not front.has_authority
    with pytest.raises(OSError):
        socket.create_connection(front.address, timeout=60).close()


def test_a_connect_without_the_authority_is_refused_before_tls_naming_host_port(
    front: HttpRecorder, made: Made
) -> None:
    front.open_case("case-1", "k" * 20, made.refusing)
    answer = exchange(front, "CONNECT api.example.com:8443 HTTP/1.1\r\nHost: api.example.com:8443")
    assert answer.startswith("HTTP/1.1 502 ")
    message = "network: sealed: agent tried api.example.com:8443"
    assert body_of(answer)["error"] == {
        "type": "network_sealed",
        "message": message,
        "source": "trialrun",
    }
    traffic = front.close_case("case-1")
    assert traffic is not None
    assert [miss.message for miss in traffic.misses] == [message]
    assert made.traffics == 1
    assert made.authorities == 0 and not front.has_authority


def test_an_ipv6_host_is_named_in_brackets(front: HttpRecorder, made: Made) -> None:
    front.open_case("case-1", "k" * 20, made.refusing)
    answer = exchange(front, "CONNECT [2001:db8::1]:443 HTTP/1.1\r\nHost: [2001:db8::1]:443")
    assert "network: sealed: agent tried [2001:db8::1]:443" in answer


def test_a_plain_request_makes_the_traffic_once_and_never_the_authority(
    front: HttpRecorder, made: Made
) -> None:
    front.open_case("case-1", "k" * 20, made.refusing)
    for _ in range(2):
        answer = exchange(
            front, "GET http://api.example.com/items HTTP/1.1\r\nHost: api.example.com"
        )
        assert answer.startswith("HTTP/1.1 502 ")
        assert "network: sealed: agent tried api.example.com:80" in answer
    assert made.traffics == 1
    assert made.authorities == 0


def test_wrong_credentials_make_nothing(front: HttpRecorder, made: Made) -> None:
    front.open_case("case-1", "k" * 20, made.refusing)
    answer = exchange(front, "CONNECT api.example.com:443 HTTP/1.1", key="x" * 20)
    assert answer.startswith("HTTP/1.1 407 ")
    assert made.traffics == 0


def test_a_case_with_the_authority_gets_a_tunnel(front: HttpRecorder, made: Made) -> None:
    normalizer = RequestNormalizer()
    traffic = CaseTraffic("replay", made.scratch / "c.jsonl", normalizer)
    traffic.replay = Replay([], normalizer)
    front.open_case("case-1", "k" * 20, traffic)
    token = base64.b64encode(b"case-1:" + b"k" * 20).decode()
    with socket.create_connection(front.address, timeout=60) as conn:
        conn.sendall(
            b"CONNECT api.example.com:443 HTTP/1.1\r\n"
            + f"Proxy-Authorization: Basic {token}\r\n\r\n".encode()
        )
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = conn.recv(1)
            assert chunk, head
            head += chunk
    assert head.startswith(b"HTTP/1.1 200 ")
    assert made.authorities == 1 and front.has_authority
    assert front.close_case("case-1") is traffic
    assert traffic.misses == []


def test_the_authority_is_made_once(front: HttpRecorder, made: Made) -> None:
    assert front.authority is front.authority
    assert made.authorities == 1


def test_a_server_that_cannot_be_made_refuses_clients_instead_of_leaving_them_waiting(
    made: Made, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    import trialrun.httprec.proxy as proxy

    def broken(*_args: object) -> None:
        raise RuntimeError("no server here")

    failures: list[BaseException | None] = []
    monkeypatch.setattr(proxy, "recorder_server", broken)
    monkeypatch.setattr(threading, "excepthook", lambda args: failures.append(args.exc_value))
    front = HttpRecorder(made.authority)
    try:
        front.open_case("case-1", "k" * 20, made.refusing)
        with pytest.raises(OSError) as refused:
            exchange(front, "GET http://api.example.com/ HTTP/1.1\r\nHost: api.example.com")
        assert not isinstance(refused.value, TimeoutError)  # reset or refused, never left waiting
    finally:
        front.stop()
    assert [str(failure) for failure in failures] == ["no server here"]
    assert made.traffics == 0
