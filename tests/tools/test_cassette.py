"""Cassette loading, consume-once replay, mismatch messages and the replay backend."""

from __future__ import annotations

import asyncio
import difflib
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any
from unittest.mock import patch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trialrun.base import canonjson
from trialrun.config.models import Normalization, ReplaceText
from trialrun.errors import CassetteError, CassetteMismatch
from trialrun.tools import cassette_file as cassette_module
from trialrun.tools.cassette import MAX_NEAREST, Cassette, ReplayBackend, _best_matches


def write_cassette(path: Path, lines: list[Any]) -> Path:
    path.write_text(
        "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines),
        encoding="utf-8",
    )
    return path


def entry(tool: str, args: dict[str, Any], result: Any = None, **extra: Any) -> dict[str, Any]:
    return {"tool": tool, "args": args, "ok": True, "result": result, **extra}


def lists_nested(levels: int) -> list[Any]:
    """An empty list inside ``levels - 1`` more: ``levels`` levels of nesting."""
    value: list[Any] = []
    for _ in range(levels - 1):
        value = [value]
    return value


# --- loading -------------------------------------------------------------------------------------


def test_loads_the_recorders_key_sorted_layout(peer_fixtures: Path) -> None:
    path = peer_fixtures / "upstream/demo_repo/evals/demo/cassettes/t1.jsonl"
    cassette = Cassette.load(path)
    [only] = cassette.entries
    assert (only.tool, only.args, only.ok, only.error, only.line) == (
        "search_docs",
        {"q": "reset password"},
        True,
        None,
        1,
    )
    assert only.result["hits"][0]["title"] == "Reset password"


def test_loads_the_compact_layout_and_hashes_the_file_bytes(peer_fixtures: Path) -> None:
    probe = peer_fixtures / "generated-0.2.3/probe-runs/mismatch_text"
    cassette = Cassette.load(probe / "cassette_t1.jsonl")
    assert [e.tool for e in cassette.entries] == ["search_docs", "search_docs", "create_issue"]
    summary = json.loads((probe / "summary.json").read_text(encoding="utf-8"))
    assert cassette.sha256 == summary["cases"][0]["replay"]["cassette_sha256"]


def test_blank_lines_are_skipped_and_line_numbers_kept(tmp_path: Path) -> None:
    path = write_cassette(tmp_path / "c.jsonl", ["", entry("a", {}), "   ", entry("b", {})])
    assert [(e.tool, e.line) for e in Cassette.load(path).entries] == [("a", 2), ("b", 4)]


def test_crlf_line_endings_and_a_byte_order_mark_load(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(entry("a", {"x": 1})).encode() + b"\r\n")
    assert Cassette.load(path).entries[0].args == {"x": 1}


def test_missing_result_is_null_and_unknown_keys_are_ignored(tmp_path: Path) -> None:
    line = {"tool": "a", "args": {}, "ok": False, "note": "hand-written"}
    loaded = Cassette.load(write_cassette(tmp_path / "c.jsonl", [line])).entries[0]
    assert (loaded.result, loaded.error, loaded.ok) == (None, None, False)


def test_an_object_error_is_kept_as_canonical_json(tmp_path: Path) -> None:
    recorded = {"tool": "a", "args": {}, "ok": False, "error": {"message": "boom", "code": 503}}
    loaded = Cassette.load(write_cassette(tmp_path / "c.jsonl", [recorded])).entries[0]
    assert loaded.error == '{"code":503,"message":"boom"}'
    assert asyncio.run(ReplayBackend(Cassette.load(tmp_path / "c.jsonl")).call("a", {})).error == (
        '{"code":503,"message":"boom"}'
    )


