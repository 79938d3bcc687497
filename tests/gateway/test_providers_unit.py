"""The provider layer on its own: the registry, what a key holds, and the parsers of bodies
(multipart uploads, AWS event streams) that never see a real provider in these tests."""

from __future__ import annotations

import hashlib
import json
import struct
import subprocess
import sys
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from hypothesis import given
from hypothesis import strategies as st

from paths import REPO_ROOT
from provider_fake_upstream import event_frame
from trialrun.base.plugins import Registry
from trialrun.gateway import Gateway
from trialrun.gateway import providers as providers_module
from trialrun.gateway.exchange import error_of
from trialrun.gateway.provider import Provider, RouteError, multipart_digest
from trialrun.gateway.providers import (
    BUILTIN_PROVIDERS,
    ENTRY_POINT_GROUP,
    ProviderPluginError,
    extract_usage,
    get_provider,
    provider,
    provider_names,
    register_provider,
)
from trialrun.gateway.providers.bedrock import event_payloads
from trialrun.gateway.routes import parse_route
from trialrun.gateway.usage import Usage

NAMES = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_-", min_size=1, max_size=8)
VALUES = st.text(max_size=12)
PAIRS = st.lists(st.tuples(NAMES, VALUES), max_size=5)


def test_builtins_load_only_when_first_named() -> None:
    code = (
        "import sys\n"
        "from trialrun.gateway.routes import parse_route\n"
        "parse_route('POST', '/run/r/openai/v1/chat/completions')\n"
        "print(sorted(m for m in sys.modules if m.startswith('trialrun.gateway.providers.')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "['trialrun.gateway.providers.openai']"


def test_the_registry_names_every_builtin_and_refuses_a_taken_name() -> None:
    assert provider_names()[:5] == ("openai", "anthropic", "azure", "gemini", "bedrock")
    assert get_provider("mistral") is None
    with pytest.raises(KeyError):
        provider("mistral")
    with pytest.raises(ValueError, match="already registered"):
        register_provider(provider("openai"))
    with pytest.raises(ProviderPluginError, match="without '/'"):
        register_provider(Nameless())


def test_the_builtins_are_declared_in_the_entry_point_group_users_get() -> None:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    declared = project["project"]["entry-points"][ENTRY_POINT_GROUP]
    assert declared == BUILTIN_PROVIDERS
    assert list(declared) == list(BUILTIN_PROVIDERS)  # the order messages list them in


class _EntryPoint:
    def __init__(self, name: str, value: str, target: object) -> None:
        self.name, self.value, self._target = name, value, target

    def load(self) -> object:
        return self._target


def test_an_installed_provider_is_found_by_its_entry_point_and_checked() -> None:
    echo = Echo()
    found = [
        _EntryPoint("echo-test", "acme.gateway:ECHO", echo),
        _EntryPoint("not-one", "acme.gateway:NOT_ONE", object()),
        _EntryPoint("misnamed", "acme.gateway:MISNAMED", echo),
        _EntryPoint("openai", "acme.gateway:RIVAL", echo),  # a built-in name is reserved
    ]
    registry = Registry(
        "gateway provider",
        ENTRY_POINT_GROUP,
        ProviderPluginError,
        providers_module._require_provider,
        builtins=BUILTIN_PROVIDERS,
        discover=lambda: found,
    )
    assert registry.names() == [*BUILTIN_PROVIDERS, "echo-test", "misnamed", "not-one"]
    assert registry.get("echo-test") is echo
    assert registry.get("openai") is provider("openai")
    with pytest.raises(ProviderPluginError, match=r"acme\.gateway:NOT_ONE.*is not a gateway prov"):
        registry.get("not-one")
    with pytest.raises(ProviderPluginError, match="named 'echo-test'; the entry point name"):
        registry.get("misnamed")


class Echo(Provider):
    """A third party's provider: POST /generate, tokens in a header."""

    name = "echo-test"
    served = "POST /generate"

    def endpoint(self, method: str, path: str) -> str:
        if path != "/generate":
            raise self.not_served(path)
        if method != "POST":
            raise self.wrong_method(method, path, "POST")
        return path

    def usage(
        self, method: str, path: str, content_type: str, body: str, headers: Mapping[str, str]
    ) -> Usage:
        return Usage(tokens_in=len(body), tokens_out=0)


class Nameless(Echo):
    name = ""


def test_a_provider_must_say_what_it_serves_and_what_usage_it_reports() -> None:
    class Unfinished(Provider):
        name = "unfinished"

        def endpoint(self, method: str, path: str) -> str:
            return path

    with pytest.raises(TypeError, match="usage"):
        Unfinished()  # type: ignore[abstract]
    with pytest.raises(TypeError, match="endpoint"):
        Provider()  # type: ignore[abstract]


def test_an_error_without_a_provider_is_read_in_the_common_shape() -> None:
    body = json.dumps({"error": {"message": "no such model"}})
    assert error_of(404, body) == "HTTP 404: no such model"
    assert error_of(500, json.dumps({"message": "bedrock shape"})) == "HTTP 500"
    assert error_of(500, json.dumps({"message": "x"}), provider("bedrock")) == "HTTP 500: x"
    assert error_of(200, body) is None


def test_a_registered_provider_is_routed_recorded_and_replayed(tmp_path: Path) -> None:
    import http.client

    from provider_fake_upstream import ProviderUpstream

    register_provider(Echo(), replace=True)
    assert "echo-test" in provider_names()
    with pytest.raises(RouteError, match="echo-test path '/other' is not served"):
        parse_route("POST", "/run/r/echo-test/other")
    upstream = ProviderUpstream()
    url = upstream.start()
    try:
        for mode in ("record", "replay"):
            gw = Gateway(upstreams={"echo-test": url if mode == "record" else "http://127.0.0.1:9"})
            gw.start()
            try:
                scope = gw.open_run("r", tmp_path / "r.jsonl", mode)  # type: ignore[arg-type]
                connection = http.client.HTTPConnection("127.0.0.1", int(gw.url.rsplit(":", 1)[1]))
                connection.request(
                    "POST", "/run/r/echo-test/generate", body=b'{"q": 1}',
                    headers={"Authorization": "Bearer k"},
                )  # fmt: skip
                response = connection.getresponse()
                status = response.status
                response.read()
                connection.close()
                (call,) = gw.close_run(scope.run_id, clean=True)
            finally:
                gw.stop()
            # The fake has no /generate: its 404 is what was recorded, and what replays.
            assert (status, call.status, call.replayed) == (404, 404, mode == "replay")
            assert call.tokens_in is not None and call.tokens_in > 0
    finally:
        upstream.stop()
    assert json.loads((tmp_path / "r.jsonl").read_text().splitlines()[1])["provider"] == "echo-test"


# ---- what a key holds --------------------------------------------------------------------


@given(PAIRS, VALUES)
def test_a_gemini_key_in_the_query_is_neither_stored_nor_matched(
    pairs: list[tuple[str, str]], secret: str
) -> None:
    gemini = provider("gemini")
    pairs = [(k, v) for k, v in pairs if k != "key"]
    plain = urlencode(pairs)
    keyed = urlencode([*pairs[:1], ("key", "AIza" + secret), *pairs[1:]])
    stored = gemini.stored_query(keyed)
    assert "key=" not in stored.replace("_key=", "").replace("-key=", "")
    path = "/v1beta/models/m:generateContent"
    assert gemini.endpoint_key("POST", path, stored) == gemini.endpoint_key(
        "POST", path, gemini.stored_query(plain)
    )


@given(PAIRS, VALUES, VALUES)
def test_a_presigned_bedrock_url_matches_whatever_its_signature(
    pairs: list[tuple[str, str]], first: str, second: str
) -> None:
    bedrock = provider("bedrock")
    path = "/model/m/converse"

    def signed(signature: str) -> str:
        query = urlencode([*pairs, ("X-Amz-Signature", signature), ("X-Amz-Date", signature)])
        return bedrock.stored_query(query)

    assert "X-Amz" not in signed(first)
    assert bedrock.endpoint_key("POST", path, signed(first)) == bedrock.endpoint_key(
        "POST", path, signed(second)
    )


@given(PAIRS, PAIRS)
def test_the_order_of_query_parameters_never_matters_but_their_values_do(
    first: list[tuple[str, str]], second: list[tuple[str, str]]
) -> None:
    openai = provider("openai")
    key = openai.endpoint_key("GET", "/v1/files", urlencode(first + second))
    assert key == openai.endpoint_key("GET", "/v1/files", urlencode(second + first))
    if sorted(first) != sorted(second):
        assert openai.endpoint_key("GET", "/v1/files", urlencode(first)) != (
            openai.endpoint_key("GET", "/v1/files", urlencode(second))
        )


def test_methods_are_part_of_the_key_but_not_for_the_generation_endpoints() -> None:
    openai = provider("openai")
    assert openai.endpoint_key("GET", "/v1/files/f", "") != openai.endpoint_key(
        "DELETE", "/v1/files/f", ""
    )
    # Cassettes recorded before the other endpoints were served keep their keys.
    assert openai.endpoint_key("POST", "/v1/chat/completions", "x=1") == "/v1/chat/completions"
    anthropic = provider("anthropic")
    assert anthropic.endpoint_key("POST", "/v1/messages", "beta=true") == "/v1/messages"


def test_azure_matches_without_the_api_version_and_names_the_deployment() -> None:
    azure = provider("azure")
    path = "/openai/deployments/prod/chat/completions"
    assert azure.endpoint_key("POST", path, "api-version=2024-10-21") == azure.endpoint_key(
        "POST", path, "api-version=2025-04-01-preview"
    )
    assert azure.requested_model(path, {"messages": []}) == "prod"
    assert azure.requested_model("/openai/v1/chat/completions", {"model": "gpt-4o"}) == "gpt-4o"


def test_bedrock_paths_are_stored_decoded_and_sent_encoded() -> None:
    bedrock = provider("bedrock")
    stored = bedrock.endpoint("POST", "/model/anthropic.claude-v2%3A1/invoke")
    assert stored == "/model/anthropic.claude-v2:1/invoke"
    assert bedrock.upstream_path(stored) == "/model/anthropic.claude-v2%3A1/invoke"
    assert bedrock.requested_model(stored, None) == "anthropic.claude-v2:1"
    with pytest.raises(RouteError, match="takes POST"):
        bedrock.endpoint("GET", "/model/m/converse")


# ---- multipart uploads -------------------------------------------------------------------


def multipart(boundary: str, fields: list[tuple[str, str | None, bytes]]) -> bytes:
    out = b""
    for name, filename, data in fields:
        disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
        out += f"--{boundary}\r\nContent-Disposition: {disposition}\r\n".encode()
        if filename:
            out += b"Content-Type: application/jsonl\r\n"
        out += b"\r\n" + data + b"\r\n"
    return out + f"--{boundary}--\r\n".encode()


@given(st.binary(max_size=200), st.text("abcdefXYZ0123456789", min_size=8, max_size=30))
def test_an_upload_is_matched_by_its_digest_whatever_the_boundary(
    data: bytes, boundary: str
) -> None:
    fields = [("purpose", None, b"batch"), ("file", "rows.jsonl", data)]
    first = multipart_digest(
        "multipart/form-data; boundary=first-boundary-0", multipart("first-boundary-0", fields)
    )
    second = multipart_digest(
        f"multipart/form-data; boundary=b{boundary}", multipart(f"b{boundary}", fields)
    )
    assert first == second
    assert first is not None and first[1]["sha256"] == hashlib.sha256(data).hexdigest()
    assert first[0] == {"name": "purpose", "value": "batch"}


@given(st.binary(max_size=300))
def test_a_body_that_is_not_multipart_is_matched_as_text(body: bytes) -> None:
    found = provider("openai").request_body("multipart/form-data; boundary=zz", body)
    assert found is not None  # a digest list, or the body's text: never an exception


# ---- AWS event streams -------------------------------------------------------------------


@given(st.lists(st.binary(max_size=100), max_size=5))
def test_event_stream_payloads_come_back_frame_by_frame(payloads: list[bytes]) -> None:
    data = b"".join(event_frame("chunk", p) for p in payloads)
    assert list(event_payloads(data)) == payloads


@given(st.binary(max_size=200))
def test_any_bytes_as_an_event_stream_never_raise(data: bytes) -> None:
    for payload in event_payloads(data):
        assert len(payload) <= len(data)
    text = data.decode("utf-8", "surrogateescape")
    extract_usage("bedrock", "/model/m/converse-stream", "application/vnd.amazon.eventstream", text)


def test_a_truncated_frame_ends_the_stream() -> None:
    frame = event_frame("metadata", b'{"usage": {"inputTokens": 1, "outputTokens": 2}}')
    assert list(event_payloads(frame[:-1])) == []
    bogus = struct.pack(">II", 8, 0) + b"\0" * 8  # shorter than a frame can be
    assert list(event_payloads(bogus + frame)) == []


def test_invoke_stream_usage_comes_from_the_last_chunks_metrics() -> None:
    import base64

    def chunk(inner: dict[str, Any]) -> bytes:
        encoded = base64.b64encode(json.dumps(inner).encode()).decode()
        return event_frame("chunk", json.dumps({"bytes": encoded}).encode())

    metrics = {"inputTokenCount": 11, "outputTokenCount": 7}
    data = chunk({"type": "content_block_delta"}) + chunk(
        {"type": "message_stop", "amazon-bedrock-invocationMetrics": metrics}
    )
    usage = extract_usage(
        "bedrock",
        "/model/m/invoke-with-response-stream",
        "application/vnd.amazon.eventstream",
        data.decode("utf-8", "surrogateescape"),
    )
    assert (usage.model, usage.tokens_in, usage.tokens_out) == ("m", 11, 7)


# ---- usage of Gemini answers -------------------------------------------------------------


def test_gemini_usage_of_a_json_array_stream_and_of_a_get() -> None:
    pieces = [
        {"usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 1}},
        {"usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 4},
         "modelVersion": "gemini-2.5-pro"},
    ]  # fmt: skip
    body = json.dumps(pieces)
    usage = extract_usage(
        "gemini", "/v1beta/models/m:streamGenerateContent", "application/json", body
    )
    assert (usage.model, usage.tokens_in, usage.tokens_out, usage.tokens_cached) == (
        "gemini-2.5-pro", 5, 4, None
    )  # fmt: skip
    got = extract_usage("gemini", "/v1beta/models/m", "application/json", body, method="GET")
    assert (got.tokens_in, got.tokens_out) == (None, None)
    assert extract_usage("gemini", "/v1beta/models/m:countTokens", "", '{"totalTokens": 3}') == (
        Usage()
    )
