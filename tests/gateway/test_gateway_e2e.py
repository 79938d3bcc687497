"""The model gateway end to end, with the official openai and anthropic clients.

Each scenario records through the gateway against a loopback fake of the provider APIs
(tests/gateway_fake_upstream.py), shuts the fake down, and replays the same client code from the
cassette: results must be identical, streams included, with no network at all.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from gateway_fake_upstream import FakeUpstream
from trialrun.config.models import Normalization, ReplaceText
from trialrun.errors import CassetteError
from trialrun.gateway import Gateway, ModelCall, Price, RunScope

OPENAI_KEY = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0" * 2
ANTHROPIC_KEY = "sk-ant-api03-" + "Z9y8X7w6V5u4T3s2R1q0" * 2
CHAT_MODEL, CLAUDE = "gpt-4o-mini", "claude-sonnet-4-5"


@pytest.fixture
def make_gateway() -> Iterator[Callable[..., Gateway]]:
    started: list[Gateway] = []

    def make(upstream: FakeUpstream | None = None, **options: Any) -> Gateway:
        # A replay gateway points at a closed port: any forwarded call would fail loudly.
        url = upstream.url if upstream is not None else "http://127.0.0.1:9"
        gw = Gateway(upstreams={"openai": url, "anthropic": url}, **options)
        gw.start()
        started.append(gw)
        return gw

    yield make
    for gw in started:
        gw.stop()


def clients(scope: RunScope) -> tuple[openai.OpenAI, anthropic.Anthropic]:
    env = scope.env()
    return (
        openai.OpenAI(api_key=OPENAI_KEY, base_url=env["OPENAI_BASE_URL"], max_retries=0),
        anthropic.Anthropic(
            api_key=ANTHROPIC_KEY, base_url=env["ANTHROPIC_BASE_URL"], max_retries=0
        ),
    )


def user(text: str) -> list[Any]:
    return [{"role": "user", "content": text}]


def full_agent(scope: RunScope, prompt: str) -> dict[str, Any]:
    """Every served endpoint, streamed and not, the way an agent's code calls them."""
    oa, an = clients(scope)
    out: dict[str, Any] = {}
    out["chat"] = oa.chat.completions.create(model=CHAT_MODEL, messages=user(prompt)).model_dump()
    chunks = list(
        oa.chat.completions.create(
            model=CHAT_MODEL,
            messages=user(prompt),
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    out["chat_stream"] = [chunk.model_dump() for chunk in chunks]
    out["chat_stream_text"] = "".join(
        chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices
    )
    with oa.chat.completions.stream(model=CHAT_MODEL, messages=user("helper " + prompt)) as s:
        out["chat_helper"] = s.get_final_completion().model_dump()
    out["responses"] = oa.responses.create(
        model=CHAT_MODEL, input=prompt, instructions="Be brief."
    ).model_dump()
    with oa.responses.stream(model=CHAT_MODEL, input="stream " + prompt) as s:
        out["responses_deltas"] = [e.delta for e in s if e.type == "response.output_text.delta"]
        out["responses_final"] = s.get_final_response().model_dump()
    out["embeddings"] = oa.embeddings.create(
        model="text-embedding-3-small", input=[prompt, "second"]
    ).model_dump()
    out["messages"] = an.messages.create(
        model=CLAUDE, max_tokens=64, messages=user(prompt)
    ).model_dump()
    with an.messages.stream(model=CLAUDE, max_tokens=64, messages=user("stream " + prompt)) as s:
        out["messages_text"] = "".join(s.text_stream)
        out["messages_final"] = s.get_final_message().model_dump()
    # Claude Code posts to /v1/messages?beta=true; this SDK's beta client does not add it.
    out["beta"] = an.beta.messages.create(
        model=CLAUDE, max_tokens=64, messages=user("beta " + prompt), extra_query={"beta": "true"}
    ).model_dump()
    out["count"] = an.messages.count_tokens(model=CLAUDE, messages=user(prompt)).model_dump()
    return out


def test_record_then_replay_every_endpoint_gives_identical_results(
    tmp_path: Path, upstream: FakeUpstream, make_gateway: Callable[..., Gateway]
) -> None:
    cassette = tmp_path / "run-1.jsonl"
    recorder = make_gateway(upstream)
    recorded = full_agent(recorder.open_run("run-1", cassette, "record"), "hello world")
    record_calls = recorder.close_run("run-1", clean=True)
    upstream.stop()

    player = make_gateway()
    replayed = full_agent(player.open_run("run-1", cassette, "replay"), "hello world")
    replay_calls = player.close_run("run-1", clean=True)

    assert replayed == recorded
    assert recorded["chat_stream_text"] == "echo: hello world"
    assert recorded["messages_text"] == "echo: stream hello world"
    assert "".join(recorded["responses_deltas"]) == "echo: stream hello world"
    assert recorded["messages_final"]["content"][0]["text"] == "echo: stream hello world"
    assert len(record_calls) == len(replay_calls) == 10
    assert not any(call.replayed for call in record_calls)
    assert all(call.replayed and call.error is None for call in replay_calls)
    # The SSE bodies are stored verbatim: the raw stream text is in the cassette.
    text = cassette.read_text(encoding="utf-8")
    assert "event: message_start" in text and "data: [DONE]" in text
    # ?beta=true is kept apart from the path, which is the provider's own.
    lines = [json.loads(line) for line in text.splitlines()[1:]]
    assert {(r["provider"], r["path"], r["query"]) for r in lines} >= {
        ("anthropic", "/v1/messages", "beta=true"),
        ("anthropic", "/v1/messages/count_tokens", ""),
        ("openai", "/v1/responses", ""),
    }


def test_usage_is_extracted_for_each_endpoint_streamed_and_not(
    tmp_path: Path, upstream: FakeUpstream, make_gateway: Callable[..., Gateway]
) -> None:
    prices = {
        CHAT_MODEL: Price(input_per_mtok=0.15, output_per_mtok=0.6, cached_input_per_mtok=0.075),
        CLAUDE: Price(input_per_mtok=3.0, output_per_mtok=15.0),
    }
    gw = make_gateway(upstream, prices=prices)
    full_agent(gw.open_run("u", tmp_path / "u.jsonl", "record"), "count these words")
    record_calls = gw.close_run("u", clean=True)
    upstream.stop()
    player = make_gateway(prices=prices)
    full_agent(player.open_run("u", tmp_path / "u.jsonl", "replay"), "count these words")
    replay_calls = player.close_run("u", clean=True)

    for calls in (record_calls, replay_calls):
        by_kind = _by_kind(calls)
        chat = by_kind[("/v1/chat/completions", False)][0]
        chat_stream = by_kind[("/v1/chat/completions", True)]
        # include_usage stream: counted; the helper stream did not ask for usage: unknown.
        assert [(c.tokens_in, c.tokens_out) for c in chat_stream] == [(9, 4), (None, None)]
        assert (chat.tokens_in, chat.tokens_out, chat.tokens_cached) == (9, 4, 2)
        assert chat.cost_usd == pytest.approx((7 * 0.15 + 2 * 0.075 + 4 * 0.6) / 1e6)
        responses = by_kind[("/v1/responses", False)][0]
        responses_stream = by_kind[("/v1/responses", True)][0]
        assert (responses.tokens_in, responses.tokens_out) == (6, 4)
        assert (responses_stream.tokens_in, responses_stream.tokens_out) == (7, 5)
        embeddings = by_kind[("/v1/embeddings", False)][0]
        assert (embeddings.tokens_in, embeddings.tokens_out, embeddings.cost_usd) == (4, 0, None)
        message, beta = by_kind[("/v1/messages", False)]
        message_stream = by_kind[("/v1/messages", True)][0]
        # Anthropic counts cache reads apart; tokens_in adds them back (input 9 + 4 read).
        assert (message.tokens_in, message.tokens_out, message.tokens_cached) == (13, 4, 4)
        assert (message_stream.tokens_in, message_stream.tokens_out) == (14, 5)
        assert message.cost_usd == pytest.approx((13 * 3.0 + 4 * 15.0) / 1e6)
        assert message.model == CLAUDE and beta.tokens_out == 5
        count = by_kind[("/v1/messages/count_tokens", False)][0]
        assert (count.tokens_in, count.tokens_out, count.cost_usd) == (None, None, None)


def _by_kind(calls: list[ModelCall]) -> dict[tuple[str, bool], list[ModelCall]]:
    kinds: dict[tuple[str, bool], list[ModelCall]] = {}
    for call in sorted(calls, key=lambda c: c.timestamp):
        kinds.setdefault((call.path, call.stream), []).append(call)
    return kinds


def test_a_stream_reaches_the_agent_chunk_by_chunk(
    tmp_path: Path, make_gateway: Callable[..., Gateway]
) -> None:
    gate = threading.Event()
    fake = FakeUpstream(stream_gate=gate)
    fake.start()
    try:
        gw = make_gateway(fake)
        oa, an = clients(gw.open_run("s", tmp_path / "s.jsonl", "record"))
        stream = oa.chat.completions.create(model=CHAT_MODEL, messages=user("a b c"), stream=True)
        first = next(iter(stream))  # the upstream holds the rest back until the gate opens
        gate.set()
        rest = list(stream)
        with an.messages.stream(model=CLAUDE, max_tokens=9, messages=user("x")) as events:
            assert next(iter(events)).type == "message_start"
            assert "".join(events.text_stream) == "echo: x"
        gw.close_run("s", clean=True)
    finally:
        fake.stop()
    assert first.choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in rest) == "echo: a b c"
    assert not fake.gate_timed_out


def test_two_runs_in_parallel_keep_separate_cursors(
    tmp_path: Path, upstream: FakeUpstream, make_gateway: Callable[..., Gateway]
) -> None:
    def agent(scope: RunScope, results: dict[str, list[str]]) -> None:
        oa, an = clients(scope)
        answers = []
        for _ in range(3):  # the same request three times: three recordings, in order
            answers.append(oa.chat.completions.create(model=CHAT_MODEL, messages=user("same")).id)
            answers.append(an.messages.create(model=CLAUDE, max_tokens=9, messages=user("s")).id)
        results[scope.run_id] = answers

    def run_both(gw: Gateway, mode: str) -> dict[str, list[str]]:
        results: dict[str, list[str]] = {}
        scopes = [gw.open_run(r, tmp_path / f"{r}.jsonl", mode) for r in ("a", "b")]  # type: ignore[arg-type]
        threads = [threading.Thread(target=agent, args=(s, results)) for s in scopes]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        for run_id in ("a", "b"):
            assert all(c.error is None for c in gw.close_run(run_id, clean=True))
        return results

    recorded = run_both(make_gateway(upstream), "record")
    upstream.stop()
    replayed = run_both(make_gateway(), "replay")
    assert replayed == recorded
    assert len(set(recorded["a"]) | set(recorded["b"])) == 12  # every answer had its own id


def test_a_changed_prompt_is_a_cassette_mismatch_naming_the_nearest_recording(
    tmp_path: Path, upstream: FakeUpstream, make_gateway: Callable[..., Gateway]
) -> None:
    conversation: list[Any] = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "first question"},
        {"role": "assistant", "content": "first answer"},
        {"role": "user", "content": "second question"},
    ]
    recorder = make_gateway(upstream)
    oa, an = clients(recorder.open_run("m", tmp_path / "m.jsonl", "record"))
    oa.chat.completions.create(model=CHAT_MODEL, messages=conversation)
    an.messages.create(model=CLAUDE, max_tokens=9, messages=user("claude prompt"))
    recorder.close_run("m", clean=True)
    upstream.stop()

    player = make_gateway()
    oa, an = clients(player.open_run("m", tmp_path / "m.jsonl", "replay"))
    changed: list[Any] = [*conversation[:3], {"role": "user", "content": "a different question"}]
    with pytest.raises(openai.BadRequestError) as caught:
        oa.chat.completions.create(model=CHAT_MODEL, messages=changed)
    message = str(caught.value)
    assert "cassette mismatch" in message
    assert "line 2" in message and "messages[3].content" in message
    assert "second question" in message and "a different question" in message
    with pytest.raises(anthropic.BadRequestError, match="cassette mismatch"):
        an.messages.create(model=CLAUDE, max_tokens=9, messages=user("changed prompt"))
    # The recorded request still replays; a second identical one finds its recording used.
    oa.chat.completions.create(model=CHAT_MODEL, messages=conversation)
    with pytest.raises(openai.BadRequestError, match="1 identical recording"):
        oa.chat.completions.create(model=CHAT_MODEL, messages=conversation)
    calls = player.close_run("m", clean=True)
    failed = [c for c in calls if c.error]
    assert len(failed) == 3 and all(c.error.startswith("cassette mismatch") for c in failed)  # type: ignore[union-attr]
    assert {c.status for c in failed} == {400}


