"""redact: the reference's vectors, every secret shape, the collateral damage we avoid."""

from __future__ import annotations

import copy
import json
import random
import re
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trialrun.base import redact as redact_module
from trialrun.base import secretshapes
from trialrun.base.redact import (
    REDACTED,
    holds_nothing_to_redact,
    is_sensitive_key,
    json_holds_nothing_to_redact,
    redact,
    redact_changed,
    redact_each,
    redact_shared,
    redact_text,
)

# Vectors where the receipt reference is wrong and we deliberately differ: input -> our output.
_FIXED_REFERENCE_STRINGS = {
    # reference false positive: "MONKEY" contains "KEY"
    "MONKEY=banana": "MONKEY=banana",
    # reference misses: lowercase / mixed-case names
    "aws_secret_access_key=abc": "aws_secret_access_key=[REDACTED]",
    "Passwd=abc": "Passwd=[REDACTED]",
}
_FIXED_REFERENCE_OBJECTS: dict[str, Any] = {
    # reference false positives on "monkey" and "keyboard"
    "secretCount": {
        "password": "",
        "token": None,
        "secretCount": 3,
        "Authorization": "Bearer [REDACTED]",
        "monkey": "x",
        "keyboard": "qwerty",
        "nested": [{"accessToken": "[REDACTED]"}],
    },
    # reference miss: a non-string value under a secret's name
    "auth": {"auth": {"credential": REDACTED}},
}


def _redaction_cases(conformance: Path) -> dict[str, Any]:
    cases: dict[str, Any] = json.loads((conformance / "redaction-cases.json").read_text())
    return cases


def test_every_string_vector(conformance: Path) -> None:
    strings = _redaction_cases(conformance)["strings"]
    assert len(strings) == 24
    for case in strings:
        text = case["input"]
        expected = _FIXED_REFERENCE_STRINGS.get(text, case["output"])
        out, changed = redact_changed(text)
        assert out == redact_text(text) == expected, text
        assert changed == (expected != text), text
        if text not in _FIXED_REFERENCE_STRINGS:
            assert changed == case["changed"], text
    assert set(_FIXED_REFERENCE_STRINGS) <= {case["input"] for case in strings}


def test_every_object_vector(conformance: Path) -> None:
    objects = _redaction_cases(conformance)["objects"]
    assert len(objects) == 3
    fixed = 0
    for case in objects:
        expected = case["output"]
        for marker, ours in _FIXED_REFERENCE_OBJECTS.items():
            if marker in case["input"]:
                expected = ours
                fixed += 1
        before = copy.deepcopy(case["input"])
        out, changed = redact_changed(case["input"])
        assert out == expected
        assert changed == (expected != case["input"])
        assert case["input"] == before  # never mutated
    assert fixed == 2


# ---- secret shapes in text ---------------------------------------------------------------

_JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpM"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("key sk-abcdefghijklmnop0123 end", "key [REDACTED] end"),
        ("sk-proj-abcDEF123_ghijklmnopqrst-uv", "[REDACTED]"),
        ("sk-ant-api03-abcdefghijklmnopqrstuv", "[REDACTED]"),
        ("ghp_abcdefghijklmnopqrstuvwxyz0123456789", "[REDACTED]"),
        ("(gho_abcdefghijklmnopqrst)", "([REDACTED])"),
        ("ghs_abcdefghijklmnopqrst ghu_abcdefghijklmnopqrst", "[REDACTED] [REDACTED]"),
        ("github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "[REDACTED]"),
        (
            "slack xoxb-1234567890-abcdefghij and xoxp-1234567890-zz",
            "slack [REDACTED] and [REDACTED]",
        ),
        ("AIzaSyA-abcdefghijklmnopqrstuvwxyz012345", "[REDACTED]"),
        ("id=AKIAABCDEFGHIJKLMNOP", "id=[REDACTED]"),
        ("ASIAABCDEFGHIJKLMNOP trailing", "[REDACTED] trailing"),
        (
            "aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "aws_secret_access_key=[REDACTED]",
        ),
        ("AWS_SECRET_ACCESS_KEY: wJalrXUtnFEMI/K7MDENG", "AWS_SECRET_ACCESS_KEY: [REDACTED]"),
        (f"token {_JWT}", "token [REDACTED]"),
        ("Authorization: Bearer abcdef1234567890xyz", "Authorization: Bearer [REDACTED]"),
        ("curl -H 'bearer abcdef1234567890xyz'", "curl -H 'bearer [REDACTED]'"),
        ("Authorization: Basic dXNlcjpwYXNzd29yZA==", "Authorization: Basic [REDACTED]"),
        ("https://user:pa55w0rd@db.example.com/x", "https://user:[REDACTED]@db.example.com/x"),
        ("redis://:s3cret@cache:6379/0", "redis://:[REDACTED]@cache:6379/0"),
        ("npm_abcdefghijklmnopqrstuvwxyz0123456789", "[REDACTED]"),
        ("//registry/:_authToken=abc123", "//registry/:_authToken=[REDACTED]"),
        ("-----BEGIN PRIVATE KEY-----\nabc\n-----END PRIVATE KEY-----", "[REDACTED]"),
        (
            "a -----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY----- b",
            "a [REDACTED] b",
        ),
        ("cut -----BEGIN EC PRIVATE KEY-----\nMHcCAQEE", "cut [REDACTED]"),
        (
            'API_KEY=hunter2 and DB_PASSWORD="p w" ok',
            "API_KEY=[REDACTED] and DB_PASSWORD=[REDACTED] ok",
        ),
        ("export GH_TOKEN='abc def'", "export GH_TOKEN=[REDACTED]"),
        ("--password=hunter2 --verbose", "--password=[REDACTED] --verbose"),
        ("x-api-key: abc123", "x-api-key: [REDACTED]"),
        ("Set-Cookie: sid=abc; Path=/", "Set-Cookie: [REDACTED]; Path=/"),
        ("?access_token=abc&state=1", "?access_token=[REDACTED]"),
        ("x=PASSWORD=abc", "x=PASSWORD=[REDACTED]"),
        ('PASSWORD="unterminated', "PASSWORD=[REDACTED]"),
        ('{"password": "hunter2", "n": 1}', '{"password": "[REDACTED]", "n": 1}'),
        ('{"client_secret": 12345}', '{"client_secret": "[REDACTED]"}'),
        ("{'apiKey': 'abc'}", "{'apiKey': '[REDACTED]'}"),
        ("\u0130 token=abc", "\u0130 token=[REDACTED]"),  # lower() changes the length here
    ],
)
def test_secret_shapes(text: str, expected: str) -> None:
    assert redact_text(text) == expected
    assert redact_text(expected) == expected


def test_redacted_json_text_stays_json() -> None:
    text = json.dumps({"password": 'p"w', "token": 5, "list": [{"secret": True}], "n": 1})
    assert json.loads(redact_text(text)) == {
        "password": REDACTED,
        "token": REDACTED,
        "list": [{"secret": REDACTED}],
        "n": 1,
    }


@pytest.mark.parametrize(
    "text",
    [
        "sk-short",
        "task-abcdefghijklmnopqrstuvwxyz",  # no word boundary before "sk-"
        "bearer short",
        "password hunter2",
        "tokens: 100 and PATH=/usr/bin",
        "max_tokens=4096 token_count: 12 tokens_in=3",
        "MONKEY=banana keyboard: qwerty",
        "author: Ada, auth_method: oauth",
        "reset_password_url=https://example.com/reset",
        "PWD=/home/ada OLDPWD=/tmp",
        "password == expected",
        "https://example.com:8443/path?q=1",
        "ghp_short AKIAshort eyJ.x.y npm_short",
        "API_KEY=[REDACTED]",
        "Ünïcödé text: nothing to hide here",
        "",
        # near misses of the provider shapes in secretshapes
        "sha256 " + "0123456789abcdef" * 4,
        "commit " + "0123456789abcdef" * 2 + "01234567",
        "id 123e4567-e89b-12d3-a456-426614174000",
        "base64 aGVsbG8gd29ybGQ= and ask_live_demo risk_test_x",
        "skills dapper Skip SKU SG.x hf_x glpat-x task_live_123 version 1.2.3",
        "https://hooks.slack.com/services/",
        "Mozilla/5.0.AppleWebKit.537 file.tar.gz a.b.c",
        "value " + "abcdefghij/KLMNOPQRST" * 2,  # 40 base64 characters, no AWS key id beside
    ],
)
def test_text_without_secrets_is_untouched(text: str) -> None:
    assert redact_text(text) == text
    assert redact_changed(text) == (text, False)


