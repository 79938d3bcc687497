"""The recorder's one forwarder: a stream passed on event by event while it is recorded, an
https upstream reached through HTTPS_PROXY unless NO_PROXY exempts it, the upstream CA file."""

from __future__ import annotations

import base64
import http.client
import select
import socket
import socketserver
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from http_upstream import HOST, ScriptedApi, UpstreamAuthority
from trialrun.errors import ConfigError
from trialrun.httprec.authority import bundle
from trialrun.httprec.cassette import load_cassette, write_cassette
from trialrun.httprec.exchange import Request
from trialrun.httprec.front import HttpRecorder
from trialrun.httprec.matching import Replay, RequestNormalizer
from trialrun.httprec.traffic import CaseTraffic
from trialrun.httprec.upstream import open_upstream, upstream_tls

KEY = "s" * 20


def get_through(recorder: HttpRecorder, run_id: str, url: str) -> http.client.HTTPResponse:
    """A plain-http GET through the recorder, its answer unread."""
    host, port = recorder.address
    connection = http.client.HTTPConnection(host, port, timeout=60)
    token = base64.b64encode(f"{run_id}:{KEY}".encode()).decode()
    connection.request("GET", url, headers={"Proxy-Authorization": f"Basic {token}"})
    return connection.getresponse()


def test_a_recorded_stream_reaches_the_agent_event_by_event_and_replays_whole(
    tmp_path: Path, recorder: HttpRecorder
) -> None:
    api = ScriptedApi()
    api.stream_gate = threading.Event()
    cassette = tmp_path / "case.http.jsonl"
    traffic = CaseTraffic("record", cassette, RequestNormalizer())
    recorder.open_case("rec", KEY, traffic)
    try:
        answer = get_through(recorder, "rec", f"{api.url}/stream")
        assert answer.getheader("Content-Type") == "text/event-stream"
        # The upstream holds its second event back until the gate opens: a recorder that
        # buffered the answer whole would leave this read waiting.
        assert answer.read1(65536) == b'data: {"n": 0}\n\n'
    finally:
        api.stream_gate.set()
    rest = answer.read()
    assert rest == b'data: {"n": 1}\n\ndata: {"n": 2}\n\n'
    recorder.close_case("rec")
    api.stop()
    exchanges = traffic.recorded_exchanges()
    assert [e.response_body.count(b"data: ") for e in exchanges] == [3]
    write_cassette(cassette, exchanges)

    normalizer = RequestNormalizer()
    replay = CaseTraffic(
        "replay", cassette, normalizer, replay=Replay(load_cassette(cassette), normalizer)
    )
    recorder.open_case("again", KEY, replay)
    replayed = get_through(recorder, "again", f"{api.url}/stream")
    assert replayed.status == 200
    assert replayed.read() == b'data: {"n": 0}\n\n' + rest
    assert replay.misses == []


def test_an_upstream_broken_off_mid_answer_is_not_recorded(
    tmp_path: Path, recorder: HttpRecorder
) -> None:
    listener = socket.create_server((HOST, 0))
    port = listener.getsockname()[1]

    def half_answer() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part")

    thread = threading.Thread(target=half_answer, daemon=True)
    thread.start()
    traffic = CaseTraffic("record", tmp_path / "c.http.jsonl", RequestNormalizer())
    recorder.open_case("cut", KEY, traffic)
    answer = get_through(recorder, "cut", f"http://{HOST}:{port}/x")
    assert answer.status == 200
    with pytest.raises(http.client.IncompleteRead):
        answer.read()
    thread.join()
    listener.close()
    recorder.close_case("cut")
    assert traffic.recorded_exchanges() == []
    assert traffic.served == 0