def test_an_empty_file_loads_and_every_call_then_mismatches(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_bytes(b"")
    cassette = Cassette.load(path)
    with pytest.raises(CassetteMismatch) as caught:
        cassette.take("search_docs", {"q": "x"})
    assert str(caught.value).endswith("No cassette entries found.")


LOAD_ERRORS = [
    (["{not json"], 1, "invalid JSON"),
    ([entry("a", {}), "", "[1, 2]"], 3, "expected a JSON object per line, found an array"),
    (['"just text"'], 1, "found a string"),
    ([{"args": {}, "ok": True}], 1, "missing required key 'tool'"),
    ([{"tool": "a", "ok": True}], 1, "missing required key 'args'"),
    ([{"tool": "a", "args": {}}], 1, "missing required key 'ok'"),
    ([{"tool": 3, "args": {}, "ok": True}], 1, "'tool' must be a string, found a number"),
    ([{"tool": "a", "args": [1], "ok": True}], 1, "'args' must be an object, found an array"),
    ([{"tool": "a", "args": {}, "ok": "yes"}], 1, "'ok' must be true or false, found a string"),
    ([{"tool": "a", "args": {}, "ok": 1}], 1, "'ok' must be true or false, found a number"),
    ([entry("a", {}), '{"tool": "a", "args": {"x": NaN}, "ok": true}'], 2, "NaN is not valid JSON"),
    (
        [entry("a", {}), '{"tool": "a", "args": {}, "ok": true, "result": 1e400}'],
        2,
        "invalid JSON: 1e400 is beyond the range of a JSON number",
    ),
    ([entry("a", {}), "\ufeff" + json.dumps(entry("a", {}))], 2, "Unexpected UTF-8 BOM"),
    (
        # The entry is level 1 and its args level 2: 99 lists inside make 101 levels.
        [entry("a", {}), entry("a", {"x": lists_nested(99)})],
        2,
        "the recording nests objects and arrays more than 100 levels deep; trialrun reads at "
        "most 100",
    ),
]


@pytest.mark.parametrize(("lines", "line", "message"), LOAD_ERRORS)
def test_each_load_problem_names_file_and_line(
    tmp_path: Path, lines: list[Any], line: int, message: str
) -> None:
    path = write_cassette(tmp_path / "bad.jsonl", lines)
    with pytest.raises(CassetteError) as caught:
        Cassette.load(path)
    assert (caught.value.file, caught.value.line) == (str(path), line)
    assert message in caught.value.message
    assert str(caught.value).startswith(f"{path}:{line}: ")


def test_a_recording_may_nest_up_to_the_limit_and_hold_any_number_of_brackets(
    tmp_path: Path,
) -> None:
    deepest = entry("a", {"x": lists_nested(98)})  # 100 levels with the entry and its args
    crowded = entry("b", {"x": [[] for _ in range(300)], "y": [{} for _ in range(300)]})
    path = write_cassette(tmp_path / "c.jsonl", [deepest, crowded])
    cassette = Cassette.load(path)
    assert [e.tool for e in cassette.entries] == ["a", "b"]
    assert cassette.entries == read_line_by_line(path)[0]


def read_line_by_line(path: Path) -> tuple[list[Any], list[str]]:
    """What ``Cassette.read`` gave before its fast path: ``_parse_entry`` on every line."""
    entries: list[Any] = []
    problems: list[str] = []
    for line_no, text in cassette_module._lines(path.read_bytes(), path, []):
        try:
            entries.append(cassette_module._parse_entry(text, path, line_no))
        except CassetteError as exc:
            problems.append(str(exc))
    return entries, problems


def read_now(path: Path) -> tuple[list[Any], list[str]]:
    cassette, problems = Cassette.read(path)
    assert cassette is not None
    return cassette.entries, [str(problem) for problem in problems]


GOOD = '{"tool": "a", "args": {"q": 1}, "ok": true, "result": {"r": [1, 2.5, null]}}'
EDGE_LINES = [
    GOOD,
    '{"args":{"q":1},"ok":false,"tool":"a","error":"boom"}',  # compact, any key order
    " " + GOOD,  # leading blank: the scanner does not skip it
    GOOD + "  \t",
    GOOD + "\r",  # a CRLF file
    GOOD + " x",
    GOOD + "," + GOOD,
    GOOD + " " + GOOD,
    '{"tool": "a", "args": {}, "ok": true, "error": null}',
    '{"tool": "a", "args": {}, "ok": true, "error": {"code": 7, "why": "x"}}',
    '{"tool": "a", "args": {}, "ok": true, "error": ["x"]}',
    '{"tool": "a", "args": {}, "ok": 1}',
    '{"tool": "a", "args": {}, "ok": null}',
    '{"tool": null, "args": {}, "ok": true}',
    '{"tool": "a", "args": {"x": NaN}, "ok": true}',
    '{"tool": "a", "args": {"x": -Infinity}, "ok": true}',
    '{"tool": "a", "args": {"x": 123456789012345678901234567890}, "ok": true}',
    '{"tool": "a", "args": {"x": "\\ud800 lone"}, "ok": true}',
    '{"tool": "a", "args": {"x": "tab\tinside"}, "ok": true}',
    '{"tool": "a", "tool": "b", "args": {}, "ok": true}',
    '{"tool": "a", "args": {}, "ok": true, "unknown": 1}',
    '{"tool": "a", "args": ' + "[" * 100_000 + "]" * 100_000 + ', "ok": true}',
    "[1, 2]",
    "{",
    "\ufeff" + GOOD,
]


@pytest.mark.parametrize("line", EDGE_LINES, ids=range(len(EDGE_LINES)))
def test_every_line_loads_as_it_did_line_by_line(tmp_path: Path, line: str) -> None:
    # Well-formed lines take a shorter path than _parse_entry: same entries, same problems.
    path = write_cassette(tmp_path / "c.jsonl", [GOOD, line, GOOD])
    assert read_now(path) == read_line_by_line(path)


@given(
    st.lists(
        st.dictionaries(
            st.sampled_from(["tool", "args", "ok", "result", "error", "other"]),
            st.recursive(
                st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
                lambda inner: (
                    st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=3), inner, max_size=3)
                ),
                max_leaves=6,
            ),
        ),
        max_size=8,
    ),
    st.sampled_from(["", " ", "\r", "\t"]),
)
@settings(max_examples=150)
def test_any_lines_load_as_they_did_line_by_line(
    tmp_path_factory: pytest.TempPathFactory, objects: list[dict[str, Any]], padding: str
) -> None:
    path = tmp_path_factory.mktemp("c") / "c.jsonl"
    write_cassette(path, [json.dumps(obj) + padding for obj in objects])
    assert read_now(path) == read_line_by_line(path)


