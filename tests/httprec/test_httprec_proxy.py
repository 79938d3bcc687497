"""The recording proxy in-process: credentials, plain HTTP and HTTPS through it, record then
replay with the server gone, misses, redaction. The clients are the real libraries, pointed at
the proxy as the environment variables would point them."""

from __future__ import annotations

import base64
import http.client
import json
import os
import shutil
import ssl
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from builders import HANG_GUARD_S
from http_upstream import HOST, ScriptedApi, UpstreamAuthority
from trialrun.httprec.authority import bundle, system_authorities
from trialrun.httprec.cassette import load_cassette, write_cassette
from trialrun.httprec.front import HttpRecorder
from trialrun.httprec.matching import Replay, RequestNormalizer
from trialrun.httprec.traffic import CaseTraffic

SECRET = "sk-proj-" + "Q7w8E9r0T1y2U3i4O5p6" * 2


def record_case(
    recorder: HttpRecorder, cassette: Path, upstream_ca: Path | None = None
) -> tuple[str, CaseTraffic]:
    tls = ssl.create_default_context()
    if upstream_ca is not None:
        tls.load_verify_locations(cafile=upstream_ca)
    traffic = CaseTraffic("record", cassette, RequestNormalizer(), tls)
    return recorder.open_case("case-1", "k" * 20, traffic), traffic


def replay_case(recorder: HttpRecorder, cassette: Path) -> tuple[str, CaseTraffic]:
    normalizer = RequestNormalizer()
    traffic = CaseTraffic("replay", cassette, normalizer)
    traffic.replay = Replay(load_cassette(cassette) if cassette.exists() else [], normalizer)
    return recorder.open_case("case-2", "r" * 20, traffic), traffic


def agent_trust(recorder: HttpRecorder, tmp_path: Path) -> Path:
    path = tmp_path / "bundle.pem"
    path.write_bytes(bundle(recorder.authority))
    return path


def urllib_get(proxy: str, url: str, ca: Path, **options: Any) -> tuple[int, bytes]:
    context = ssl.create_default_context(cafile=str(ca))
    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler({"http": proxy, "https": proxy}),
        urllib.request.HTTPSHandler(context=context),
    )
    request = urllib.request.Request(url, **options)
    try:
        with opener.open(request, timeout=HANG_GUARD_S) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def scenario(get: Callable[[str, dict[str, Any]], tuple[int, bytes]], base: str) -> list[Any]:
    """What the fake agent does: two pages, an echo with a secret header, a stream."""
    out: list[Any] = []
    for page in ("1", "2"):
        out.append(get(f"{base}/items?page={page}", {}))
    out.append(
        get(
            f"{base}/echo",
            {
                "data": json.dumps({"q": "weather", "n": 3}).encode(),
                "headers": {
                    "Authorization": f"Bearer {SECRET}",
                    "Content-Type": "application/json",
                },
                "method": "POST",
            },
        )
    )
    out.append(get(f"{base}/stream", {}))
    return out


@pytest.mark.parametrize("tls", [False, True], ids=["http", "https"])
def test_recorded_api_replays_with_its_server_gone(
    tmp_path: Path, recorder: HttpRecorder, test_ca: UpstreamAuthority, tls: bool
) -> None:
    api = ScriptedApi(test_ca if tls else None)
    cassette = tmp_path / "case.http.jsonl"
    trust = agent_trust(recorder, tmp_path)
    proxy, traffic = record_case(recorder, cassette, test_ca.ca_file)
    recorded = scenario(lambda url, o: urllib_get(proxy, url, trust, **o), api.url)
    recorder.close_case("case-1")
    write_cassette(cassette, traffic.recorded_exchanges())
    api.stop()

    assert [status for status, _ in recorded] == [200, 200, 200, 200]
    assert json.loads(recorded[1][1]) == {"page": "2", "items": ["item-2"]}
    assert recorded[3][1].count(b"data: ") == 3  # the chunked stream arrived whole
    assert api.authorizations[2] == f"Bearer {SECRET}"  # record mode forwards the secret

    proxy, traffic = replay_case(recorder, cassette)
    replayed = scenario(lambda url, o: urllib_get(proxy, url, trust, **o), api.url)
    assert replayed == recorded
    assert (traffic.served, traffic.misses) == (4, [])
    assert traffic.replay is not None and traffic.replay.unused() == []