class TunnelProxy:
    """A CONNECT proxy on 127.0.0.1 that notes each tunnel's target and pipes its bytes."""

    def __init__(self) -> None:
        self.targets: list[str] = []
        proxy = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                head = b""
                while b"\r\n\r\n" not in head:
                    data = self.request.recv(4096)
                    if not data:
                        return
                    head += data
                method, target = head.split(b" ")[:2]
                proxy.targets.append(f"{method.decode()} {target.decode()}")
                host, _, port = target.decode().rpartition(":")
                with socket.create_connection((host, int(port)), timeout=60) as upstream:
                    self.request.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    pipe(self.request, upstream)

        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


def pipe(one: socket.socket, other: socket.socket) -> None:
    """Copy bytes both ways until either side closes."""
    while True:
        ready, _, _ = select.select([one, other], [], [], 60)
        if not ready:
            return
        for source in ready:
            data = source.recv(65536)
            if not data:
                return
            (other if source is one else one).sendall(data)


@pytest.fixture
def tunnel() -> Iterator[TunnelProxy]:
    proxy = TunnelProxy()
    yield proxy
    proxy.stop()


@pytest.mark.parametrize("exempt", [False, True], ids=["through-proxy", "no-proxy"])
def test_an_https_upstream_is_reached_through_https_proxy_unless_no_proxy_exempts_it(
    tmp_path: Path,
    recorder: HttpRecorder,
    test_ca: UpstreamAuthority,
    tunnel: TunnelProxy,
    monkeypatch: pytest.MonkeyPatch,
    exempt: bool,
) -> None:
    for name in ("https_proxy", "HTTPS_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTPS_PROXY", tunnel.url)
    if exempt:
        monkeypatch.setenv("NO_PROXY", HOST)
    monkeypatch.setenv("TRIALRUN_HTTP_UPSTREAM_CA", str(test_ca.ca_file))
    api = ScriptedApi(test_ca)
    request = Request("GET", "https", HOST, api.port, "/items?page=3")
    connection, answer = open_upstream(request, upstream_tls())
    try:
        assert (answer.status, answer.read()) == (200, b'{"page": "3", "items": ["item-3"]}')
    finally:
        connection.close()
        api.stop()
    assert tunnel.targets == ([] if exempt else [f"CONNECT {HOST}:{api.port}"])
    assert api.requests == [("GET", "/items?page=3")]


def test_the_recorder_forwards_through_https_proxy_inside_a_tunnel_of_its_own(
    tmp_path: Path,
    recorder: HttpRecorder,
    test_ca: UpstreamAuthority,
    tunnel: TunnelProxy,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("https_proxy", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTPS_PROXY", tunnel.url)
    monkeypatch.setenv("TRIALRUN_HTTP_UPSTREAM_CA", str(test_ca.ca_file))
    api = ScriptedApi(test_ca)
    traffic = CaseTraffic("record", tmp_path / "c.http.jsonl", RequestNormalizer(), upstream_tls())
    proxy_url = recorder.open_case("tls", KEY, traffic)
    trust = tmp_path / "bundle.pem"
    trust.write_bytes(bundle(recorder.authority))
    import ssl
    import urllib.request

    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler({"https": proxy_url}),
        urllib.request.HTTPSHandler(context=ssl.create_default_context(cafile=str(trust))),
    )
    with opener.open(f"{api.url}/items?page=4", timeout=60) as answer:
        assert answer.read() == b'{"page": "4", "items": ["item-4"]}'
    recorder.close_case("tls")
    api.stop()
    assert tunnel.targets == [f"CONNECT {HOST}:{api.port}"]
    assert [e.url for e in traffic.recorded_exchanges()] == [f"{api.url}/items?page=4"]


def test_an_unreadable_upstream_ca_file_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "nope.pem"
    monkeypatch.setenv("TRIALRUN_HTTP_UPSTREAM_CA", str(missing))
    with pytest.raises(ConfigError) as caught:
        upstream_tls()
    assert caught.value.file == str(missing)
    assert "TRIALRUN_HTTP_UPSTREAM_CA must name a PEM file of certificate authorities" in str(
        caught.value
    )