def test_well_formed_lines_do_not_go_through_the_slow_parse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A 5,000-line cassette is parsed before the first agent starts: one scan per line.
    def slow(*args: Any) -> None:
        raise AssertionError("the slow path parsed a well-formed line")

    path = write_cassette(tmp_path / "c.jsonl", [entry("a", {"q": i}) for i in range(50)])
    monkeypatch.setattr(cassette_module, "_parse_entry", slow)
    cassette = Cassette.load(path)
    assert [e.args for e in cassette.entries] == [{"q": i} for i in range(50)]


def test_a_missing_file_is_named_absolutely(tmp_path: Path) -> None:
    with pytest.raises(CassetteError) as caught:
        Cassette.load(tmp_path / "nope.jsonl")
    assert str(caught.value) == f"{(tmp_path / 'nope.jsonl').resolve()}: cassette file not found"
    assert caught.value.line is None


def test_a_directory_is_not_a_cassette(tmp_path: Path) -> None:
    with pytest.raises(CassetteError, match="found a directory"):
        Cassette.load(tmp_path)


def test_bytes_that_are_not_utf8_name_their_line(tmp_path: Path) -> None:
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(json.dumps(entry("a", {})).encode() + b'\n{"tool": "caf\xe9"}\n')
    with pytest.raises(CassetteError) as caught:
        Cassette.load(path)
    assert caught.value.line == 2
    assert "0xe9" in caught.value.message


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="lists open files as Linux does")
def test_walking_a_large_cassettes_recordings_leaves_no_file_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # doctor walks every cassette of a suite: hundreds of large ones must not stay open.
    monkeypatch.setattr(cassette_module, "KEPT_IN_MEMORY", 0)
    cassette = Cassette.load(write_cassette(tmp_path / "c.jsonl", [entry("a", {}), entry("b", {})]))
    before = sorted(os.listdir("/proc/self/fd"))
    assert [e.tool for e in cassette.recordings()] == ["a", "b"]
    assert sorted(os.listdir("/proc/self/fd")) == before
    assert cassette.take("b", {}).line == 2  # replay opens its own, until the backend closes
    ReplayBackend(cassette).close(clean=True)
    assert sorted(os.listdir("/proc/self/fd")) == before


