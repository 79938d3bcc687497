"""The gateway's HTTP edges, driven with raw http.client: odd bodies, disconnects, limits."""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from builders import HANG_GUARD_S
from gateway_fake_upstream import FakeUpstream
from trialrun.errors import CassetteError
from trialrun.gateway import Gateway
from trialrun.gateway.wire import MAX_BODY_BYTES


@pytest.fixture
def gateway(upstream: FakeUpstream) -> Iterator[Gateway]:
    gw = Gateway(upstreams={"openai": upstream.url, "anthropic": upstream.url})
    gw.start()
    yield gw
    gw.stop()


def post(
    gw: Gateway, path: str, body: bytes | Iterator[bytes], headers: dict[str, str]
) -> tuple[int, dict[str, str], bytes]:
    host, port = gw.url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=HANG_GUARD_S)
    try:
        chunked = not isinstance(body, bytes)
        connection.request("POST", path, body=body, headers=headers, encode_chunked=chunked)
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


def test_a_chunked_request_body_is_forwarded_and_recorded(
    tmp_path: Path, gateway: Gateway, upstream: FakeUpstream
) -> None:
    gateway.open_run("c", tmp_path / "c.jsonl", "record")
    parts = [b'{"model": "m", "messages": [{"role": "user", ', b'"content": "chunky"}]}']
    status, _, body = post(
        gateway,
        "/run/c/openai/v1/chat/completions",
        iter(parts),
        {"Authorization": "Bearer k", "Content-Type": "application/json"},
    )
    assert status == 200 and json.loads(body)["choices"][0]["message"]["content"] == "echo: chunky"
    assert upstream.received[0].headers["Content-Length"] == str(len(b"".join(parts)))
    gateway.close_run("c", clean=True)


def test_a_body_that_is_not_json_is_matched_as_text(
    tmp_path: Path, gateway: Gateway, upstream: FakeUpstream
) -> None:
    gateway.open_run("t", tmp_path / "t.jsonl", "record")
    headers = {"Authorization": "Bearer k", "Content-Type": "application/json"}
    # NaN is not JSON to the gateway (strict parsing), so the body is keyed as text; Python's
    # lenient json module in the fake upstream still reads it.
    status, _, recorded = post(
        gateway, "/run/t/openai/v1/embeddings", b'{"input": "x", "n": NaN}', headers
    )
    assert status == 200
    gateway.close_run("t", clean=True)
    stored = json.loads((tmp_path / "t.jsonl").read_text().splitlines()[1])
    assert stored["request"] == '{"input": "x", "n": NaN}'
    upstream.stop()
    gateway.open_run("t", tmp_path / "t.jsonl", "replay")
    assert (
        post(gateway, "/run/t/openai/v1/embeddings", b'{"input": "x", "n": NaN}', headers)[2]
        == recorded
    )
    status, headers_back, body = post(
        gateway, "/run/t/openai/v1/embeddings", b'{"input": "y", "n": NaN}', headers
    )
    assert status == 400 and headers_back["x-should-retry"] == "false"
    assert "body is not a JSON object" in json.loads(body)["error"]["message"]
    gateway.close_run("t", clean=True)


def test_an_oversized_body_is_refused_without_reading_it(tmp_path: Path, gateway: Gateway) -> None:
    gateway.open_run("big", tmp_path / "big.jsonl", "record")
    host, port = gateway.url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=HANG_GUARD_S)
    connection.putrequest("POST", "/run/big/anthropic/v1/messages")
    connection.putheader("Content-Length", str(MAX_BODY_BYTES + 1))
    connection.endheaders()
    response = connection.getresponse()
    assert response.status == 413
    assert json.loads(response.read())["error"]["type"] == "request_too_large"
    connection.close()
    (call,) = gateway.close_run("big", clean=True)
    assert call.status == 413 and call.provider == "anthropic"


def test_an_agent_that_leaves_mid_stream_still_gets_the_whole_answer_recorded(
    tmp_path: Path,
) -> None:
    gate = threading.Event()
    fake = FakeUpstream(stream_gate=gate)
    fake.start()
    gw = Gateway(upstreams={"openai": fake.url})
    gw.start()
    try:
        scope = gw.open_run("gone", tmp_path / "gone.jsonl", "record")
        client = openai.OpenAI(api_key="k", base_url=scope.openai_base_url, max_retries=0)
        stream = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "a b c d"}], stream=True
        )
        next(iter(stream))
        stream.close()  # the agent stops reading and hangs up
        gate.set()
        (call,) = gw.close_run("gone", clean=True)  # waits for the request in flight
    finally:
        gw.stop()
        fake.stop()
    assert call.error is None and call.status == 200
    body = json.loads((tmp_path / "gone.jsonl").read_text().splitlines()[1])["body"]
    assert body.endswith("data: [DONE]\n\n") and '"content": " d"' in body


def test_a_cassette_that_cannot_be_written_is_a_cassette_error(
    tmp_path: Path, gateway: Gateway
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    gateway.open_run("w", blocker / "w.jsonl", "record")
    gateway.open_run("ok", tmp_path / "ok.jsonl", "record")
    with pytest.raises(CassetteError, match="cannot write the cassette"):
        gateway.close_all(clean=True)
    assert gateway.run_ids == [] and (tmp_path / "ok.jsonl").exists()