def test_volatile_dates_uuids_and_workdir_still_match(
    tmp_path: Path, upstream: FakeUpstream, make_gateway: Callable[..., Gateway]
) -> None:
    def prompt(workdir: Path) -> str:
        return (
            f"Today is {datetime.now(UTC).isoformat()} ({datetime.now(UTC).date()}). "
            f"Session {uuid.uuid4()}. Working in {workdir}/src "
            f"and /tmp/tmp{uuid.uuid4().hex[:8]}/x."
        )

    def agent(scope: RunScope, workdir: Path) -> str:
        oa, _ = clients(scope)
        reply = oa.chat.completions.create(
            model=CHAT_MODEL, messages=user(prompt(workdir)), user=str(uuid.uuid4())
        )
        return reply.id

    recorder = make_gateway(upstream)
    scope = recorder.open_run("v", tmp_path / "v.jsonl", "record", workdir=tmp_path / "w1")
    recorded = agent(scope, tmp_path / "w1")
    recorder.close_run("v", clean=True)
    upstream.stop()
    stored = json.loads((tmp_path / "v.jsonl").read_text().splitlines()[1])["request"]
    assert stored["messages"][0]["content"] == (
        "Today is <datetime> (<date>). Session <uuid>. Working in <workdir>/src and <tmp>."
    )
    assert "user" not in stored

    player = make_gateway()
    scope = player.open_run("v", tmp_path / "v.jsonl", "replay", workdir=tmp_path / "w2")
    assert agent(scope, tmp_path / "w2") == recorded