# --- consume-once replay -------------------------------------------------------------------------


def test_identical_calls_get_their_recordings_in_file_order(tmp_path: Path) -> None:
    path = write_cassette(
        tmp_path / "c.jsonl",
        [entry("list", {"page": 1}, "page 1"), entry("list", {"page": 1}, "page 2")],
    )
    cassette = Cassette.load(path)
    assert cassette.take("list", {"page": 1}).result == "page 1"
    assert cassette.take("list", {"page": 1}).result == "page 2"
    with pytest.raises(CassetteMismatch) as caught:
        cassette.take("list", {"page": 1})
    assert caught.value.exhausted == 2
    assert "2 identical recordings exist but were already used" in str(caught.value)
    assert cassette.unused() == []


def test_key_order_does_not_matter_but_tool_case_does(tmp_path: Path) -> None:
    path = write_cassette(
        tmp_path / "c.jsonl", [entry("search_docs", {"b": 1, "a": {"y": 2, "x": 1}})]
    )
    cassette = Cassette.load(path)
    assert cassette.take("search_docs", {"a": {"x": 1, "y": 2}, "b": 1}).line == 1
    path = write_cassette(tmp_path / "d.jsonl", [entry("search_docs", {})])
    with pytest.raises(CassetteMismatch) as caught:
        Cassette.load(path).take("SEARCH_DOCS", {})
    assert caught.value.nearest[0].score == 1.0


def test_unused_lists_what_no_call_consumed(tmp_path: Path) -> None:
    path = write_cassette(tmp_path / "c.jsonl", [entry("a", {}), entry("b", {}), entry("a", {})])
    backend = ReplayBackend(Cassette.load(path))
    asyncio.run(backend.call("a", {}))
    assert [e.line for e in backend.cassette.unused()] == [2, 3]
    assert backend.unused() == 2


def test_replay_is_constant_time_per_call(tmp_path: Path) -> None:
    count = 5_000
    lines = [entry("fetch", {"id": i, "q": f"query {i}"}, i) for i in range(count)]
    path = write_cassette(tmp_path / "big.jsonl", lines)
    started = time.thread_time()
    cassette = Cassette.load(path)
    build = time.thread_time() - started
    started = time.thread_time()
    for i in reversed(range(count)):  # the last recording first: a linear scan would show
        assert cassette.take("fetch", {"q": f"query {i}", "id": i}).result == i
    replay = time.thread_time() - started
    assert replay < max(20 * build, 0.05)


def test_each_case_copy_builds_its_own_index(tmp_path: Path) -> None:
    path = write_cassette(tmp_path / "c.jsonl", [entry("a", {"n": 1}, "one"), entry("a", {})])
    loaded = Cassette.load(path)
    backend = ReplayBackend(loaded.fresh())
    assert "_index" not in vars(backend.cassette)  # a suite's load builds no index
    assert backend.answer_now("a", {"n": 1}).result == "one"
    assert "_index" in vars(backend.cassette)
    assert "_index" not in vars(loaded)


# --- redaction-aware matching --------------------------------------------------------------------