# ---- key names ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    [
        "api_key", "apiKey", "APIKey", "apikey", "x-api-key", "X-Api-Key", "access_token",
        "accessToken", "refresh_token", "auth_token", "authtoken", "Authorization",
        "proxy-authorization", "password", "DB_PASSWORD", "passwd", "Passwd", "pwd", "secret",
        "client_secret", "SECRET_X", "private_key", "privateKey", "cookie", "set-cookie",
        "session_id", "sessionid", "sessionId", "credentials", "credential", "token", "id_token",
        "github_token", "GH_TOKEN", "aws_secret_access_key", "csrf_token", "password_hash",
    ],
)  # fmt: skip
def test_sensitive_key_names(key: str) -> None:
    assert is_sensitive_key(key)


@pytest.mark.parametrize(
    "key",
    [
        "token_count", "tokens_in", "tokens_out", "max_tokens", "maxTokens", "auth_method",
        "author", "auth", "monkey", "keyboard", "keys", "key", "secretCount", "token_type",
        "reset_password_url", "next_page_token", "page_token", "input_tokens", "totalTokens",
        "publicKey", "signature", "redacted", "PWD", "OLDPWD", "tool", "name", "pass", "passed",
        "secret_name", "expires_in", "", "_", "123",
    ],
)  # fmt: skip
def test_harmless_key_names(key: str) -> None:
    assert not is_sensitive_key(key)


# ---- values ------------------------------------------------------------------------------


def test_everything_under_a_sensitive_key_is_replaced_except_emptiness() -> None:
    value = {
        "password": 1234,
        "token": True,
        "secret": {"nested": "x"},
        "credentials": ["a", "b"],
        "api_key": None,
        "cookie": "",
        "session_id": [],
        "private_key": {},
        "Authorization": "Basic dXNlcjpwYXNz",
        "proxy-authorization": "Bearer [REDACTED]",
        "auth_token": REDACTED,
    }
    out, changed = redact_changed(value)
    assert changed is True
    assert out == {
        "password": REDACTED,
        "token": REDACTED,
        "secret": REDACTED,
        "credentials": REDACTED,
        "api_key": None,
        "cookie": "",
        "session_id": [],
        "private_key": {},
        "Authorization": "Basic [REDACTED]",
        "proxy-authorization": "Bearer [REDACTED]",
        "auth_token": REDACTED,
    }
    assert redact_changed(out) == (out, False)


def test_tool_names_are_values_and_counts_are_kept() -> None:
    summary = {
        "tool": "reset_password",
        "tool_calls_by_name": {"reset_password": 2, "get_token": 1},
        "tool_errors_by_name": {"reset_password": 1},
        "output": {"auth_method": "oauth", "token_count": 12, "author": "Ada", "max_tokens": 9},
    }
    assert redact_changed(summary) == (summary, False)


def test_data_keys_are_configurable() -> None:
    value = {"by_case": {"password_reset": {"passed": True, "password": "x"}}}
    assert redact(value, data_keys={"by_case"}) == {
        "by_case": {"password_reset": {"passed": True, "password": REDACTED}}
    }
    # without it, the case id is judged as a field name
    assert redact(value, data_keys=frozenset()) == {"by_case": {"password_reset": REDACTED}}


def test_strings_everywhere_go_through_redact_text() -> None:
    value = {"a": ["Bearer abcdefghijklmnop", ("ghp_abcdefghijklmnopqrstuvwxyz",)], "n": 1.5}
    out, changed = redact_changed(value)
    assert out == {"a": ["Bearer [REDACTED]", ("[REDACTED]",)], "n": 1.5}
    assert changed is True
    assert isinstance(out["a"][1], tuple)


def test_input_is_never_mutated_and_output_is_a_copy() -> None:
    value: dict[str, Any] = {
        "keep": [{"x": 1}],
        "password": "p",
        "deep": {"s": "sk-abcdefghijklmnopqrstu"},
    }
    before = copy.deepcopy(value)
    out = redact(value)
    assert value == before
    assert out["keep"] == value["keep"]
    assert out["keep"] is not value["keep"]
    assert out["keep"][0] is not value["keep"][0]