def test_secrets_never_reach_the_cassette(
    tmp_path: Path, recorder: HttpRecorder, test_ca: UpstreamAuthority
) -> None:
    api = ScriptedApi()
    cassette = tmp_path / "case.http.jsonl"
    proxy, traffic = record_case(recorder, cassette)
    trust = agent_trust(recorder, tmp_path)
    status, _ = urllib_get(
        proxy,
        f"{api.url}/echo?api_key={SECRET}&city=Oslo",
        trust,
        data=json.dumps({"token": SECRET, "text": "hi"}).encode(),
        headers={"Authorization": f"Bearer {SECRET}", "Cookie": "sid=abc123secretcookie"},
        method="POST",
    )
    api.stop()
    write_cassette(cassette, traffic.recorded_exchanges())
    text = cassette.read_text()
    assert status == 200
    assert SECRET not in text
    assert "abc123secretcookie" not in text and "sess-9c1f44" not in text  # Set-Cookie
    assert "city=Oslo" in text and "[REDACTED]" in text


def test_a_request_without_the_case_credentials_gets_407_and_reaches_nothing(
    tmp_path: Path, recorder: HttpRecorder
) -> None:
    api = ScriptedApi()
    record_case(recorder, tmp_path / "c.jsonl")
    host, port = recorder.address
    wrong = "Basic " + base64.b64encode(b"case-1:not-the-key").decode()
    for headers in ({}, {"Proxy-Authorization": wrong}):
        for method, target in (("GET", f"{api.url}/items"), ("CONNECT", f"{HOST}:{api.port}")):
            connection = http.client.HTTPConnection(host, port, timeout=HANG_GUARD_S)
            connection.request(method, target, headers=headers)
            answer = connection.getresponse()
            body = answer.read()
            connection.close()
            assert answer.status == 407
            assert answer.getheader("Proxy-Authenticate") == 'Basic realm="trialrun"'
            assert b"Proxy-Authorization" in body
    api.stop()
    assert api.requests == []


def test_a_closed_case_credentials_open_nothing(tmp_path: Path, recorder: HttpRecorder) -> None:
    proxy, _ = record_case(recorder, tmp_path / "c.jsonl")
    recorder.close_case("case-1")
    status, _ = urllib_get(proxy, f"http://{HOST}:9/items", agent_trust(recorder, tmp_path))
    assert status == 407


def test_replay_to_a_host_never_recorded_is_refused_and_the_host_receives_nothing(
    tmp_path: Path, recorder: HttpRecorder, test_ca: UpstreamAuthority
) -> None:
    recorded_api, stranger = ScriptedApi(), ScriptedApi(test_ca)
    cassette = tmp_path / "case.http.jsonl"
    proxy, traffic = record_case(recorder, cassette)
    trust = agent_trust(recorder, tmp_path)
    urllib_get(proxy, f"{recorded_api.url}/items?page=1", trust)
    write_cassette(cassette, traffic.recorded_exchanges())
    recorded_api.stop()

    proxy, traffic = replay_case(recorder, cassette)
    status, body = urllib_get(proxy, f"{stranger.url}/items?page=1", trust)
    stranger.stop()
    assert stranger.requests == []
    address = f"{HOST}:{stranger.port}"
    assert status == 502
    assert json.loads(body)["error"]["message"] == f"network: sealed: agent tried {address}"
    assert [(m.kind, m.message) for m in traffic.misses] == [
        ("network_sealed", f"network: sealed: agent tried {address}")
    ]


def test_a_changed_request_is_refused_naming_the_nearest_recording(
    tmp_path: Path, recorder: HttpRecorder
) -> None:
    api = ScriptedApi()
    cassette = tmp_path / "case.http.jsonl"
    proxy, traffic = record_case(recorder, cassette)
    trust = agent_trust(recorder, tmp_path)
    for page in ("1", "2"):
        urllib_get(proxy, f"{api.url}/items?page={page}", trust)
    write_cassette(cassette, traffic.recorded_exchanges())
    api.stop()

    proxy, traffic = replay_case(recorder, cassette)
    assert urllib_get(proxy, f"{api.url}/items?page=1", trust)[0] == 200
    status, body = urllib_get(proxy, f"{api.url}/items?page=7", trust)
    assert status == 502
    message = json.loads(body)["error"]["message"]
    assert message.startswith("cassette mismatch: no unused recording of GET ")
    assert "nearest recording: line 3; first difference at url: recorded " in message
    assert "page=2" in message and "page=7" in message
    assert [m.kind for m in traffic.misses] == ["cassette_mismatch"]
    assert traffic.replay is not None
    assert [e.url for e in traffic.replay.unused()] == [f"{api.url}/items?page=2"]