def test_a_live_secret_matches_a_recording_redacted_in_the_same_place(tmp_path: Path) -> None:
    path = write_cassette(
        tmp_path / "c.jsonl", [entry("login", {"user": "ann", "password": "[REDACTED]"}, "ok")]
    )
    assert Cassette.load(path).take("login", {"user": "ann", "password": "hunter2"}).result == "ok"


def test_two_different_recorded_secrets_never_collide(tmp_path: Path) -> None:
    path = write_cassette(
        tmp_path / "c.jsonl",
        [entry("login", {"password": "alpha"}, "A"), entry("login", {"password": "beta"}, "B")],
    )
    cassette = Cassette.load(path)
    assert cassette.take("login", {"password": "beta"}).result == "B"
    assert cassette.take("login", {"password": "alpha"}).result == "A"
    with pytest.raises(CassetteMismatch) as caught:
        Cassette.load(path).take("login", {"password": "gamma"})
    message = str(caught.value)
    assert "alpha" not in message and "beta" not in message and "gamma" not in message
    assert 'Requested args: {"password":"[REDACTED]"}' in message
    assert "first difference at args.password (a redacted value)" in message


def test_a_mismatch_quotes_at_most_2000_characters_of_the_call(tmp_path: Path) -> None:
    # A call of a megabyte would otherwise be the whole console failure block and junit.xml.
    cassette = Cassette.load(write_cassette(tmp_path / "c.jsonl", [entry("lookup", {"q": "a"})]))
    with pytest.raises(CassetteMismatch) as caught:
        cassette.take("t" * 300, {"q": "y" * 1_000_000})
    message = str(caught.value)
    assert f"Requested tool: {'t' * 197}...\n" in message
    assert f'Requested args: {{"q":"{"y" * 1991}...\n' in message
    assert len(message) < 2500


def test_the_redacted_fallback_is_consumed_once_too(tmp_path: Path) -> None:
    path = write_cassette(tmp_path / "c.jsonl", [entry("login", {"password": "[REDACTED]"})])
    cassette = Cassette.load(path)
    cassette.take("login", {"password": "one"})
    with pytest.raises(CassetteMismatch) as caught:
        cassette.take("login", {"password": "two"})
    assert caught.value.exhausted == 1


# --- mismatch messages ---------------------------------------------------------------------------


def test_mismatch_message_is_the_peers_byte_for_byte(peer_fixtures: Path) -> None:
    probe = peer_fixtures / "generated-0.2.3/probe-runs/mismatch_text"
    cassette = Cassette.load(probe / "cassette_t1.jsonl")
    with pytest.raises(CassetteMismatch) as caught:
        cassette.take("search_docs", {"q": "reset pasword", "limit": 5})
    summary = json.loads((probe / "summary.json").read_text(encoding="utf-8"))
    # The peer's text, then the line that says where the nearest recording differs.
    peer = summary["cases"][0]["failure_reason"]
    assert str(caught.value) == (
        peer
        + '\nNearest recording: line 1; first difference at args.q: recorded "reset password", '
        'requested "reset pasword"'
    )
    assert [round(n.score, 2) for n in caught.value.nearest] == [0.98, 0.35]


def test_nearest_falls_back_to_every_tool_and_keeps_five(tmp_path: Path) -> None:
    lines = [entry(f"tool_{i}", {"n": i}) for i in range(8)]
    cassette = Cassette.load(write_cassette(tmp_path / "c.jsonl", lines))
    with pytest.raises(CassetteMismatch) as caught:
        cassette.take("other", {"n": 3})
    nearest = caught.value.nearest
    assert len(nearest) == MAX_NEAREST
    assert nearest[0].tool == "tool_3"
    assert [n.score for n in nearest] == sorted((n.score for n in nearest), reverse=True)


