"""SigV4 signing, against AWS's published test-suite vectors, and Bedrock's use of it: a
request the agent signed for the gateway is signed again for the upstream it is sent to."""

from __future__ import annotations

import hashlib
import http.client
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from provider_fake_upstream import ProviderUpstream
from trialrun.gateway import Gateway
from trialrun.gateway.sigv4 import Credentials, region_of, sign

EXAMPLE = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")


def vector(query: str) -> str:
    headers = sign(
        EXAMPLE, method="GET", host="example.amazonaws.com", path="/", query=query, headers={},
        body=b"", region="us-east-1", service="service", amz_date="20150830T123600Z",
        content_sha256_header=False,
    )  # fmt: skip
    return headers["Authorization"]


def test_the_aws_test_suite_vectors() -> None:
    prefix = (
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
        "SignedHeaders=host;x-amz-date, Signature="
    )
    # get-vanilla
    assert vector("") == prefix + "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"
    # get-vanilla-query-order-key-case: the query is sorted before signing
    assert vector("Param2=value2&Param1=value1") == (
        prefix + "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"
    )


def test_the_region_comes_from_an_aws_host_only() -> None:
    assert region_of("bedrock-runtime.eu-west-3.amazonaws.com") == "eu-west-3"
    assert region_of("127.0.0.1") is None and region_of("amazonaws.com.example.org") is None


@pytest.fixture
def upstream() -> Iterator[ProviderUpstream]:
    fake = ProviderUpstream()
    fake.start()
    yield fake
    fake.stop()


def converse(gw: Gateway, run: str) -> tuple[int, bytes]:
    port = int(gw.url.rsplit(":", 1)[1])
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    body = json.dumps({"messages": [{"role": "user", "content": [{"text": "hi"}]}]})
    agent_signed = {
        "Content-Type": "application/json",
        "Authorization": "AWS4-HMAC-SHA256 Credential=AKIAAGENTAGENTAGENT1/20261204/us-east-1/"
        "bedrock/aws4_request, SignedHeaders=host;x-amz-date, Signature=" + "ab" * 32,
        "X-Amz-Date": "20261204T000000Z",
        "X-Amz-Security-Token": "agent-session",
    }
    try:
        connection.request(
            "POST", f"/run/{run}/bedrock/model/meta.llama3-8b-instruct-v1%3A0/converse",
            body=body, headers=agent_signed,
        )  # fmt: skip
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def test_record_signs_bedrock_requests_again_with_the_gateways_credentials(
    tmp_path: Path, upstream: ProviderUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAGATEWAYGATEWAY01")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "gateway/secret/key/0123456789abcdefghij")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "gateway-session")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    gw = Gateway(upstreams={"bedrock": upstream.url + "/prefix"})
    gw.start()
    try:
        gw.open_run("r", tmp_path / "r.jsonl", "record")
        status, _ = converse(gw, "r")
        gw.close_run("r", clean=True)
    finally:
        gw.stop()
    (received,) = upstream.received
    headers = {k.lower(): v for k, v in received.headers.items()}
    assert status == 200
    assert received.path == "/prefix/model/meta.llama3-8b-instruct-v1%3A0/converse"
    assert headers["x-amz-security-token"] == "gateway-session"
    authorization = headers["authorization"]
    assert (
        authorization.startswith("AWS4-HMAC-SHA256 Credential=AKIAGATEWAYGATEWAY01/")
        and "/eu-west-1/bedrock/aws4_request" in authorization
    )
    # What AWS does: sign what arrived (its path, its date) and compare.
    raw = json.dumps(received.body).encode()
    assert headers["x-amz-content-sha256"] == hashlib.sha256(raw).hexdigest()
    expected = sign(
        Credentials("AKIAGATEWAYGATEWAY01", "gateway/secret/key/0123456789abcdefghij",
                    "gateway-session"),
        method="POST", host=headers["host"], path=received.path, query="",
        headers={"Content-Type": headers["content-type"]}, body=raw, region="eu-west-1",
        service="bedrock", amz_date=headers["x-amz-date"],
    )  # fmt: skip
    assert authorization == expected["Authorization"]
    text = (tmp_path / "r.jsonl").read_text()
    assert "gateway-session" not in text and "AKIAGATEWAY" not in text


def test_without_credentials_a_request_for_aws_itself_is_refused_before_sending(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name, raising=False)
    # Never reached: the refusal comes before any connection.
    gw = Gateway(upstreams={"bedrock": "https://bedrock-runtime.us-east-1.amazonaws.com"})
    gw.start()
    try:
        gw.open_run("r", tmp_path / "r.jsonl", "record")
        status, body = converse(gw, "r")
        (call,) = gw.close_run("r", clean=True)
    finally:
        gw.stop()
    assert status == 502 and "AWS_ACCESS_KEY_ID" in json.loads(body)["message"]
    assert call.status == 502
