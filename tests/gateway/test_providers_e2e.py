"""Azure OpenAI, Gemini, Bedrock and OpenAI's other endpoints through the gateway, end to end.

Each scenario records against a loopback fake of the provider (tests/provider_fake_upstream.py),
stops the fake, and replays from the cassette with a gateway whose upstreams are a closed port:
the answers must be the same bytes, a changed request must be a miss that names the nearest
recording, and no credential or signature may reach the cassette. Azure and OpenAI are driven
with the official openai SDK; Gemini and Bedrock with plain HTTP shaped as their SDKs send it.
"""

from __future__ import annotations

import hashlib
import http.client
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import openai
import pytest

from provider_fake_upstream import ProviderUpstream
from trialrun.gateway import Gateway, Price, RunScope

PROVIDERS = ("openai", "anthropic", "azure", "gemini", "bedrock")
OPENAI_KEY = "sk-proj-" + "Q1w2E3r4T5y6U7i8O9p0" * 2
AZURE_KEY = "0123456789abcdef0123456789abcdef"
GOOGLE_KEY = "AIza" + "SyD-4f5g6h7j8k9l0z1x2c3v4b5n6m7q8w"
AWS_KEY_ID = "AKIA" + "IOSFODNN7EXAMPLE"
CLAUDE_ON_BEDROCK = "anthropic.claude-3-5-sonnet-20240620-v1:0"
Make = Callable[..., Gateway]


@pytest.fixture
def upstream() -> Iterator[ProviderUpstream]:
    fake = ProviderUpstream()
    fake.start()
    yield fake
    fake.stop()


@pytest.fixture
def make_gateway() -> Iterator[Make]:
    started: list[Gateway] = []

    def make(fake: ProviderUpstream | None = None, **options: Any) -> Gateway:
        # A replay gateway points at a closed port: any forwarded call would fail loudly.
        url = fake.url if fake is not None else "http://127.0.0.1:9"
        gw = Gateway(upstreams=dict.fromkeys(PROVIDERS, url), **options)
        gw.start()
        started.append(gw)
        return gw

    yield make
    for gw in started:
        gw.stop()