def test_nearest_shows_identical_recordings_once(tmp_path: Path) -> None:
    lines = [entry("a", {"q": "x"}), entry("a", {"q": "x"}), entry("a", {"q": "y"})]
    cassette = Cassette.load(write_cassette(tmp_path / "c.jsonl", lines))
    with pytest.raises(CassetteMismatch) as caught:
        cassette.take("a", {"q": "z"})
    assert [n.args_json for n in caught.value.nearest] == ['{"q":"x"}', '{"q":"y"}']


def test_a_miss_on_a_huge_cassette_stays_fast(tmp_path: Path) -> None:
    def miss_s(count: int) -> float:
        lines = [entry("fetch", {"q": f"{'long text ' * 20}{i}"}) for i in range(count)]
        cassette = Cassette.load(write_cassette(tmp_path / f"{count}.jsonl", lines))
        started = time.thread_time()
        with pytest.raises(CassetteMismatch) as caught:
            cassette.take("fetch", {"q": "something else entirely"})
        took = time.thread_time() - started
        assert len(caught.value.nearest) == MAX_NEAREST
        return took

    small, huge = miss_s(2_000), miss_s(20_000)
    # Ten times the recordings: at most about ten times the time (a search comparing recordings
    # with each other would take a hundred). A ratio to a reference measured here, not a budget
    # in seconds, so a loaded machine cannot fail it.
    assert huge < 40 * small + 0.05, (small, huge)


json_text = st.text(st.characters(codec="utf-8"), max_size=12)


@settings(max_examples=60)
@given(st.text(max_size=20), st.lists(st.text(max_size=20), max_size=40))
def test_pruned_search_finds_the_exhaustive_best_five(target: str, texts: list[str]) -> None:
    keys = [("t", text) for text in dict.fromkeys(texts)]
    exhaustive = sorted(
        ((difflib.SequenceMatcher(None, target, k[1]).ratio(), i) for i, k in enumerate(keys)),
        key=lambda pair: (-pair[0], pair[1]),
    )[:MAX_NEAREST]
    assert _best_matches(target, keys) == [(keys[i], score) for score, i in exhaustive]


json_scalar = st.none() | st.booleans() | st.integers(-1000, 1000) | json_text
json_value = st.recursive(
    json_scalar,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(json_text, inner, max_size=3),
    max_leaves=8,
)
recorded = st.fixed_dictionaries(
    {
        "tool": st.sampled_from(["search", "fetch", "create"]),
        "args": st.dictionaries(st.sampled_from(["q", "page", "id"]), json_scalar, max_size=3),
        "ok": st.booleans(),
        "result": json_value,
    }
)


@settings(max_examples=50)
@given(st.lists(recorded, max_size=12), st.booleans())
def test_any_cassette_replays_every_recording_in_order(
    tmp_path_factory: pytest.TempPathFactory, recordings: list[dict[str, Any]], sorted_layout: bool
) -> None:
    path = tmp_path_factory.mktemp("prop") / "c.jsonl"
    layout: dict[str, Any] = (
        {"sort_keys": True, "ensure_ascii": False} if sorted_layout else {"separators": (",", ":")}
    )
    path.write_text("".join(json.dumps(e, **layout) + "\n" for e in recordings), encoding="utf-8")
    cassette = Cassette.load(path)
    assert len(cassette.entries) == len(recordings)
    for expected in recordings:
        got = cassette.take(expected["tool"], expected["args"])
        assert (got.tool, canonjson.dumps(got.args)) == (
            expected["tool"],
            canonjson.dumps(expected["args"]),
        )
    assert cassette.unused() == []