def test_user_rules_and_lenient_replay(
    tmp_path: Path, upstream: FakeUpstream, make_gateway: Callable[..., Gateway]
) -> None:
    rules = Normalization(replace_text=[ReplaceText(pattern=r"order #\d+", replacement="order #N")])
    recorder = make_gateway(upstream, normalization=rules)
    oa, _ = clients(recorder.open_run("r", tmp_path / "r.jsonl", "record"))
    first = oa.chat.completions.create(model=CHAT_MODEL, messages=user("order #123")).id
    second = oa.chat.completions.create(model=CHAT_MODEL, messages=user("old wording")).id
    recorder.close_run("r", clean=True)
    upstream.stop()

    player = make_gateway(normalization=rules, lenient=True)
    oa, _ = clients(player.open_run("r", tmp_path / "r.jsonl", "replay"))
    assert oa.chat.completions.create(model=CHAT_MODEL, messages=user("order #987")).id == first
    assert oa.chat.completions.create(model=CHAT_MODEL, messages=user("new wording")).id == second
    with pytest.raises(openai.BadRequestError, match="cassette mismatch"):
        oa.chat.completions.create(model=CHAT_MODEL, messages=user("nothing left"))
    calls = player.close_run("r", clean=True)
    assert calls[0].warning is None
    assert (
        calls[1].warning is not None
        and "lenient replay served the recording: line 3" in calls[1].warning
    )
    assert "messages[0].content" in calls[1].warning and calls[1].error is None