def test_non_json_leaves_pass_through() -> None:
    marker = object()
    out, changed = redact_changed({"thing": marker, 3: "x", None: [b"bytes"]})
    assert out == {"thing": marker, 3: "x", None: [b"bytes"]}
    assert out["thing"] is marker
    assert changed is False


# ---- properties --------------------------------------------------------------------------

_FRAGMENTS = [
    "sk-abcdefghijklmnopqrstu", "ghp_abcdefghijklmnopqrstuvwxyz", "AKIAABCDEFGHIJKLMNOP",
    "Bearer abcdefghijklmnop", "bearer ", "PASSWORD=", "password: ", '"token": ', "'secret':",
    "https://u:p@h/", "://", "=", ":", '"', "'", " ", "\n", "}", "]", REDACTED, "MONKEY=",
    "-----BEGIN PRIVATE KEY-----", "-----END PRIVATE KEY-----", _JWT, "x", "\u0130", "Basic ",
    "github_pat_abcdefghijklmnopqrstuv", "npm_abcdefghijklmnopqrstuvwxyz0123",
    # the shapes of secretshapes, whole and in pieces
    "sk_live_abcdefghijklmnop", "rk_test_", "whsec_abcdefghijklmnopqrstuvwxyz01", "hf_",
    "hf_abcdefghijklmnopqrstuvwxyzABCDEFGH", "glpat-abcdefghijklmnopqrst", "ya29.", "SG.",
    "ya29.abcdefghijklmnopqrstuvwx", "SG.abcdefghijklmnopqrstuv.abcdefghijklmnopqrstuv",
    "SK0123456789abcdef0123456789abcdef", "dapi0123456789abcdef0123456789abcdef", "sig=",
    "MTIzNDU2Nzg5MDEyMzQ1Njc4OTAx.GhIjKl.abcdefghijklmnopqrstuvwxyz01234", ".GhIjKl.",
    "https://hooks.slack.com/services/T0/B0/abcdefghijklmnopqrstuvwx", "AccountKey=",
    "sig=abcdefghij%2Bklmnopqrst", "pypi-AgEIcHlwaS5vcmcabcdefghijklmnopqrstuvwxyz0123456789ABC",
    "-----BEGIN PGP PRIVATE KEY BLOCK-----", "-----END PGP PRIVATE KEY BLOCK-----",
    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "xapp-1-abcdefghijklmn",
]  # fmt: skip
_secretish_text = st.lists(st.sampled_from(_FRAGMENTS) | st.text(max_size=5), max_size=12).map(
    "".join
)
_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _secretish_text,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(["password", "token_count", "n", "apiKey"]) | st.text(),
            children,
            max_size=4,
        )
    ),
    max_leaves=15,
)


_gate_text = st.lists(
    st.sampled_from(
        [*_FRAGMENTS, "BEARER", "Bearer", "pa\u017fs=", "\u212aey: ", "PWD", "x-y_z", '{"q":1}']
    )
    | st.text(max_size=5),
    max_size=12,
).map("".join)


@given(_gate_text)
def test_the_fast_gates_skip_only_what_no_rule_would_change(text: str) -> None:
    # The character class clears only text the full alternation clears too.
    if redact_module._ANYTHING.search(text):
        assert redact_module._MAYBE_SECRET.search(text)
    # Text without any shape literal goes through the shape rules unchanged.
    if not redact_module._SHAPES.search(text):
        assert redact_module._redact_shapes(text) == text
    # Text whose lowercase holds no noun has no assignment to look at.
    lowered = text.lower()
    if len(lowered) == len(text) and not any(noun in lowered for noun in redact_module._NOUNS):
        assert redact_module._assignment_candidates(text, lowered) == []


@given(_gate_text)
def test_short_text_redacts_the_same_from_the_cache_and_without_gates(text: str) -> None:
    expected = redact_module._redact_any_text(text)
    assert redact_text(text) == expected
    assert redact_text(text) == expected  # the second time from the cache


@given(_secretish_text)
def test_redact_text_is_idempotent(text: str) -> None:
    once = redact_text(text)
    assert redact_text(once) == once