def test_requests_and_httpx_go_through_the_proxy(
    tmp_path: Path, recorder: HttpRecorder, test_ca: UpstreamAuthority
) -> None:
    requests = pytest.importorskip("requests")
    httpx = pytest.importorskip("httpx")
    api = ScriptedApi(test_ca)
    cassette = tmp_path / "case.http.jsonl"
    proxy, traffic = record_case(recorder, cassette, test_ca.ca_file)
    trust = agent_trust(recorder, tmp_path)
    proxies = {"http": proxy, "https": proxy}
    first = requests.get(
        f"{api.url}/items?page=1", proxies=proxies, verify=str(trust), timeout=HANG_GUARD_S
    )
    context = ssl.create_default_context(cafile=str(trust))
    with httpx.Client(proxy=proxy, verify=context, timeout=HANG_GUARD_S) as client:
        second = client.post(f"{api.url}/echo", json={"via": "httpx"})
    write_cassette(cassette, traffic.recorded_exchanges())
    api.stop()
    assert (first.status_code, first.json()["page"]) == (200, "1")
    assert (second.status_code, second.json()) == (200, {"via": "httpx"})

    proxy, traffic = replay_case(recorder, cassette)
    again = requests.get(
        f"{api.url}/items?page=1", proxies={"https": proxy}, verify=str(trust), timeout=HANG_GUARD_S
    )
    with httpx.Client(proxy=proxy, verify=context, timeout=HANG_GUARD_S) as client:
        echoed = client.post(f"{api.url}/echo", json={"via": "httpx"})
    assert again.json() == first.json() and echoed.json() == second.json()
    assert traffic.misses == []


def test_the_run_certificate_names_the_tunnel_host_and_offers_http_1_1(
    tmp_path: Path, recorder: HttpRecorder
) -> None:
    replay_case(recorder, tmp_path / "none.jsonl")
    host, port = recorder.address
    credentials = base64.b64encode(b"case-2:" + b"r" * 20).decode()
    context = ssl.create_default_context(cafile=str(agent_trust(recorder, tmp_path)))
    context.set_alpn_protocols(["h2", "http/1.1"])
    connection = http.client.HTTPSConnection(host, port, timeout=HANG_GUARD_S, context=context)
    connection.set_tunnel("api.example.com", 443, {"Proxy-Authorization": f"Basic {credentials}"})
    connection.request("GET", "/v1/x")
    answer = connection.getresponse()
    body = json.loads(answer.read())
    assert connection.sock is not None
    assert connection.sock.selected_alpn_protocol() == "http/1.1"
    connection.close()
    assert answer.status == 502
    assert body["error"]["message"] == "network: sealed: agent tried api.example.com:443"


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_curl_follows_the_variables_through_the_proxy(
    tmp_path: Path, recorder: HttpRecorder, test_ca: UpstreamAuthority
) -> None:
    api = ScriptedApi(test_ca)
    proxy, traffic = record_case(recorder, tmp_path / "case.http.jsonl", test_ca.ca_file)
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HTTPS_PROXY": proxy,
        "https_proxy": proxy,
        "CURL_CA_BUNDLE": str(agent_trust(recorder, tmp_path)),
    }
    done = subprocess.run(
        ["curl", "-sS", "--max-time", "60", f"{api.url}/items?page=3"],
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
    )
    api.stop()
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"page": "3", "items": ["item-3"]}
    assert [e.url for e in traffic.recorded_exchanges()] == [f"{api.url}/items?page=3"]


def test_the_agent_bundle_holds_the_system_the_agent_own_and_the_run_authorities(
    tmp_path: Path, recorder: HttpRecorder, test_ca: UpstreamAuthority
) -> None:
    text = bundle(recorder.authority, test_ca.ca_file)
    assert text.startswith(system_authorities().rstrip(b"\n"))
    assert test_ca.ca_file.read_bytes().strip() in text
    assert text.rstrip().endswith(recorder.authority.pem().strip())
    assert bundle(recorder.authority, tmp_path / "missing.pem") == bundle(recorder.authority)
