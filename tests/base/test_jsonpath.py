"""Dotted JSON paths: one walk (base.jsonpath) behind normalization and incident redaction."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from trialrun.base.jsonpath import dotted, places, split_path
from trialrun.config.models import Normalization
from trialrun.config.normalize import normalize
from trialrun.incident.importers import apply_redact_paths

DOCUMENT = {"calls": [{"args": {"card": "4111", "note": None}}, {"args": {"card": "5500"}}]}


def test_a_star_is_every_member_or_item_and_a_number_one_item() -> None:
    found = places(DOCUMENT, ["calls", "*", "args", "card"])
    assert [(container["card"], key) for container, key in found] == [
        ("4111", "card"),
        ("5500", "card"),
    ]
    [(container, key)] = places(DOCUMENT, ["calls", "1"])
    assert container is DOCUMENT["calls"] and key == 1
    assert [key for _, key in places(DOCUMENT, ["calls", "0", "args", "*"])] == ["card", "note"]


def test_an_index_has_one_spelling_and_a_missing_place_is_nothing() -> None:
    for segment in ("01", "+1", "1.0", "\u00b9", "\u0661", "2", "-1"):  # ¹ and Arabic-Indic one
        assert places(DOCUMENT, ["calls", segment]) == [], segment
    assert places(DOCUMENT, ["calls", "0", "args", "card", "deeper"]) == []
    assert places(DOCUMENT, ["absent", "*"]) == []
    assert places(DOCUMENT, []) == []


def test_split_and_show_paths() -> None:
    assert split_path("a..b.0.") == ["a", "b", "0"]
    assert dotted(["calls", 0, "args"]) == "calls.0.args"
    assert len(dotted(["k" * 5000])) < 200  # a key as long as the file is cut for a message


def test_redact_path_with_a_digit_that_is_no_index_names_nothing() -> None:
    # `"¹".isdigit()` is true but `int("¹")` raises: the walk must not take it for an index.
    assert apply_redact_paths({"calls": ["a", "b"]}, ["calls.\u00b9"]) == {"calls": ["a", "b"]}
    assert apply_redact_paths({"calls": ["a", "b"]}, ["calls.01"]) == {"calls": ["a", "b"]}
    assert apply_redact_paths({"calls": ["a", "b"]}, ["calls.1"]) == {"calls": ["a", "[REDACTED]"]}


SEGMENTS = st.sampled_from(["*", "0", "1", "01", "\u00b9", "a", "b"])
KEYS = st.sampled_from(["a", "b", "0", "1", "01"])
JSON = st.recursive(
    st.integers(0, 9) | st.text("xy", max_size=2),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
    max_leaves=12,
)


@given(document=JSON, path=st.lists(SEGMENTS, min_size=1, max_size=4))
def test_normalization_and_incident_redaction_name_the_same_places(
    document: Any, path: list[str]
) -> None:
    # No nulls in the data: redaction leaves a null as it is, replacement does not.
    dotted_path = ".".join(path)
    redacted = apply_redact_paths(document, [dotted_path])
    replaced = normalize(document, Normalization(replace_paths={dotted_path: "[REDACTED]"}))
    assert redacted == replaced
