"""The review of a re-recording, file against file (``running.recording_review``)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from strategies import json_values
from trialrun.config.models import Normalization
from trialrun.running.recording_review import (
    changed_recordings,
    counts_of,
    first_difference,
    review_file,
    volatile_view,
)


def lines(*entries: Any) -> bytes:
    return "".join(json.dumps(entry) + "\n" for entry in entries).encode()


def tool(name: str, args: Any, result: Any) -> dict[str, Any]:
    return {"tool": name, "args": args, "ok": True, "result": result}


PLAIN = volatile_view(None)


def statuses(review: list[dict[str, Any]]) -> list[tuple[str, int | None, int | None]]:
    return [(r["status"], r["old_line"], r["new_line"]) for r in review]


def test_a_new_recording_pairs_with_the_same_request_first_then_the_same_tool_in_order() -> None:
    old = lines(tool("a", {"q": 1}, 1), tool("a", {"q": 2}, 2), tool("b", {}, 3))
    new = lines(tool("a", {"q": 2}, 2), tool("a", {"q": 9}, 1), tool("c", {}, 0))
    review = review_file(old, new, PLAIN)
    assert statuses(review) == [
        ("identical", 2, 1),  # same request, though no longer in the same place
        ("changed", 1, 2),  # the first unused recording of the same tool
        ("added", None, 3),
        ("removed", 3, None),
    ]
    assert review[1]["field"] == "args.q"
    assert (review[1]["old"], review[1]["new"]) == ("1", "9")
    assert counts_of(review) == {"kept": 1, "replaced": 1, "added": 1, "dropped": 1}


def test_a_recording_made_again_unchanged_is_identical_whenever_it_was_made() -> None:
    old = lines({**tool("a", {}, 1), "recorded_at": "2026-01-02T03:04:05Z"})
    again = lines({**tool("a", {}, 1), "recorded_at": "2026-12-05T05:00:00Z"})
    assert statuses(review_file(old, again, PLAIN)) == [("identical", 1, 1)]
    other = lines({**tool("a", {}, 2), "recorded_at": "2026-12-05T05:00:00Z"})
    assert statuses(review_file(old, other, PLAIN)) == [("changed", 1, 1)]


def test_without_an_old_file_every_recording_is_added() -> None:
    review = review_file(None, lines(tool("a", {}, 1)), PLAIN)
    assert statuses(review) == [("added", None, 1)]


def test_the_first_difference_names_a_nested_field_by_key_and_index() -> None:
    old = {"result": {"items": [{"price": 1}, {"price": 2}, {"price": 3, "name": "x"}]}}
    new = {"result": {"items": [{"price": 1}, {"price": 2}, {"price": 4, "name": "x"}]}}
    assert first_difference(old, new) == ("result.items[2].price", 3, 4)
    assert first_difference({"a": [1]}, {"a": [1, 2]}) == ("a[1]", None, 2)
    assert first_difference({"a": 1}, {"a": 1, "b": None}) == ("b", None, None)


@given(json_values, json_values)
def test_the_first_difference_points_at_values_that_differ(old: Any, new: Any) -> None:
    path, before, after = first_difference(old, new)
    if old == new:
        assert (path, before, after) == ("", old, new)
    else:
        # Different values there, or a key one side lacks (its value None on the other).
        assert before != after or (before is None and after is None and path)


def test_uuids_dates_timings_and_headers_are_volatile() -> None:
    old = lines(
        {
            "provider": "openai",
            "method": "POST",
            "path": "/v1/chat/completions",
            "request": {"messages": [{"role": "user", "content": "hi"}]},
            "status": 200,
            "body": json.dumps({"id": "3f2b8c1e-1111-4a4a-9b9b-0123456789ab", "text": "hello"}),
            "elapsed_ms": 812.4,
            "headers": {"x-request-id": "r1"},
            "key": "k",
        }
    )
    new_entry = json.loads(old)
    new_entry["body"] = json.dumps({"id": "9e9e9e9e-2222-4b4b-8c8c-fedcba987654", "text": "hello"})
    new_entry["elapsed_ms"] = 99.0
    new_entry["headers"] = {"x-request-id": "r2"}
    review = review_file(old, lines(new_entry), PLAIN)
    assert statuses(review) == [("volatile-only", 1, 1)]
    new_entry["body"] = json.dumps({"id": "9e9e9e9e-2222-4b4b-8c8c-fedcba987654", "text": "bye"})
    (changed,) = review_file(old, lines(new_entry), PLAIN)
    assert changed["status"] == "changed"
    assert changed["field"] == "body.text"
    assert changed["recording"] == "model openai POST /v1/chat/completions"


def test_the_suites_normalization_rules_make_a_field_volatile() -> None:
    rules = Normalization(strip_paths=["items.*.rand"])
    old = lines(tool("a", {}, {"items": [{"rand": 1, "v": 2}]}))
    new = lines(tool("a", {}, {"items": [{"rand": 7, "v": 2}]}))
    assert statuses(review_file(old, new, volatile_view(rules))) == [("volatile-only", 1, 1)]
    assert statuses(review_file(old, new, PLAIN)) == [("changed", 1, 1)]


def test_headers_lines_are_not_recordings_and_mcp_exchanges_pair_by_method() -> None:
    header = {"kind": "header", "schema_version": 1, "server": "s"}
    old = lines(header, {"method": "tools/list", "params": {}, "result": {"tools": []}})
    new = lines(header, {"method": "tools/list", "params": {}, "result": {"tools": ["x"]}})
    (only,) = review_file(old, new, PLAIN)
    assert (only["status"], only["recording"], only["field"]) == (
        "changed",
        "mcp tools/list",
        "result.tools[0]",
    )
    block = {"file": "c.mcp-s.jsonl", "recordings": [only]}
    assert changed_recordings([block]) == ["c.mcp-s.jsonl line 2: mcp tools/list (result.tools[0])"]


@given(st.binary(max_size=300), st.binary(max_size=300))
def test_any_bytes_are_reviewed_without_an_error(old: bytes, new: bytes) -> None:
    review = review_file(old, new, PLAIN)
    assert sum(counts_of(review).values()) == len(review)


def test_a_line_nested_too_deep_is_compared_as_text() -> None:
    # Deep enough for the parser's own recursion limit, which must never be reached.
    deep = b"[" * 100_000 + b"]" * 100_000 + b"\n"
    (only,) = review_file(deep, deep.replace(b"[]", b"[1]"), PLAIN)
    assert (only["status"], only["recording"]) == ("changed", "line")
    assert only["field"] == "(whole recording)"


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    crowded = json.dumps(tool("a", {"q": "[" * 500 + '\\"{' * 50}, 1)).encode() + b"\n"
    (only,) = review_file(crowded, crowded, PLAIN)
    assert (only["status"], only["recording"]) == ("identical", "tool a")


@given(
    st.lists(st.tuples(st.sampled_from("ab"), st.integers(0, 3)), max_size=20),
    st.randoms(use_true_random=False),
)
def test_the_same_recordings_in_another_order_are_all_identical(
    calls: list[tuple[str, int]], random: Any
) -> None:
    entries = [tool(name, {"q": q}, q) for name, q in calls]
    shuffled = list(entries)
    random.shuffle(shuffled)
    review = review_file(lines(*entries), lines(*shuffled), PLAIN)
    assert [r["status"] for r in review] == ["identical"] * len(entries)
    assert sorted(r["old_line"] for r in review) == list(range(1, len(entries) + 1))


def test_a_long_texts_excerpt_shows_where_it_changed() -> None:
    old = lines(tool("a", {}, "x" * 500 + "old" + "y" * 500))
    new = lines(tool("a", {}, "x" * 500 + "new" + "y" * 500))
    (only,) = review_file(old, new, PLAIN)
    assert only["field"] == "result"
    assert only["old"].startswith("...x") and only["old"].endswith("y...")
    assert "xold" in only["old"] and "xnew" in only["new"]
    assert len(only["old"]) <= 126
