"""Usage extraction from real-shaped bodies and streams, prices, and the route table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from trialrun.errors import ConfigError
from trialrun.gateway.routes import RouteError, error_body, parse_route
from trialrun.gateway.usage import Price, Usage, cost_usd, extract_usage, iter_sse_data, load_prices

SSE = "text/event-stream; charset=utf-8"


def sse(*events: tuple[str | None, Any]) -> str:
    text = ""
    for event, data in events:
        text += (f"event: {event}\n" if event else "") + f"data: {json.dumps(data)}\n\n"
    return text + "data: [DONE]\n\n"


def test_chat_completion_body_and_stream() -> None:
    body = {"model": "gpt-4o-2024-08-06", "usage": {"prompt_tokens": 20, "completion_tokens": 5,
            "prompt_tokens_details": {"cached_tokens": 8}}}  # fmt: skip
    assert extract_usage(
        "openai", "/v1/chat/completions", "application/json", json.dumps(body)
    ) == (Usage("gpt-4o-2024-08-06", 20, 5, 8))
    stream = sse(
        (None, {"model": "gpt-4o", "choices": [{"delta": {"content": "hi"}}], "usage": None}),
        (None, {"model": "gpt-4o", "choices": [], "usage": {"prompt_tokens": 3,
                "completion_tokens": 1, "total_tokens": 4}}),
    )  # fmt: skip
    assert extract_usage("openai", "/v1/chat/completions", SSE, stream) == Usage("gpt-4o", 3, 1)
    no_usage = sse((None, {"model": "gpt-4o", "choices": []}))
    assert extract_usage("openai", "/v1/chat/completions", SSE, no_usage) == Usage("gpt-4o")


def test_responses_body_and_stream() -> None:
    usage = {"input_tokens": 11, "output_tokens": 7, "input_tokens_details": {"cached_tokens": 0}}
    body = {"object": "response", "model": "gpt-5", "usage": usage}
    assert extract_usage("openai", "/v1/responses", "application/json", json.dumps(body)) == (
        Usage("gpt-5", 11, 7, 0)
    )
    stream = sse(
        ("response.created", {"type": "response.created", "response": {"model": "gpt-5",
                                                                         "usage": None}}),
        ("response.output_text.delta", {"type": "response.output_text.delta", "delta": "x"}),
        ("response.completed", {"type": "response.completed", "response": {**body}}),
    )  # fmt: skip
    assert extract_usage("openai", "/v1/responses", SSE, stream) == Usage("gpt-5", 11, 7, 0)


def test_anthropic_body_and_stream_add_cache_tokens_to_input() -> None:
    usage = {"input_tokens": 10, "output_tokens": 30, "cache_creation_input_tokens": 100,
             "cache_read_input_tokens": 1000}  # fmt: skip
    body = {"type": "message", "model": "claude-opus-4-1", "usage": usage}
    assert extract_usage("anthropic", "/v1/messages", "application/json", json.dumps(body)) == (
        Usage("claude-opus-4-1", 1110, 30, 1000)
    )
    stream = sse(
        ("message_start", {"type": "message_start", "message": {**body, "usage": {**usage,
                                                                   "output_tokens": 1}}}),
        ("ping", {"type": "ping"}),
        ("message_delta", {"type": "message_delta", "usage": {"output_tokens": 42,
                                                              "input_tokens": None}}),
        ("message_stop", {"type": "message_stop"}),
    )  # fmt: skip
    assert extract_usage("anthropic", "/v1/messages", SSE, stream) == (
        Usage("claude-opus-4-1", 1110, 42, 1000)
    )


def test_what_is_not_usage() -> None:
    count = json.dumps({"input_tokens": 99})
    assert extract_usage("anthropic", "/v1/messages/count_tokens", "application/json", count) == (
        Usage()
    )
    error = json.dumps({"error": {"message": "rate limited"}})
    assert extract_usage("openai", "/v1/chat/completions", "application/json", error) == Usage()
    assert extract_usage("openai", "/v1/embeddings", "text/plain", "not json") == Usage()
    weird = json.dumps({"usage": {"prompt_tokens": -1, "completion_tokens": True}})
    assert extract_usage("openai", "/v1/embeddings", "application/json", weird) == Usage(
        None, None, 0
    )
    huge = json.dumps({"usage": {"prompt_tokens": 10**400, "completion_tokens": 2**53}})
    assert extract_usage("openai", "/v1/embeddings", "application/json", huge) == Usage(
        None, None, 0
    )
    deep = '{"usage": ' + "[" * 100_000 + "]" * 100_000 + "}"
    assert extract_usage("openai", "/v1/chat/completions", "application/json", deep) == Usage()


def test_sse_parsing_follows_the_event_stream_rules() -> None:
    text = ": keep-alive\r\nevent: a\r\ndata: 1\r\ndata:2\r\n\r\nid: 7\nretry: 5\n\ndata: last"
    assert list(iter_sse_data(text)) == [("a", "1\n2"), (None, "last")]


def test_cost_uses_the_request_model_then_the_response_model() -> None:
    prices = {"gpt-4o": Price(2.5, 10.0, 1.25)}
    usage = Usage("gpt-4o-2024-08-06", 1_000_000, 100_000, 400_000)
    assert cost_usd(prices, ["gpt-4o", usage.model], usage) == pytest.approx(
        0.6 * 2.5 + 0.4 * 1.25 + 0.1 * 10.0
    )
    assert cost_usd(prices, ["gpt-4o-mini", "gpt-4o-mini-2024"], usage) is None  # no prefixes
    assert cost_usd(prices, [None, "gpt-4o"], Usage(None, 10, None)) is None
    assert cost_usd(None, ["gpt-4o"], usage) is None
    assert cost_usd({"m": Price(1.0, 2.0)}, ["m"], Usage("m", 100, 10, 50)) == pytest.approx(
        (100 * 1.0 + 10 * 2.0) / 1e6
    )  # without a cached price, cached tokens are input tokens


def test_load_prices(tmp_path: Path) -> None:
    path = tmp_path / "prices.json"
    path.write_text('{"gpt-4o": {"input_per_mtok": 2.5, "output_per_mtok": 10}}')
    assert load_prices(path) == {"gpt-4o": Price(2.5, 10.0)}
    path = tmp_path / "prices.yaml"
    path.write_text("m:\n  input_per_mtok: -1\n  output_per_mtok: cheap\nn: 3\n")
    with pytest.raises(ConfigError) as caught:
        load_prices(path)
    assert str(caught.value).splitlines() == [
        f"{path}:2: prices of 'm': 'input_per_mtok' must be >= 0, found -1",
        f"{path}:3: prices of 'm': 'output_per_mtok' must be a number, found string 'cheap'",
        f"{path}:4: 'n' must be a mapping, found integer 3",
    ]
    # A .json price table is JSON: YAML text there is refused, at its line.
    (tmp_path / "prices.json").write_text("m:\n  input_per_mtok: 1\n")
    with pytest.raises(ConfigError, match=r"prices.json:1: invalid JSON"):
        load_prices(tmp_path / "prices.json")


# ---- routes ------------------------------------------------------------------------------


def test_routes_of_both_providers() -> None:
    route = parse_route("POST", "/run/case-1.rep_0~x/anthropic/v1/messages?beta=true")
    assert (route.run_id, route.provider, route.path, route.query) == (
        "case-1.rep_0~x", "anthropic", "/v1/messages", "beta=true"
    )  # fmt: skip
    assert parse_route("POST", "/run/r/openai/v1/responses").path == "/v1/responses"


@pytest.mark.parametrize(
    ("method", "target", "status", "message"),
    [
        ("POST", "/v1/chat/completions", 404, "the gateway serves only /run/<run-id>/{openai,"),
        ("POST", "/run/a%2Fb/openai/v1/responses", 400, "run id must be"),
        ("POST", "/run/../openai/v1/responses", 400, "run id must be"),
        ("POST", "/run/" + "x" * 129 + "/openai/v1/responses", 400, "run id must be"),
        ("POST", "/run/r/mistral/v1/chat", 404, "unknown provider 'mistral'"),
        ("POST", "/run/r/openai/v2/completions", 404, "served: POST /v1/chat/completions"),
        ("GET", "/run/r/openai/v1/responses", 405, "takes POST; found 'GET'"),
        ("PATCH", "/run/r/openai/v1/files", 405, "takes GET, POST, DELETE; found 'PATCH'"),
        ("GET", "/run/r/bedrock/model/m/converse", 405, "takes POST; found 'GET'"),
        ("POST", "/run/r/bedrock/model/m/train", 404, "served: POST /model/<model-id>/{"),
        ("POST", "/run/r/gemini/models/m:generateContent", 404, "served: POST /v1beta/models"),
        ("POST", "/run/r/azure/deployments/d/chat/completions", 404, "/openai/deployments/"),
    ],
)
def test_route_errors_say_what_is_served(
    method: str, target: str, status: int, message: str
) -> None:
    with pytest.raises(RouteError) as caught:
        parse_route(method, target)
    assert caught.value.status == status and message in caught.value.message


def test_error_bodies_have_each_providers_shape() -> None:
    assert json.loads(error_body("anthropic", 400, "m", code="c")) == {
        "type": "error", "error": {"type": "invalid_request_error", "message": "m"}
    }  # fmt: skip
    assert json.loads(error_body("openai", 404, "m", code="c")) == {
        "error": {"message": "m", "type": "c", "param": None, "code": "c"}
    }
    assert json.loads(error_body("anthropic", 502, "m", code="c"))["error"]["type"] == "api_error"
