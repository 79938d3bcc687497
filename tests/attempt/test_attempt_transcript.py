"""Tool uses and usage from stream-json transcripts, and the agent's usage file."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from paths import DATA_DIR
from trialrun.attempt.transcript import (
    SUMMARY_LIMIT,
    ToolUse,
    parse_stream_json,
    parse_usage_file,
    summarize_args,
    usage_from_transcript,
)

DATA = DATA_DIR / "transcripts"


def lines_of(name: str) -> list[str]:
    return (DATA / name).read_text(encoding="utf-8").splitlines()


def assistant(*blocks: dict[str, Any], model: str = "claude-sonnet-4-5") -> str:
    return json.dumps({"type": "assistant", "message": {"model": model, "content": list(blocks)}})


def tool_use(call_id: str, name: str = "Bash", args: Any = None) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": args or {}}


def user(*blocks: dict[str, Any]) -> str:
    return json.dumps({"type": "user", "message": {"role": "user", "content": list(blocks)}})


def tool_result(call_id: str, **extra: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": "done", **extra}


def result_line(**members: Any) -> str:
    return json.dumps({"type": "result", "subtype": "success", **members})


# ---- tool uses -------------------------------------------------------------------------------


def test_complete_session_yields_each_tool_use_with_its_outcome() -> None:
    uses = parse_stream_json(lines_of("fix_bug.jsonl"))
    assert [(use.name, use.ok, use.call_id) for use in uses] == [
        ("Read", True, "toolu_01Read"),
        ("Edit", True, "toolu_01Edit"),
        ("Bash", False, "toolu_01Bash1"),
        ("Bash", True, "toolu_01Bash2"),
    ]
    assert uses[0].args_summary == '{"file_path":"/home/dev/calc/src/calc.py"}'
    assert all(use.duration_ms == 0 for use in uses)  # no timestamps anywhere
    assert not any(use.redacted for use in uses)


def test_results_out_of_order_missing_results_and_noise() -> None:
    uses = parse_stream_json(lines_of("killed_midway.jsonl"))
    assert [(use.name, use.ok) for use in uses] == [("Grep", True), ("Glob", True), ("Bash", False)]


def test_result_arriving_before_its_tool_use_still_matches() -> None:
    lines = [user(tool_result("t1")), assistant(tool_use("t1", "Read"))]
    assert parse_stream_json(lines) == [ToolUse("Read", "{}", True, 0.0, call_id="t1")]


def test_is_error_true_fails_and_other_values_do_not() -> None:
    lines = [
        assistant(tool_use("a"), tool_use("b"), tool_use("c"), tool_use("d")),
        user(
            tool_result("a", is_error=True),
            tool_result("b", is_error=False),
            tool_result("c"),
            tool_result("d", is_error="yes"),  # not the boolean true: not an error flag
        ),
    ]
    assert [use.ok for use in parse_stream_json(lines)] == [False, True, True, True]


def test_result_content_as_string_list_or_missing_is_accepted() -> None:
    lines = [
        assistant(tool_use("a"), tool_use("b"), tool_use("c")),
        user(tool_result("a", content="plain text")),
        user(tool_result("b", content=[{"type": "text", "text": "x"}, {"type": "image"}])),
        json.dumps(
            {"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "c"}]}}
        ),
    ]
    assert [use.ok for use in parse_stream_json(lines)] == [True, True, True]


def test_first_result_for_an_id_wins_and_repeated_tool_use_counts_once() -> None:
    lines = [
        assistant(tool_use("a")),
        assistant(tool_use("a")),  # partial-message streams repeat the same block
        user(tool_result("a", is_error=True)),
        user(tool_result("a")),
    ]
    uses = parse_stream_json(lines)
    assert len(uses) == 1 and uses[0].ok is False


def test_tool_use_without_id_or_name_is_kept_and_fails() -> None:
    block = {"type": "tool_use", "input": {"x": 1}}
    uses = parse_stream_json([assistant(block), assistant(block)])
    assert [(use.name, use.ok, use.args_summary) for use in uses] == [
        ("unknown", False, '{"x":1}'),
        ("unknown", False, '{"x":1}'),
    ]


def test_plain_text_unknown_types_and_odd_shapes_yield_nothing() -> None:
    lines = [
        "Thinking about the bug...",
        "",
        "[1, 2, 3]",
        '{"type": "system", "subtype": "init"}',
        '{"type": "stream_event", "event": {"type": "message_start"}}',
        '{"type": "assistant", "message": {"content": "just text"}}',
        '{"type": "assistant", "message": "not an object"}',
        '{"type": "assistant"}',
        '{"type": "assistant", "message": {"content": [1, "x", null]}}',
        '{"type": "user", "message": {"content": [{"type": "tool_result"}]}}',
        '{"broken json',
    ]
    assert parse_stream_json(lines) == []


def test_huge_input_is_cut_to_the_summary_limit_with_an_ellipsis() -> None:
    uses = parse_stream_json([assistant(tool_use("a", "Write", {"content": "x" * 100_000}))])
    summary = uses[0].args_summary
    assert len(summary) == SUMMARY_LIMIT
    assert summary.startswith('{"content":"xxx') and summary.endswith("…")


def test_summary_is_canonical_json_with_sorted_keys() -> None:
    summary, redacted = summarize_args({"b": 1.0, "a": [True, None, "é"]})
    assert (summary, redacted) == ('{"a":[true,null,"é"],"b":1}', False)
    assert summarize_args(None) == ("{}", False)


def test_secret_is_redacted_before_the_cut_so_no_fragment_survives() -> None:
    secret = "sk-proj-" + "A1b2C3d4" * 8
    args = {"command": "echo " + "y" * 170 + " " + secret}
    summary, redacted = summarize_args(args)
    assert redacted is True
    assert "sk-proj" not in summary and "A1b2" not in summary
    assert len(summary) <= SUMMARY_LIMIT


def test_secret_under_a_sensitive_key_is_redacted_and_flagged() -> None:
    uses = parse_stream_json(lines_of("session_log.jsonl"))
    write = uses[1]
    assert write.redacted is True and "sk-proj" not in write.args_summary
    assert "[REDACTED]" in write.args_summary


def test_nan_and_infinity_in_input_do_not_lose_the_line() -> None:
    block = '{"type":"tool_use","id":"a","name":"f","input":{"x":NaN,"y":-Infinity}}'
    line = '{"type":"assistant","message":{"content":[' + block + "]}}"
    uses = parse_stream_json([line])
    assert uses[0].args_summary == '{"x":"NaN","y":"-Infinity"}'


# ---- durations -------------------------------------------------------------------------------


def test_durations_from_arrival_times() -> None:
    lines = [
        (100.0, assistant(tool_use("a"), tool_use("b"))),
        (100.25, user(tool_result("b"))),
        (101.5, user(tool_result("a", is_error=True))),
    ]
    uses = parse_stream_json(lines)
    assert [(use.duration_ms, use.ok) for use in uses] == [(1500.0, False), (250.0, True)]


def test_durations_from_iso_timestamps_in_the_lines() -> None:
    uses = parse_stream_json(lines_of("session_log.jsonl"))
    assert [(use.name, use.duration_ms, use.ok) for use in uses] == [
        ("Bash", 812.0, True),
        ("Write", 10.0, False),
    ]


def test_arrival_times_win_over_timestamps_and_backwards_clocks_give_zero() -> None:
    stamped = json.loads(assistant(tool_use("a")))
    stamped["timestamp"] = "2026-01-01T00:00:00Z"
    answer = json.loads(user(tool_result("a")))
    answer["timestamp"] = "2026-01-01T00:00:09Z"
    lines = [(5.0, json.dumps(stamped)), (4.0, json.dumps(answer))]
    assert parse_stream_json(lines)[0].duration_ms == 0.0


def test_unusable_times_give_zero_duration() -> None:
    naive = json.loads(assistant(tool_use("a")))
    naive["timestamp"] = "2026-01-01T00:00:00"  # no zone: cannot be compared
    answer = json.loads(user(tool_result("a")))
    answer["timestamp"] = "not a time"
    lines: list[Any] = [json.dumps(naive), json.dumps(answer)]
    assert parse_stream_json(lines)[0].duration_ms == 0.0
    timed: list[Any] = [("soon", assistant(tool_use("b"))), (1.0, user(tool_result("b")))]
    assert parse_stream_json(timed)[0].duration_ms == 0.0
    malformed: list[Any] = [(1.0,), (1.0, 2.0, 3.0), (1.0, None)]
    assert parse_stream_json(malformed) == []


# ---- usage from the transcript ---------------------------------------------------------------


def test_usage_from_complete_session() -> None:
    assert usage_from_transcript(lines_of("fix_bug.jsonl")) == {
        "inputTokens": 31,
        "outputTokens": 1187,
        "cacheReadTokens": 88410,
        "cacheWriteTokens": 6244,
        "totalTokens": 1218,
        "costUsd": 0.0842315,
        "model": "claude-sonnet-4-5-20250929",
    }


def test_no_result_line_means_no_usage() -> None:
    assert usage_from_transcript(lines_of("killed_midway.jsonl")) is None
    assert usage_from_transcript(["plain text only"]) is None
    assert usage_from_transcript([result_line()]) is None


def test_last_result_line_wins_and_bad_numbers_become_zero() -> None:
    lines = [
        result_line(usage={"input_tokens": 5}, total_cost_usd=1.0),
        result_line(
            usage={"input_tokens": -3, "output_tokens": 7.0, "cache_read_input_tokens": "9"},
            total_cost_usd=-2,
        ),
    ]
    assert usage_from_transcript(lines) == {
        "inputTokens": 0,
        "outputTokens": 7,
        "cacheReadTokens": 0,
        "cacheWriteTokens": 0,
        "totalTokens": 7,
        "costUsd": 0.0,
    }


def test_cost_without_usage_and_model_from_init_or_model_usage() -> None:
    init = json.dumps({"type": "system", "subtype": "init", "model": "claude-opus-4-1"})
    usage = usage_from_transcript([init, result_line(total_cost_usd=0.5)])
    assert usage is not None
    assert usage["costUsd"] == 0.5 and usage["totalTokens"] == 0
    assert usage["model"] == "claude-opus-4-1"
    only = usage_from_transcript([result_line(usage={}, total_cost_usd=0, modelUsage={"m-1": {}})])
    assert only is not None and only["model"] == "m-1"
    two = usage_from_transcript([result_line(total_cost_usd=0, modelUsage={"a": {}, "b": {}})])
    assert two is not None and "model" not in two


# ---- the usage file --------------------------------------------------------------------------


def test_usage_file_good_lines_become_receipt_members(tmp_path: Path) -> None:
    path = tmp_path / "usage.jsonl"
    path.write_text(
        '{"inputTokens": 10, "outputTokens": 5, "costUsd": 0.01, "model": "m"}\n'
        "\n"
        '{"inputTokens": 1, "outputTokens": 2, "cacheReadTokens": 3, "cacheWriteTokens": 4,'
        ' "totalTokens": 100, "costUsd": 1, "attempt": 7, "extra": true}\n'
        '{"costUsd": 0.5}\n',
        encoding="utf-8",
    )
    records = parse_usage_file(path)
    assert list(records) == [
        {
            "inputTokens": 10,
            "outputTokens": 5,
            "cacheReadTokens": 0,
            "cacheWriteTokens": 0,
            "totalTokens": 15,
            "costUsd": 0.01,
            "model": "m",
        },
        {
            "inputTokens": 1,
            "outputTokens": 2,
            "cacheReadTokens": 3,
            "cacheWriteTokens": 4,
            "totalTokens": 100,
            "costUsd": 1.0,
        },
        {
            "inputTokens": 0,
            "outputTokens": 0,
            "cacheReadTokens": 0,
            "cacheWriteTokens": 0,
            "totalTokens": 0,
            "costUsd": 0.5,
        },
    ]
    assert records.rejected == 0 and records.problems == []


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("tokens: 5", "expected a JSON object, found other text"),
        ("[1]", "expected a JSON object, found other text"),
        (
            '{"inputTokens": -1}',
            "expected inputTokens to be a non-negative integer up to 2**53 - 1, found -1",
        ),
        (
            '{"inputTokens": 1.5}',
            "expected inputTokens to be a non-negative integer up to 2**53 - 1, found 1.5",
        ),
        (
            '{"outputTokens": true}',
            "expected outputTokens to be a non-negative integer up to 2**53 - 1, found True",
        ),
        (
            '{"totalTokens": "3"}',
            "expected totalTokens to be a non-negative integer up to 2**53 - 1, found '3'",
        ),
        ('{"costUsd": -0.1}', "expected costUsd to be a non-negative number up to 1e9, found -0.1"),
        ('{"costUsd": NaN}', "expected costUsd to be a non-negative number up to 1e9, found 'NaN'"),
        (
            '{"inputTokens": 9007199254740992}',
            "expected inputTokens to be a non-negative integer up to 2**53 - 1, "
            "found 9007199254740992",
        ),
        (
            '{"costUsd": 1e308}',
            "expected costUsd to be a non-negative number up to 1e9, found 1e+308",
        ),
        ('{"inputTokens": 1, "model": 3}', "expected model to be a string, found 3"),
        (
            '{"model": "m"}',
            "expected at least one usage member (inputTokens, costUsd, ...), found none",
        ),
        ('{"inputTokens": 1', "expected a JSON object, found other text"),
    ],
)
def test_usage_file_bad_lines_are_skipped_and_counted(
    tmp_path: Path, line: str, problem: str
) -> None:
    path = tmp_path / "usage.jsonl"
    path.write_text(f'{{"inputTokens": 2}}\n{line}\n', encoding="utf-8")
    records = parse_usage_file(path)
    assert [record["inputTokens"] for record in records] == [2]
    assert records.rejected == 1
    assert records.problems == [f"line 2: {problem}"]


def test_missing_usage_file_has_no_records(tmp_path: Path) -> None:
    records = parse_usage_file(tmp_path / "never-written.jsonl")
    assert list(records) == [] and records.rejected == 0


def test_usage_file_with_invalid_utf8_skips_only_that_line(tmp_path: Path) -> None:
    path = tmp_path / "usage.jsonl"
    path.write_bytes(b'{"inputTokens": 1}\n\xff\xfe garbage\n{"outputTokens": 2}\n')
    records = parse_usage_file(path)
    assert [record["totalTokens"] for record in records] == [1, 2]
    assert records.rejected == 1


# ---- properties ------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)
block_like = st.fixed_dictionaries(
    {"type": st.sampled_from(["tool_use", "tool_result", "text"])},
    optional={
        "id": st.text(max_size=3),
        "tool_use_id": st.text(max_size=3),
        "name": json_values,
        "input": json_values,
        "is_error": json_values,
        "content": json_values,
    },
)
line_like = st.fixed_dictionaries(
    {"type": st.sampled_from(["assistant", "user", "result", "system", "other"])},
    optional={
        "message": st.fixed_dictionaries(
            {}, optional={"content": st.lists(block_like, max_size=3) | json_values}
        ),
        "usage": json_values,
        "total_cost_usd": json_values,
        "timestamp": st.text(max_size=30) | st.just("2026-01-01T00:00:00Z"),
        "model": json_values,
    },
).map(lambda obj: json.dumps(obj, allow_nan=True))
any_line = st.text() | line_like | json_values.map(lambda value: json.dumps(value))
timed_or_not = any_line | st.tuples(st.floats() | st.integers(), any_line)


@given(st.lists(timed_or_not, max_size=12))
def test_arbitrary_lines_never_raise(lines: list[Any]) -> None:
    uses = parse_stream_json(lines)
    usage = usage_from_transcript(lines)
    for use in uses:
        assert len(use.args_summary) <= SUMMARY_LIMIT and use.duration_ms >= 0
    if usage is not None:
        counts = [usage[key] for key in ("inputTokens", "outputTokens", "totalTokens")]
        assert all(isinstance(count, int) and count >= 0 for count in counts)
        assert usage["costUsd"] >= 0


@given(st.lists(st.text() | line_like, max_size=8))
def test_arbitrary_usage_files_never_raise(lines: list[str]) -> None:
    # hypothesis runs the body many times per test, so no function-scoped tmp_path here
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "usage.jsonl"
        path.write_text("\n".join(lines), encoding="utf-8", errors="replace")
        records = parse_usage_file(path)
        assert records.rejected == len(records.problems)
        assert all(record["totalTokens"] >= 0 for record in records)


@given(json_values)
def test_summary_never_exceeds_the_limit(args: Any) -> None:
    summary, _ = summarize_args(args)
    assert len(summary) <= SUMMARY_LIMIT