@given(_json_values)
def test_redact_is_idempotent_and_never_raises(value: Any) -> None:
    once, changed = redact_changed(value)
    assert redact_changed(once) == (once, False)
    assert changed == (once != value)


# ---- proving a value clean without redacting it (holds_nothing_to_redact, redact_shared) ------

_LITERAL_PIECES = [
    *redact_module._NEEDED_LITERALS, "ghp_", "gho_", "ghx_", "github_pat_", "gh", "tok", "en",
    "coo", "kie", "np", "m_", "authori", "z", "ai", "za", "ey", "j", "-----", "begin", ":/", "/",
    "as", "ia", "se", "ssion", "cret", "s", "k", "-", "p", "glpat-", "gl", "pat-", "sk",
    "0123456789abcdef" * 2, ".abcdef.", "a" * 27, "hooks.slack.com", "ya29", ".", "py", "da",
    "pi", "whs", "ec_", "api", "_org_", "i_", "live_", "test", "x", "app-", "ig=", "g.", "f_",
]  # fmt: skip
_scan_text = st.lists(
    st.sampled_from(_LITERAL_PIECES).map(lambda piece: piece.upper())
    | st.sampled_from(_LITERAL_PIECES)
    | st.sampled_from(["\u0130", "\u212a", "\u017f", "\u03a3", "\ud800", "é", "☕"])
    | st.text(max_size=3),
    max_size=10,
).map("".join)


def _holds_a_literal(text: str) -> bool:
    lowered = text.lower()
    return any(literal in lowered for literal in redact_module._NEEDED_LITERALS) or bool(
        re.search(redact_module._GITHUB + "|" + secretshapes.NEEDED_PATTERNS, lowered)
    )


@given(_scan_text)
def test_the_one_pass_scan_finds_exactly_the_needed_literals(text: str) -> None:
    assert redact_module._holds_no_needed_literal(text) == (not _holds_a_literal(text))


@pytest.mark.parametrize("literal", [*redact_module._NEEDED_LITERALS, "ghs_", "github_pat_"])
def test_every_needed_literal_is_found_in_any_case_and_place(literal: str) -> None:
    for text in (literal, "x" + literal.upper() + "y", "a b " + literal.title() + " c"):
        assert not redact_module._holds_no_needed_literal(text), text


def test_every_secret_name_holds_a_needed_literal() -> None:
    # A sensitive key must never pass the scan: every word that makes a name sensitive holds a
    # literal the scan looks for (this fails when a secret word is added without one).
    words = {*redact_module._SECRET_WORDS, *redact_module._SECRET_SUFFIXES, "key", "session"}
    for word in words:
        assert _holds_a_literal(word), word


@given(_scan_text | _secretish_text)
def test_text_the_scan_clears_is_never_changed(text: str) -> None:
    if redact_module._holds_no_needed_literal(text):
        assert redact_text(text) == text
        long_text = text + " padding" * (redact_module._SHORT // 8 + 1)  # the long-text path
        assert redact_text(long_text) == long_text


_clean_or_not_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False)
    | _scan_text
    | _secretish_text,
    lambda children: (
        st.lists(children, max_size=4)
        | st.tuples(children, children)
        | st.dictionaries(
            st.sampled_from(["password", "token_count", "n", "apiKey", "q", "TOKEN"])
            | st.integers()
            | _scan_text,
            children,
            max_size=4,
        )
    ),
    max_leaves=15,
)


@given(_clean_or_not_values)
def test_a_value_proven_clean_is_what_redact_returns(value: Any) -> None:
    before = copy.deepcopy(value)
    clean = holds_nothing_to_redact(value)
    assert holds_nothing_to_redact(value) == clean  # the second time from the caches
    expected, changed = redact_changed(value)
    if clean:
        assert (expected, changed) == (value, False)
        assert redact_shared(value) is value
    else:
        assert redact_shared(value) == expected
    assert redact_each([value, value]) == [expected, expected]
    assert value == before


@given(_clean_or_not_values)
def test_json_text_proven_clean_means_redact_changes_nothing(value: Any) -> None:
    # Tuples and integer keys are written as JSON writes them; the proof reads only the text.
    for text in (
        json.dumps(value, ensure_ascii=False, default=str),
        json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str),
    ):
        if json_holds_nothing_to_redact(text):
            assert redact_changed(value)[1] is False
            assert holds_nothing_to_redact(value)


