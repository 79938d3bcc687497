"""Request normalization and keys: defaults, user rules, and idempotency (hypothesis)."""

from __future__ import annotations

import string
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trialrun.config.models import Normalization, ReplaceText
from trialrun.errors import ConfigError
from trialrun.gateway.normalize import RequestNormalizer, load_rules, request_key


def test_volatile_keys_are_dropped_at_the_top_level_only() -> None:
    body = {
        "model": "gpt-4o",
        "metadata": {"user_id": "device-1"},
        "user": "u-9",
        "stream_options": {"include_usage": True},
        "prompt_cache_key": "k",
        "safety_identifier": "s",
        "service_tier": "auto",
        "seed": 7,
        "stream": True,
        "tools": [{"parameters": {"properties": {"user": {"type": "string"}}}}],
    }
    assert RequestNormalizer().normalize(body) == {
        "model": "gpt-4o",
        "seed": 7,
        "stream": True,
        "tools": [{"parameters": {"properties": {"user": {"type": "string"}}}}],
    }


def test_volatile_text_is_replaced_in_message_text_only(tmp_path: Path) -> None:
    text = (
        "Today's date is 2025-01-06. Now: 2025-01-06T10:32:11.123+01:00. "
        f"id 123e4567-e89b-12d3-a456-426614174000, cwd {tmp_path}/src/app.py, "
        "scratch /tmp/tmpq8x/out.txt. Done."
    )
    body: dict[str, Any] = {
        "model": "gpt-4o-2024-08-06",
        "system": [{"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1; e=1"}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": text}]}],
        "temperature": 0.2,
    }
    normalized = RequestNormalizer(workdir=tmp_path).normalize(body)
    assert normalized["model"] == "gpt-4o-2024-08-06"  # model names keep their dates
    assert normalized["messages"][0]["content"][0]["text"] == (
        "Today's date is <date>. Now: <datetime>. id <uuid>, cwd <workdir>/src/app.py, "
        "scratch <tmp>. Done."
    )
    assert normalized["system"][0]["text"] == "x-anthropic-billing-header: <normalized>"
    assert body["messages"][0]["content"][0]["text"] == text  # the input is not changed


def test_defaults_can_be_switched_off_and_user_rules_apply_to_the_whole_body() -> None:
    rules = Normalization(
        strip_keys=["request_id"],
        replace_text=[ReplaceText(pattern=r"build-\d+", replacement="build-N")],
    )
    body = {"model": "build-12", "user": "u", "request_id": "r", "input": "2025-01-06"}
    assert RequestNormalizer(rules, defaults=False).normalize(body) == {
        "model": "build-N",
        "user": "u",
        "input": "2025-01-06",
    }
    assert RequestNormalizer(rules).normalize(body) == {"model": "build-N", "input": "<date>"}


def test_secrets_never_reach_the_normalized_request() -> None:
    body = {"messages": [{"role": "user", "content": "api_key=sk-live-0123456789abcdefXYZ"}]}
    normalized = RequestNormalizer().normalize(body)
    assert "0123456789abcdef" not in str(normalized)
    assert request_key("openai", "/v1/x", normalized) == request_key(
        "openai", "/v1/x", RequestNormalizer().normalize(
            {"messages": [{"role": "user", "content": "api_key=sk-live-ANOTHERKEY98765432"}]}
        )
    )  # fmt: skip


def test_the_key_separates_provider_path_stream_and_body() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    keys = {
        request_key("openai", "/v1/chat/completions", body),
        request_key("anthropic", "/v1/chat/completions", body),
        request_key("openai", "/v1/responses", body),
        request_key("openai", "/v1/chat/completions", {**body, "stream": True}),
        request_key("openai", "/v1/chat/completions", {**body, "model": "n"}),
    }
    assert len(keys) == 5
    # Key order and 1 vs 1.0 do not matter (canonical JSON).
    assert request_key("p", "/", {"a": 1, "b": 1.0}) == request_key("p", "/", {"b": 1, "a": 1})


def test_a_bad_user_regex_fails_at_construction() -> None:
    with pytest.raises(ConfigError, match="not a valid regular expression"):
        RequestNormalizer(Normalization(replace_text=[ReplaceText(pattern="(")]))


def test_load_rules_reads_yaml_and_json(tmp_path: Path) -> None:
    path = tmp_path / "rules.json"
    path.write_text('{"strip_paths": ["tools.0.description"], "replace_text": []}')
    assert load_rules(path).strip_paths == ["tools.0.description"]
    path.write_text('{\n  "replace_text": [\n    {"pattern": "x", "flags": "q"}\n  ]\n}\n')
    with pytest.raises(ConfigError, match=r"rules.json:3: replace_text flags may only"):
        load_rules(path)
    yaml_path = tmp_path / "rules.yaml"
    yaml_path.write_text("replace_text:\n  - pattern: 'x'\n    flags: 'q'\n")
    with pytest.raises(ConfigError, match=r"rules.yaml:3: replace_text flags may only"):
        load_rules(yaml_path)


# ---- idempotency ---------------------------------------------------------------------------

_VOLATILE = st.sampled_from(
    [
        "2025-01-06",
        "2025-01-06T10:32:11Z",
        "2025-01-06 10:32",
        "123e4567-e89b-12d3-a456-426614174000",
        "/tmp/tmpab12/x.py",
        "/var/folders/x/y/T/z.",
        "C:\\Users\\bob\\AppData\\Local\\Temp\\q\\f.txt",
        "x-anthropic-billing-header: cc=1",
        "<date>",
        "<tmp>",
        "/work/dir",
        "token=abc123",
        "sk-ABCDEFGHIJKLMNOPQRSTUV",
        "[REDACTED]",
    ]
)
_TEXT = st.lists(
    st.one_of(_VOLATILE, st.text(alphabet=string.printable + "é\u2028", max_size=12)), max_size=6
).map("".join)
_JSON: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | _TEXT,
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                ["content", "text", "role", "user", "metadata", "name", "type", "seed"]
            ),
            children,
            max_size=4,
        )
    ),
    max_leaves=12,
)
_BODY = st.fixed_dictionaries(
    {},
    optional={
        "model": _TEXT,
        "messages": _JSON,
        "input": _JSON,
        "system": _JSON,
        "metadata": _JSON,
        "user": _JSON,
        "tools": _JSON,
    },
)
_USER_RULES = Normalization(
    strip_keys=["name"],
    strip_paths=["tools.0"],
    replace_text=[
        ReplaceText(pattern=r"\d+", replacement="N"),
        ReplaceText(pattern="a+", flags="i"),
    ],
)


@settings(max_examples=300)
@given(body=_BODY | _JSON, defaults=st.booleans(), user_rules=st.booleans())
def test_normalizing_twice_changes_nothing(body: Any, defaults: bool, user_rules: bool) -> None:
    normalizer = RequestNormalizer(
        _USER_RULES if user_rules else None, defaults=defaults, workdir="/work/dir"
    )
    once = normalizer.normalize(body)
    assert normalizer.normalize(once) == once
    assert request_key("openai", "/v1/x", normalizer.normalize(once)) == request_key(
        "openai", "/v1/x", once
    )