def test_auth_headers_are_forwarded_but_never_written(
    tmp_path: Path, upstream: FakeUpstream, make_gateway: Callable[..., Gateway]
) -> None:
    gw = make_gateway(upstream)
    full_agent(gw.open_run("k", tmp_path / "k.jsonl", "record"), f"my key is {OPENAI_KEY}")
    gw.close_run("k", clean=True)
    sent = [{name.lower(): value for name, value in r.headers.items()} for r in upstream.received]
    assert all(h["authorization"].endswith((OPENAI_KEY, ANTHROPIC_KEY)) for h in sent)
    assert all(h["accept-encoding"] == "identity" for h in sent)
    assert any("anthropic-version" in h for h in sent)
    text = (tmp_path / "k.jsonl").read_text(encoding="utf-8")
    for secret in (OPENAI_KEY, ANTHROPIC_KEY, "A1b2C3d4E5f6G7h8I9j0", "Bearer"):
        assert secret not in text
    assert "authorization" not in text.lower() and "x-api-key" not in text.lower()
    assert "[REDACTED]" in text  # the key the prompt carried, in requests and echoed answers


def test_an_upstream_error_is_recorded_and_replayed(
    tmp_path: Path, upstream: FakeUpstream, make_gateway: Callable[..., Gateway]
) -> None:
    gw = make_gateway(upstream)
    scope = gw.open_run("e", tmp_path / "e.jsonl", "record")
    oa = openai.OpenAI(api_key=OPENAI_KEY, base_url=scope.openai_base_url, max_retries=1)
    upstream.fail_next = 429  # the SDK retries (retry-after-ms: 5) and gets the answer
    recorded = oa.chat.completions.create(model=CHAT_MODEL, messages=user("retry me")).id
    calls = gw.close_run("e", clean=True)
    assert [c.status for c in calls] == [429, 200]
    assert calls[0].error == "HTTP 429: slow down"
    upstream.stop()

    player = make_gateway()
    scope = player.open_run("e", tmp_path / "e.jsonl", "replay")
    oa = openai.OpenAI(api_key=OPENAI_KEY, base_url=scope.openai_base_url, max_retries=1)
    assert oa.chat.completions.create(model=CHAT_MODEL, messages=user("retry me")).id == recorded
    assert [c.status for c in player.close_run("e", clean=True)] == [429, 200]