def test_json_text_with_a_secret_anywhere_is_not_proven_clean() -> None:
    for value in (
        {"outer": [{"inner": {"PASSWORD": 5}}]},
        ["fine", "Bearer abcdefghijklmnop"],
        {"url": "https://user:pw@host"},
        {"k": "\u212aey"},  # the Kelvin sign lowercases to k
        {"q": 'a "sk-abcdefghijklmnopqrstu" b'},
    ):
        text = json.dumps(value, ensure_ascii=False)
        assert not json_holds_nothing_to_redact(text), text
    assert json_holds_nothing_to_redact(json.dumps({"q": "café ☕", "n": [1, None]}))


def test_secrets_deep_inside_values_are_never_proven_clean() -> None:
    nested = {"a": [1, 2.5, 10**30, {"b": ("café", {"note": "Bearer abcdefghijklmnop"})}]}
    assert not holds_nothing_to_redact(nested)
    assert redact_shared(nested)["a"][3]["b"][1]["note"] == "Bearer " + REDACTED
    keyed = {"outer": [{"inner": {"PASSWORD": 5}}]}
    assert not holds_nothing_to_redact(keyed)
    assert redact_shared(keyed) == {"outer": [{"inner": {"PASSWORD": REDACTED}}]}
    clean = {"q": "café ☕ \U0001d11e", "n": 1e300, "big": 2**70, "xs": [None, True, -0.0]}
    assert holds_nothing_to_redact(clean)
    assert redact_shared(clean) is clean


def test_subclasses_take_the_general_path() -> None:
    class Text(str):
        pass

    class Mapping(dict[str, Any]):
        pass

    secret = Text("sk-abcdefghijklmnopqrstu")
    assert not holds_nothing_to_redact({"v": secret})
    assert redact_shared({"v": secret}) == {"v": REDACTED}
    mapping = Mapping(q="x")
    assert not holds_nothing_to_redact(mapping)
    assert type(redact_shared(mapping)) is dict  # as redact returns it


def test_the_caches_stay_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(redact_module, "_CACHE_ENTRIES", 8)
    monkeypatch.setattr(redact_module, "_CLEAN_TEXTS", {})
    monkeypatch.setattr(redact_module, "_CLEAN_KEYS", set())
    for i in range(50):
        assert holds_nothing_to_redact({f"k{i}": f"value {i}"})
        assert not holds_nothing_to_redact({f"k{i}": f"password={i}"})
    assert len(redact_module._CLEAN_TEXTS) <= 8
    assert len(redact_module._CLEAN_KEYS) <= 8


def test_a_cycle_raises_as_redact_raises() -> None:
    looped: list[Any] = []
    looped.append(looped)
    with pytest.raises(RecursionError):
        redact(looped)
    with pytest.raises(RecursionError):
        redact_shared(looped)


# ---- speed -------------------------------------------------------------------------------


def _best_of(runs: int, func: Any, arg: str) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.thread_time()
        func(arg)
        best = min(best, time.thread_time() - start)
    return best


@pytest.mark.slow
def test_large_text_without_secrets_is_fast() -> None:
    rnd = random.Random(7)
    # dense with separators and with nouns that name no secret ("tokens", "key")
    sentence = (
        "the agent called search and got results: status=ok count=12 page 3 of 9 at "
        "https://example.com/api/v1/items while the tokens used were 512 and the key "
        'question remained {"id": 7, "name": "widget", "price": 9.5}'
    )
    words = sentence.split()
    text = " ".join(rnd.choice(words) for _ in range(800_000))[:5_000_000]
    assert len(text) == 5_000_000
    assert redact_text(text) == text
    # One regex pass over the words of the same text is the yardstick: a scanner for secrets
    # should cost no more than tokenizing the text once (measured: about 0.3x).
    word_pattern = re.compile(r"\w+")
    baseline = _best_of(3, word_pattern.findall, text)
    elapsed = _best_of(3, redact_text, text)
    assert elapsed <= 2 * baseline, f"redact_text took {elapsed / baseline:.1f}x a word scan"
