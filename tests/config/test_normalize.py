"""Normalization: RunLedger's semantics, suite+case merge, and idempotency (by construction)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trialrun.base.jsonpath import split_path
from trialrun.config.models import Normalization, ReplaceText
from trialrun.config.normalize import (
    MAX_TEXT_PASSES,
    compile_text_rules,
    normalize,
    normalize_text,
)
from trialrun.errors import ConfigError


def text_rule(pattern: str, replacement: str = "", flags: str = "") -> ReplaceText:
    return ReplaceText(pattern=pattern, replacement=replacement, flags=flags)


# -- RunLedger's semantics ----------------------------------------------------------------------


def test_strip_keys_at_any_depth() -> None:
    rules = Normalization(strip_keys=["timestamp", "id"])
    payload = {
        "id": "root",
        "name": "demo",
        "meta": {"timestamp": "2025-01-01T00:00:00Z", "keep": True},
        "items": [{"id": "a"}, {"id": "b", "keep": 1}],
    }
    assert normalize(payload, rules) == {
        "name": "demo",
        "meta": {"keep": True},
        "items": [{}, {"keep": 1}],
    }


def test_strip_paths_and_replace_paths() -> None:
    rules = Normalization(
        strip_paths=["meta.seed", "items.*.rand"], replace_paths={"meta.request_id": "<id>"}
    )
    payload = {
        "meta": {"seed": 42, "request_id": "abc-123"},
        "items": [{"rand": 1, "value": 10}, {"rand": 2, "value": 20}],
    }
    assert normalize(payload, rules) == {
        "meta": {"request_id": "<id>"},
        "items": [{"value": 10}, {"value": 20}],
    }


def test_replace_text_on_every_string_value_but_not_keys() -> None:
    rules = Normalization(replace_text=[text_rule(r"\d{4}-\d{2}-\d{2}", "<date>")])
    payload = {"message": "created on 2025-01-30", "nested": ["2024-12-01 ok", 20250130],
               "2025-01-30": "key kept"}  # fmt: skip
    assert normalize(payload, rules) == {
        "message": "created on <date>",
        "nested": ["<date> ok", 20250130],
        "2025-01-30": "key kept",
    }


def test_replace_paths_only_where_the_path_exists() -> None:
    rules = Normalization(replace_paths={"meta.request_id": "<id>", "a.*.b": 0, "list.1": "x"})
    assert normalize({"meta": {}}, rules) == {"meta": {}}
    assert normalize({"meta": "scalar"}, rules) == {"meta": "scalar"}
    assert normalize({"a": {"p": {"b": 1}, "q": {"c": 1}}}, rules) == {
        "a": {"p": {"b": 0}, "q": {"c": 1}}
    }
    assert normalize({"list": ["a"]}, rules) == {"list": ["a"]}
    assert normalize({"list": ["a", "b", "c"]}, rules) == {"list": ["a", "x", "c"]}


def test_paths_index_lists_and_wildcards_match_keys_and_indexes() -> None:
    rules = Normalization(strip_paths=["*.secret", "rows.1.tmp", "rows.01.keep"])
    payload = {
        "a": {"secret": 1, "x": 2},
        "b": [{"secret": 3}],  # "*.secret" on a list item needs another segment
        "rows": [{"tmp": 1, "keep": 1}, {"tmp": 2, "keep": 2}],
    }
    assert normalize(payload, rules) == {
        "a": {"x": 2},
        "b": [{"secret": 3}],
        "rows": [{"tmp": 1, "keep": 1}, {"keep": 2}],
    }


def test_order_is_strip_keys_strip_paths_replace_paths_replace_text() -> None:
    rules = Normalization(
        strip_keys=["gone"],
        strip_paths=["meta.drop"],
        replace_paths={"meta.gone": "never set", "meta.drop": "never set", "meta.id": "id-7"},
        replace_text=[text_rule(r"\d", "#")],
    )
    payload = {"meta": {"gone": 1, "drop": 2, "id": "x"}}
    # The replacement value is text-normalized too, since replace_text comes last.
    assert normalize(payload, rules) == {"meta": {"id": "id-#"}}


def test_replace_text_flags() -> None:
    assert normalize("Token TOKEN", Normalization(replace_text=[text_rule("token", "T", "i")])) == (
        "T T"
    )
    multiline = Normalization(replace_text=[text_rule("^x", "-", "m")])
    assert normalize("x\nx", multiline) == "-\n-"
    dotall = Normalization(replace_text=[text_rule("a.b", "_", "s")])
    assert normalize("a\nb", dotall) == "_"
    assert normalize("a\nb", Normalization(replace_text=[text_rule("a.b", "_")])) == "a\nb"


def test_replace_text_with_group_references() -> None:
    rules = Normalization(replace_text=[text_rule(r"(\w+)@example\.com", r"\1@<domain>")])
    assert normalize({"to": "ann@example.com"}, rules) == {"to": "ann@<domain>"}


def test_split_path_ignores_empty_segments() -> None:
    assert split_path("a..b.0.") == ["a", "b", "0"]
    assert normalize({"a": 1}, Normalization(strip_paths=["", "."])) == {"a": 1}


def test_suite_and_case_rules_merge() -> None:
    suite = Normalization(
        strip_keys=["ts"], replace_paths={"a": "suite", "b": "suite"},
        replace_text=[text_rule("x", "X")],
    )  # fmt: skip
    case = Normalization(
        strip_keys=["id"], replace_paths={"b": "case"}, replace_text=[text_rule("X", "Y")]
    )
    merged = suite.merged(case)
    assert merged.strip_keys == ["ts", "id"]
    assert merged.replace_paths == {"a": "suite", "b": "case"}
    payload = {"ts": 1, "id": 2, "a": 0, "b": 0, "c": "x"}
    # Suite rules run first: x -> X, then the case's X -> Y.
    assert normalize(payload, merged) == {"a": "suite", "b": "case", "c": "Y"}


# -- copies and caching -------------------------------------------------------------------------


def test_empty_rules_return_the_value_itself() -> None:
    value = {"a": [1]}
    assert normalize(value, Normalization()) is value


def test_the_input_is_never_modified_and_nothing_is_shared() -> None:
    value = {"a": [{"b": 1, "t": 2}], "c": {"d": "x"}}
    rules = Normalization(
        strip_paths=["a.0.b"], replace_paths={"c.d": {"deep": [1]}, "a.0.t": {"deep": [1]}}
    )
    result = normalize(value, rules)
    assert value == {"a": [{"b": 1, "t": 2}], "c": {"d": "x"}}
    result["c"]["d"]["deep"].append(2)
    assert result["a"][0]["t"] == {"deep": [1]}
    assert rules.replace_paths["c.d"] == {"deep": [1]}
    untouched = normalize(value, Normalization(strip_keys=["zzz"]))
    assert untouched == value and untouched["a"] is not value["a"]


def test_text_rules_are_compiled_once() -> None:
    rules = Normalization(replace_text=[text_rule("cache-me-[0-9]", "N")])
    normalize("cache-me-1", rules)
    before = compile_text_rules.cache_info().hits
    normalize("cache-me-2", rules)
    assert compile_text_rules.cache_info().hits == before + 1


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        (text_rule("(", "x"), "pattern '\\(' is not a valid regular expression"),
        (text_rule("a", "x", "g"), "flags may only combine i, m and s; found 'g'"),
        (text_rule("a", r"\1"), re.escape(r"replacement '\\1' for pattern 'a' is invalid")),
    ],
)
def test_invalid_text_rules_are_config_errors(rule: ReplaceText, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        normalize("a", Normalization(replace_text=[rule]))


# -- idempotency --------------------------------------------------------------------------------


def test_the_peer_counter_example_is_idempotent() -> None:
    rules = Normalization(replace_text=[text_rule("A", "<a>", "i")])
    once = normalize({"name": "Alice and Anna"}, rules)
    assert once == {"name": "<a>lice <a>nd <a>nn<a>"}
    assert normalize(once, rules) == once
    assert normalize("<a>", rules) == "<a>"


def test_a_replacement_that_embeds_its_match_is_stable() -> None:
    rules = Normalization(replace_text=[text_rule(r"sk-\w+", "sk-REDACTED")])
    once = normalize("key sk-abc123 and sk-REDACTED", rules)
    assert once == "key sk-REDACTED and sk-REDACTED"
    assert normalize(once, rules) == once


def test_a_chain_that_feeds_itself_runs_to_a_fixed_point() -> None:
    # "ab" -> "a" leaves a new "ab" behind when b's repeat; a single pass would not be stable.
    rules = Normalization(replace_text=[text_rule("ab", "a")])
    assert normalize("abbb", rules) == "a"


def test_a_chain_without_a_fixed_point_leaves_the_text_as_given() -> None:
    rules = Normalization(replace_text=[text_rule("a", r"<\g<0>>")])  # grows on every pass
    assert normalize("a cat", rules) == "a cat"
    assert normalize("no match", rules) == "no match"
    slow = Normalization(replace_text=[text_rule("ab", "a")])
    long = "a" + "b" * (MAX_TEXT_PASSES + 5)
    assert normalize(long, slow) == long
    assert normalize(normalize(long, slow), slow) == long


def test_stripping_a_list_index_leaves_a_null_so_a_second_pass_is_a_no_op() -> None:
    rules = Normalization(strip_paths=["items.0", "items.2.x", "all.*"])
    value = {"items": [1, 2, {"x": 1, "y": 2}], "all": [1, 2]}
    once = normalize(value, rules)
    assert once == {"items": [None, 2, {"y": 2}], "all": []}
    assert normalize(once, rules) == once


@given(st.text(alphabet="ab<>", max_size=12))
def test_text_normalization_matches_re_sub_for_a_rule_that_is_already_stable(text: str) -> None:
    # When one re.sub pass is already idempotent, the result is exactly RunLedger's.
    [rule] = compile_text_rules((("a+", "", "N"),))
    assert normalize_text(text, [rule]) == re.sub("a+", "N", text)


# Small alphabets make collisions between patterns, replacements and text likely.
PATTERNS = st.one_of(
    st.text(alphabet="ab<", min_size=1, max_size=3),
    st.sampled_from(["a|b", "a+", "b*", "^a", "a$", ".", "(a)b", "a(?=b)", "\\ba", "(?:ab)+", ""]),
)
REPLACEMENTS = st.one_of(
    st.text(alphabet="ab<>", max_size=4),
    st.sampled_from(["<a>", "a<a>", "\\g<0>\\g<0>", "<\\g<0>>", "b\\g<0>", ""]),
)


@st.composite
def text_rules(draw: st.DrawFn) -> ReplaceText:
    pattern = draw(PATTERNS)
    replacement = draw(REPLACEMENTS)
    if draw(st.booleans()) and pattern and "\\" not in replacement:
        replacement = draw(st.sampled_from(["<", "", "b"])) + pattern.strip("^$()+*?.|") + ">"
    flags = draw(st.sampled_from(["", "i", "m", "s", "ims"]))
    return ReplaceText(pattern=pattern, replacement=replacement, flags=flags)


@settings(max_examples=400)
@given(st.text(alphabet="abAB<> ", max_size=16), st.lists(text_rules(), min_size=1, max_size=3))
def test_text_normalization_is_idempotent(text: str, rules: list[ReplaceText]) -> None:
    normalization = Normalization(replace_text=rules)
    once = normalize(text, normalization)
    assert normalize(once, normalization) == once


KEYS = st.sampled_from(["a", "b", "c", "0", "1"])
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.text(alphabet="ab<>", max_size=5),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(KEYS, children, max_size=3),
    max_leaves=12,
)
PATHS = st.lists(st.sampled_from(["a", "b", "c", "0", "1", "*"]), min_size=1, max_size=3).map(
    ".".join
)


@settings(max_examples=400)
@given(
    JSON,
    st.builds(
        Normalization,
        strip_keys=st.lists(KEYS, max_size=2),
        strip_paths=st.lists(PATHS, max_size=3),
        replace_paths=st.dictionaries(PATHS, JSON, max_size=3),
        replace_text=st.lists(text_rules(), max_size=2),
    ),
)
def test_normalization_is_idempotent_for_any_value_and_rules(
    value: Any, rules: Normalization
) -> None:
    once = normalize(value, rules)
    assert normalize(once, rules) == once