def test_an_unreachable_upstream_is_a_502_and_records_nothing(
    tmp_path: Path, make_gateway: Callable[..., Gateway]
) -> None:
    gw = make_gateway()  # upstream: a closed loopback port
    oa, _ = clients(gw.open_run("x", tmp_path / "x.jsonl", "record"))
    with pytest.raises(openai.InternalServerError, match="could not reach the openai upstream"):
        oa.chat.completions.create(model=CHAT_MODEL, messages=user("hi"))
    (call,) = gw.close_run("x", clean=True)
    assert call.status == 502 and call.error is not None
    assert (tmp_path / "x.jsonl").read_text().splitlines() == [
        '{"format": "trialrun-model-cassette", "schema_version": 1}'
    ]


def test_unknown_paths_providers_and_runs_are_404s_that_are_counted(
    tmp_path: Path, make_gateway: Callable[..., Gateway]
) -> None:
    gw = make_gateway()
    scope = gw.open_run("n", tmp_path / "n.jsonl", "live")
    oa = openai.OpenAI(api_key=OPENAI_KEY, base_url=scope.openai_base_url, max_retries=0)
    with pytest.raises(openai.NotFoundError, match="served: POST /v1/chat/completions"):
        oa.post(f"{scope.base_url}/openai/v2/models", cast_to=object, body={})
    with pytest.raises(openai.NotFoundError, match="unknown provider 'mistral'"):
        oa.post(f"{scope.base_url}/mistral/v1/generate", cast_to=object, body={})
    with pytest.raises(openai.NotFoundError, match="run 'other' is not open"):
        openai.OpenAI(
            api_key="k", base_url=f"{gw.url}/run/other/openai/v1", max_retries=0
        ).chat.completions.create(model=CHAT_MODEL, messages=user("x"))
    with pytest.raises(openai.BadRequestError, match="run id must be"):
        openai.OpenAI(
            api_key="k", base_url=f"{gw.url}/run/.hidden/openai/v1", max_retries=0
        ).chat.completions.create(model=CHAT_MODEL, messages=user("x"))
    with pytest.raises(openai.NotFoundError, match="serves only"):
        openai.OpenAI(api_key="k", base_url=f"{gw.url}/v1", max_retries=0).models.list()
    calls = gw.close_run("n", clean=True)
    assert [(c.provider, c.path, c.status) for c in calls] == [
        ("openai", "/v2/models", 404),
        ("mistral", "/v1/generate", 404),
    ]
    assert [u.status for u in gw.unserved()] == [404, 404, 404, 400, 404]