@settings(max_examples=60, deadline=None)
@given(
    st.lists(recorded, max_size=10),
    st.lists(st.sampled_from(["", " ", "\r", "\t"]), min_size=10, max_size=10),
    st.booleans(),
)
def test_a_cassette_read_from_the_file_serves_what_one_kept_in_memory_serves(
    tmp_path_factory: pytest.TempPathFactory,
    recordings: list[dict[str, Any]],
    padding: list[str],
    bom: bool,
) -> None:
    # Small cassettes are kept in memory whole, large ones read again by offset: same answers.
    path = tmp_path_factory.mktemp("kept") / "c.jsonl"
    lines = [json.dumps(e, ensure_ascii=False) + padding[i] for i, e in enumerate(recordings)]
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + "\n\n".join(lines).encode())

    def replayed() -> tuple[list[tuple[Any, ...]], str]:
        cassette = Cassette.load(path)
        served = []
        for expected in recordings:
            got = cassette.take(expected["tool"], expected["args"])
            served.append((got.tool, got.args, got.ok, got.result, got.error, got.line))
            assert (got.ok, got.result) == (expected["ok"], expected["result"])
        assert cassette.unused() == []
        return served, cassette.sha256

    kept = replayed()
    with patch.object(cassette_module, "KEPT_IN_MEMORY", 0):
        assert replayed() == kept


_small_calls = st.tuples(
    st.sampled_from(["search", "fetch"]),
    st.dictionaries(st.sampled_from(["q", "page"]), st.integers(0, 1), max_size=2),
)


@settings(max_examples=100)
@given(st.lists(_small_calls, max_size=12), st.lists(_small_calls, max_size=16))
def test_calls_in_any_order_take_the_first_unused_alike_recording(
    tmp_path_factory: pytest.TempPathFactory,
    recordings: list[tuple[str, dict[str, Any]]],
    calls: list[tuple[str, dict[str, Any]]],
) -> None:
    path = tmp_path_factory.mktemp("order") / "c.jsonl"
    write_cassette(path, [entry(tool, args, line) for line, (tool, args) in enumerate(recordings)])
    cassette = Cassette.load(path)
    # The model: scan the file for the first recording of the same call no call consumed yet.
    consumed: list[int] = []
    for tool, args in calls:
        alike = [
            line
            for line, (other_tool, other_args) in enumerate(recordings)
            if (other_tool, other_args) == (tool, args)
        ]
        unused = [line for line in alike if line not in consumed]
        if unused:
            assert cassette.take(tool, args).result == unused[0]
            consumed.append(unused[0])
        else:
            with pytest.raises(CassetteMismatch) as caught:
                cassette.take(tool, args)
            assert caught.value.exhausted == len(alike)
    assert [e.result for e in cassette.unused()] == [
        line for line in range(len(recordings)) if line not in consumed
    ]


# --- the replay backend --------------------------------------------------------------------------


def test_replay_normalizes_results_and_errors_idempotently(tmp_path: Path) -> None:
    rules = Normalization(
        strip_keys=["request_id"],
        replace_text=[ReplaceText(pattern=r"\d{4}-\d{2}-\d{2}", replacement="<date>")],
    )
    lines = [
        entry("a", {}, {"request_id": "r1", "day": "2024-01-02"}),
        {"tool": "b", "args": {}, "ok": False, "error": "failed on 2024-01-02"},
        entry("c", {}, {"day": "<date>"}),
    ]
    backend = ReplayBackend(Cassette.load(write_cassette(tmp_path / "c.jsonl", lines)), rules)
    first = asyncio.run(backend.call("a", {}))
    assert first.ok and first.result == {"day": "<date>"}
    assert asyncio.run(backend.call("b", {})).error == "failed on <date>"
    assert asyncio.run(backend.call("c", {})).result == {"day": "<date>"}


def test_replay_raises_the_mismatch_for_the_session(tmp_path: Path) -> None:
    backend = ReplayBackend(Cassette.load(write_cassette(tmp_path / "c.jsonl", [entry("a", {})])))
    with pytest.raises(CassetteMismatch) as caught:
        asyncio.run(backend.call("a", {"x": 1}))
    assert (caught.value.tool, caught.value.args_json) == ("a", '{"x":1}')
    backend.close(clean=True)
    assert hashlib.sha256((tmp_path / "c.jsonl").read_bytes()).hexdigest() == (
        backend.cassette.sha256
    )