def send(
    url: str, method: str = "POST", body: Any = None, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    """One HTTP request as an SDK sends it; returns status, lower-cased headers and body."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=60)
    raw = json.dumps(body).encode() if body is not None else None
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    all_headers = {"Content-Type": "application/json", **(headers or {})}
    try:
        connection.request(method, target, body=raw, headers=all_headers)
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def record_then_replay(
    tmp_path: Path,
    make_gateway: Make,
    upstream: ProviderUpstream,
    scenario: Callable[[RunScope], Any],
    **options: Any,
) -> tuple[Any, Any, Gateway, RunScope]:
    """Run ``scenario`` recording, stop the upstream, run it again replaying; returns both
    results, the replay gateway and its (still open) run."""
    cassette = tmp_path / "case.jsonl"
    recorder = make_gateway(upstream, **options)
    recorded = scenario(recorder.open_run("case", cassette, "record"))
    recorder.close_run("case", clean=True)
    upstream.stop()
    player = make_gateway(**options)
    scope = player.open_run("case", cassette, "replay")
    return recorded, scenario(scope), player, scope


def cassette_text(tmp_path: Path) -> str:
    return (tmp_path / "case.jsonl").read_text()


# ---- OpenAI's other endpoints ------------------------------------------------------------


def test_openai_models_moderations_and_files_record_and_replay(
    tmp_path: Path, make_gateway: Make, upstream: ProviderUpstream
) -> None:
    upload = b'{"custom_id": "r1", "body": "the private training row"}\n'

    def scenario(scope: RunScope) -> list[Any]:
        oa = openai.OpenAI(api_key=OPENAI_KEY, base_url=scope.openai_base_url, max_retries=0)
        created = oa.files.create(file=("rows.jsonl", upload), purpose="batch")
        return [
            [m.id for m in oa.models.list()],
            oa.models.retrieve("gpt-4o-mini").owned_by,
            oa.moderations.create(input="an attack plan").model_dump(),
            created.model_dump(),
            [f.id for f in oa.files.list()],
            oa.files.delete(created.id).model_dump(),
            [f.id for f in oa.files.list()],  # the same GET again: its own, later recording
        ]

    recorded, replayed, player, scope = record_then_replay(
        tmp_path, make_gateway, upstream, scenario
    )
    assert replayed == recorded
    assert recorded[4] == [recorded[3]["id"]] and recorded[6] == []
    assert recorded[1].startswith("org-")  # a random id: the replay's came from the cassette
    text = cassette_text(tmp_path)
    assert b"private training row" not in text.encode() and OPENAI_KEY not in text
    lines = [json.loads(line) for line in text.splitlines()[1:]]
    assert [line["method"] for line in lines] == [
        "POST",
        "GET",
        "GET",
        "POST",
        "GET",
        "DELETE",
        "GET",
    ]
    (part,) = [p for p in lines[0]["request"]["multipart"] if p["name"] == "file"]
    assert part == {
        "name": "file", "filename": "rows.jsonl", "content_type": "application/octet-stream",
        "bytes": len(upload), "sha256": hashlib.sha256(upload).hexdigest(),
    }  # fmt: skip

    # Consume-once: a third listing has no recording; another upload's bytes are another request.
    oa = openai.OpenAI(api_key=OPENAI_KEY, base_url=scope.openai_base_url, max_retries=0)
    with pytest.raises(openai.BadRequestError, match="already used") as caught:
        oa.files.list()
    assert "GET openai /v1/files" in str(caught.value)
    with pytest.raises(openai.BadRequestError, match=r"multipart\[\d\]\.sha256") as caught:
        oa.files.create(file=("rows.jsonl", upload.upper()), purpose="batch")
    assert "nearest recording: line 2" in str(caught.value)
    with pytest.raises(openai.BadRequestError, match=r"GET openai /v1/models/o1 .* \(no body\)"):
        oa.models.retrieve("o1")
    calls = player.close_run("case", clean=True)  # after the requests in flight
    assert sorted((c.path, c.status) for c in calls if c.path.startswith("/v1/models")) == [
        ("/v1/models", 200), ("/v1/models/gpt-4o-mini", 200), ("/v1/models/o1", 400)
    ]  # fmt: skip
    assert all(c.replayed for c in calls)
    (moderation,) = [c for c in calls if c.path == "/v1/moderations"]
    assert (moderation.model, moderation.tokens_in) == ("omni-moderation-latest", None)
    assert sorted(c.status for c in calls) == [200] * 7 + [400] * 3


def test_the_query_of_other_endpoints_is_matched(
    tmp_path: Path, make_gateway: Make, upstream: ProviderUpstream
) -> None:
    def scenario(scope: RunScope) -> Any:
        oa = openai.OpenAI(api_key=OPENAI_KEY, base_url=scope.openai_base_url, max_retries=0)
        return oa.files.list(purpose="batch").model_dump()

    recorded, replayed, _, scope = record_then_replay(tmp_path, make_gateway, upstream, scenario)
    assert replayed == recorded
    oa = openai.OpenAI(api_key=OPENAI_KEY, base_url=scope.openai_base_url, max_retries=0)
    with pytest.raises(openai.BadRequestError, match="the query differs: recorded 'purpose=batch'"):
        oa.files.list(purpose="fine-tune")


# ---- Azure OpenAI ------------------------------------------------------------------------


def azure(scope: RunScope, api_version: str = "2024-10-21") -> openai.AzureOpenAI:
    return openai.AzureOpenAI(
        azure_endpoint=scope.provider_base_url("azure"),
        api_key=AZURE_KEY,
        api_version=api_version,
        max_retries=0,
    )


def test_azure_deployment_urls_record_and_replay_with_the_official_client(
    tmp_path: Path, make_gateway: Make, upstream: ProviderUpstream
) -> None:
    def scenario(scope: RunScope, api_version: str = "2024-10-21") -> list[Any]:
        client = azure(scope, api_version)
        messages: Any = [{"role": "user", "content": "hello azure"}]
        plain = client.chat.completions.create(model="prod-4o", messages=messages)
        stream = client.chat.completions.create(model="prod-4o", messages=messages, stream=True)
        pieces = [c.choices[0].delta.content for c in stream if c.choices]
        vector = client.embeddings.create(model="embed-3", input="hi").data[0].embedding
        return [plain.model_dump(), pieces, vector]

    cassette = tmp_path / "case.jsonl"
    recorder = make_gateway(upstream, prices={"prod-4o": Price(1.0, 2.0)})
    recorded = scenario(recorder.open_run("case", cassette, "record"))
    recorder.close_run("case", clean=True)
    first = upstream.received[0]
    assert first.path == "/openai/deployments/prod-4o/chat/completions?api-version=2024-10-21"
    assert first.headers["api-key"] == AZURE_KEY
    upstream.stop()

    # A newer api-version selects the protocol, not the question: still the same recordings.
    player = make_gateway(prices={"prod-4o": Price(1.0, 2.0)})
    scope = player.open_run("case", cassette, "replay")
    assert scenario(scope, "2025-01-01-preview") == recorded
    assert recorded[0]["choices"][0]["message"]["content"] == "echo: hello azure"
    text = cassette_text(tmp_path)
    assert AZURE_KEY not in text and "api-version=2024-10-21" in text

    with pytest.raises(openai.BadRequestError, match="cassette mismatch") as caught:
        azure(scope).chat.completions.create(
            model="prod-4o", messages=[{"role": "user", "content": "hello there"}]
        )
    assert "first difference at messages[0].content" in str(caught.value)
    # Completion order is not request order (each answer is sent before its call is noted).
    calls = player.close_run("case", clean=True)
    (missed,) = [c for c in calls if c.status != 200]
    (embedded,) = [c for c in calls if c.path.endswith("/embeddings")]
    (plain,) = [
        c
        for c in calls
        if c.path.endswith("/chat/completions") and not c.stream and c.status == 200
    ]
    (streamed,) = [c for c in calls if c.stream]
    assert (plain.provider, plain.model, plain.stream, streamed.stream) == (
        "azure", "prod-4o", False, True
    )  # fmt: skip
    assert plain.tokens_in and plain.tokens_out == 3 and plain.cost_usd is not None
    assert embedded.path == "/openai/deployments/embed-3/embeddings"
    assert missed.status == 400 and missed.error is not None


def test_azure_without_an_upstream_is_a_502_that_says_how_to_give_one(
    tmp_path: Path, make_gateway: Make
) -> None:
    gw = Gateway(upstreams={"openai": "http://127.0.0.1:9"})
    gw.start()
    try:
        scope = gw.open_run("case", tmp_path / "case.jsonl", "record")
        with pytest.raises(openai.InternalServerError, match="--upstream azure=URL"):
            azure(scope).chat.completions.create(
                model="d", messages=[{"role": "user", "content": "x"}]
            )
        (call,) = gw.close_run("case", clean=True)
        assert (call.provider, call.status) == ("azure", 502)
    finally:
        gw.stop()


# ---- Gemini ------------------------------------------------------------------------------

GEMINI_MODEL = "gemini-2.5-flash"


def gemini_body(text: str) -> dict[str, Any]:
    return {"contents": [{"role": "user", "parts": [{"text": text}]}],
            "generationConfig": {"temperature": 0}}  # fmt: skip


def test_gemini_generate_stream_and_count_record_and_replay(
    tmp_path: Path, make_gateway: Make, upstream: ProviderUpstream
) -> None:
    prices = {GEMINI_MODEL: Price(0.3, 2.5, 0.03)}

    def scenario(scope: RunScope) -> list[Any]:
        base = f"{scope.provider_base_url('gemini')}/v1beta/models/{GEMINI_MODEL}"
        header = {"x-goog-api-key": GOOGLE_KEY}
        return [
            send(f"{base}:generateContent", body=gemini_body("plain question"), headers=header),
            # The key the old way, in the query: neither stored nor matched.
            send(
                f"{base}:streamGenerateContent?alt=sse&key={GOOGLE_KEY}",
                body=gemini_body("streamed question"),
            ),
            send(f"{base}:countTokens", body=gemini_body("count me"), headers=header),
            send(f"{scope.provider_base_url('gemini')}/v1beta/models", "GET", headers=header),
        ]

    recorded, replayed, player, scope = record_then_replay(
        tmp_path, make_gateway, upstream, scenario, prices=prices
    )
    assert [(status, body) for status, _, body in replayed] == [
        (status, body) for status, _, body in recorded
    ]
    assert all(status == 200 for status, _, _ in recorded)
    _, stream_headers, stream_body = replayed[1]
    assert stream_headers["content-type"].startswith("text/event-stream")
    assert stream_body.count(b"data: ") == 3  # "echo:", "streamed", "question"
    text = cassette_text(tmp_path)
    assert "AIza" not in text and "x-goog" not in text
    assert '"query": "alt=sse"' in text

    base = f"{scope.provider_base_url('gemini')}/v1beta/models/{GEMINI_MODEL}"
    status, _, body = send(f"{base}:generateContent", body=gemini_body("another question"))
    error = json.loads(body)["error"]
    assert (status, error["code"], error["status"]) == (400, 400, "INVALID_ARGUMENT")
    assert error["message"].startswith("cassette mismatch")
    assert "first difference at contents[0].parts[0].text" in error["message"]
    # The stream is another endpoint: the same body, not streamed, is not its recording.
    status, _, body = send(f"{base}:generateContent", body=gemini_body("streamed question"))
    assert status == 400 and "nearest recording: line 2" in json.loads(body)["error"]["message"]
    calls = player.close_run("case", clean=True)
    by_path = {c.path.rpartition(":")[2]: c for c in calls if c.status == 200}
    generate, streamed = by_path["generateContent"], by_path["streamGenerateContent"]
    counted, listed = by_path["countTokens"], by_path["/v1beta/models"]
    missed = [c for c in calls if c.status != 200]
    assert (generate.model, generate.stream, streamed.stream) == (GEMINI_MODEL, False, True)
    # prompt 4 in; 3 candidate words + 3 thinking tokens out; 1 cached.
    assert (generate.tokens_in, generate.tokens_out, generate.tokens_cached) == (4, 6, 1)
    assert (streamed.tokens_in, streamed.tokens_out) == (4, 6)  # the last chunk's totals
    assert generate.cost_usd == pytest.approx((3 * 0.3 + 1 * 0.03 + 6 * 2.5) / 1e6)
    assert (counted.tokens_in, listed.tokens_in, listed.model) == (None, None, None)
    assert [c.status for c in missed] == [400, 400]


def test_gemini_unknown_paths_get_googles_error_shape(tmp_path: Path, make_gateway: Make) -> None:
    gw = make_gateway()
    scope = gw.open_run("case", tmp_path / "case.jsonl", "record")
    status, _, body = send(f"{scope.provider_base_url('gemini')}/models/m:generateContent", body={})
    error = json.loads(body)["error"]
    assert (status, error["status"]) == (404, "NOT_FOUND")
    assert "served: POST /v1beta/models/<model>:generateContent" in error["message"]


# ---- Bedrock -----------------------------------------------------------------------------


def signed(date: str, token: str) -> dict[str, str]:
    """Headers shaped as a SigV4 signature of ``date``: a different date, another signature."""
    signature = hashlib.sha256(f"{date}{token}".encode()).hexdigest()
    return {
        "Authorization": f"AWS4-HMAC-SHA256 Credential={AWS_KEY_ID}/{date[:8]}/us-east-1/"
        f"bedrock/aws4_request, SignedHeaders=host;x-amz-date, Signature={signature}",
        "X-Amz-Date": date,
        "X-Amz-Security-Token": token,
        "X-Amz-Content-Sha256": hashlib.sha256(b"body").hexdigest(),
    }


def converse_body(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": [{"text": text}]}],
            "inferenceConfig": {"maxTokens": 100}}  # fmt: skip


def test_bedrock_requests_signed_again_still_match(
    tmp_path: Path, make_gateway: Make, upstream: ProviderUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Without credentials of its own the gateway forwards the agent's signature to a stand-in.
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name, raising=False)

    def scenario(scope: RunScope, date: str, token: str) -> list[Any]:
        # botocore sends the model id percent-encoded.
        base = f"{scope.provider_base_url('bedrock')}/model/{CLAUDE_ON_BEDROCK.replace(':', '%3A')}"
        headers = signed(date, token)
        invoke = {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 100,
                  "messages": [{"role": "user", "content": "invoked"}]}  # fmt: skip
        return [
            send(f"{base}/converse", body=converse_body("plain"), headers=headers),
            send(f"{base}/converse-stream", body=converse_body("streamed"), headers=headers),
            send(f"{base}/invoke", body=invoke, headers=headers),
        ]

    cassette = tmp_path / "case.jsonl"
    recorder = make_gateway(upstream)
    recorded = scenario(
        recorder.open_run("case", cassette, "record"),
        "20261204T101500Z",
        "FwoGZXIvYXdzEJr//sessionA",
    )
    recorder.close_run("case", clean=True)
    assert upstream.received[0].path == (
        "/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse"
    )
    upstream.stop()
    player = make_gateway()
    scope = player.open_run("case", cassette, "replay")
    replayed = scenario(scope, "20261205T090000Z", "FwoGZXIvYXdzEJr//sessionB")
    assert [(s, b) for s, _, b in replayed] == [(s, b) for s, _, b in recorded]
    assert all(status == 200 for status, _, _ in replayed)
    assert replayed[1][1]["content-type"] == "application/vnd.amazon.eventstream"
    text = cassette_text(tmp_path)
    for secret in ("AKIA", "Signature", "session", "20261204T101500Z"):
        assert secret not in text

    base = f"{scope.provider_base_url('bedrock')}/model/{CLAUDE_ON_BEDROCK}"
    status, _, body = send(
        f"{base}/converse", body=converse_body("changed"), headers=signed("20261205T0", "t")
    )
    message = json.loads(body)["message"]
    assert status == 400 and message.startswith("cassette mismatch")
    assert "first difference at messages[0].content[0].text" in message
    calls = player.close_run("case", clean=True)
    by_path = {c.path.rpartition("/")[2]: c for c in calls if c.status == 200}
    converse, streamed, invoked = (by_path[p] for p in ("converse", "converse-stream", "invoke"))
    (missed,) = [c for c in calls if c.status != 200]
    assert (converse.path, converse.model) == (
        f"/model/{CLAUDE_ON_BEDROCK}/converse", CLAUDE_ON_BEDROCK
    )  # fmt: skip
    assert (converse.tokens_in, converse.tokens_out, converse.stream) == (6, 2, False)
    assert (streamed.tokens_in, streamed.tokens_out, streamed.stream) == (6, 2, True)  # metadata
    assert (invoked.tokens_in, invoked.tokens_out) == (6, 2)  # from the token-count headers
    assert missed.status == 400


def test_anthropic_other_endpoints_record_and_replay_with_the_official_client(
    tmp_path: Path, make_gateway: Make, upstream: ProviderUpstream
) -> None:
    import anthropic

    def scenario(scope: RunScope) -> list[str]:
        client = anthropic.Anthropic(
            api_key="sk-ant-api03-" + "x" * 40, base_url=scope.anthropic_base_url, max_retries=0
        )
        return [m.id for m in client.models.list()]

    recorded, replayed, player, _ = record_then_replay(tmp_path, make_gateway, upstream, scenario)
    assert replayed == recorded == ["gpt-4o-mini", "text-embedding-3-small"]
    (call,) = player.close_run("case", clean=True)
    assert (call.provider, call.path, call.status, call.replayed) == (
        "anthropic", "/v1/models", 200, True
    )  # fmt: skip
    (line,) = cassette_text(tmp_path).splitlines()[1:]
    assert json.loads(line)["method"] == "GET"