def test_open_run_validates_its_arguments_and_the_cassette(
    tmp_path: Path, make_gateway: Callable[..., Gateway]
) -> None:
    gw = make_gateway()
    with pytest.raises(CassetteError, match="cassette file not found"):
        gw.open_run("c", tmp_path / "missing.jsonl", "replay")
    corrupt = tmp_path / "corrupt.jsonl"
    corrupt.write_text('{"format": "trialrun-model-cassette", "schema_version": 1}\n\n{oops\n')
    with pytest.raises(CassetteError) as caught:
        gw.open_run("c", corrupt, "replay")
    assert caught.value.line == 3 and str(caught.value).startswith(f"{corrupt}:3: not valid JSON")
    with pytest.raises(ValueError, match="run id must be"):
        gw.open_run("a/b", tmp_path / "x.jsonl", "record")
    with pytest.raises(ValueError, match="mode must be one of"):
        gw.open_run("c", tmp_path / "x.jsonl", "rewind")  # type: ignore[arg-type]
    gw.open_run("c", tmp_path / "x.jsonl", "record")
    with pytest.raises(ValueError, match="already open"):
        gw.open_run("c", tmp_path / "x.jsonl", "record")
    assert gw.close_run("c", clean=False) == []
    assert not (tmp_path / "x.jsonl").exists()  # an unclean close discards the recording
    with pytest.raises(ValueError, match="not open"):
        gw.close_run("c", clean=True)


def test_env_points_both_sdks_at_the_run_and_fakes_keys_only_in_replay(
    tmp_path: Path, make_gateway: Callable[..., Gateway]
) -> None:
    gw = make_gateway()
    cassette = tmp_path / "e.jsonl"
    cassette.write_text('{"format": "trialrun-model-cassette", "schema_version": 1}\n')
    replay = gw.open_run("e", cassette, "replay")
    record = gw.open_run("f", tmp_path / "f.jsonl", "record")
    assert replay.env()["OPENAI_BASE_URL"] == f"{gw.url}/run/e/openai/v1"
    assert replay.env()["ANTHROPIC_BASE_URL"] == f"{gw.url}/run/e/anthropic"
    assert "OPENAI_API_KEY" not in replay.env()
    assert replay.env({"OPENAI_API_KEY": "real"}) == {
        **replay.env(),
        "ANTHROPIC_API_KEY": "sk-replay",
    }
    assert "ANTHROPIC_API_KEY" not in record.env({})


def test_an_env_configured_sdk_reaches_the_gateway(
    tmp_path: Path,
    upstream: FakeUpstream,
    make_gateway: Callable[..., Gateway],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gw = make_gateway(upstream)
    scope = gw.open_run("env", tmp_path / "env.jsonl", "record")
    for name, value in scope.env({}).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    assert openai.OpenAI(max_retries=0).embeddings.create(model="e", input="x").data
    assert anthropic.Anthropic(max_retries=0).messages.count_tokens(
        model=CLAUDE, messages=user("x")
    )
    assert [c.path for c in gw.close_run("env", clean=True)] == [
        "/v1/embeddings",
        "/v1/messages/count_tokens",
    ]


def test_the_public_surface_is_small_and_cheap_to_import() -> None:
    import trialrun.gateway as gateway

    assert sorted(gateway.__all__) == [
        "Gateway", "Mode", "ModelCall", "ModelCassette", "Price", "Recording",
        "RequestNormalizer", "RunScope", "UnservedRequest", "Usage", "extract_usage",
        "load_prices", "request_key",
    ]  # fmt: skip
    code = (
        "import sys, trialrun.gateway; "
        "print(sorted(m for m in ('pydantic', 'httpx', 'openai', 'anthropic') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"  # stdlib only: no HTTP library, no pydantic
