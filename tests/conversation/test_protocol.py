"""The agent protocol: what we send is ASCII JSON; whatever an agent prints never crashes us."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from strategies import json_values
from trialrun.base.jsonnames import json_type
from trialrun.base.nesting import MAX_NESTING, nests_deeper_than
from trialrun.conversation import protocol
from trialrun.conversation.protocol import (
    FinalOutputMsg,
    LogMsg,
    StdoutNoiseError,
    TaskErrorMsg,
    ToolCallMsg,
    UsageMsg,
    encode,
    parse_line,
    task_start,
    tool_result,
)
from trialrun.errors import ProtocolError

MESSAGE_CLASSES = (ToolCallMsg, FinalOutputMsg, LogMsg, TaskErrorMsg, UsageMsg)


def line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode()


# -- encode ---------------------------------------------------------------------------------


def test_encode_is_compact_ascii_with_one_trailing_newline() -> None:
    data = encode(task_start("t1", {"ticket": "café ☕ 😀"}))
    assert data.endswith(b"\n") and data.count(b"\n") == 1
    assert data == (
        b'{"type":"task_start","task_id":"t1","input":'
        b'{"ticket":"caf\\u00e9 \\u2615 \\ud83d\\ude00"}}\n'
    )
    assert json.loads(data)["input"]["ticket"] == "café ☕ 😀"


def test_encode_keeps_lone_surrogates_from_yaml_as_escapes() -> None:
    data = encode({"type": "task_start", "task_id": "t", "input": {"s": "\ud83d", "t": "\udfff"}})
    assert b'"\\ud83d"' in data and b'"\\udfff"' in data
    assert json.loads(data)["input"] == {"s": "\ud83d", "t": "\udfff"}


def test_tool_result_always_has_all_five_keys_in_order() -> None:
    message = tool_result("c1", False, None, "boom")
    assert list(message) == ["type", "call_id", "ok", "result", "error"]
    assert (
        encode(message)
        == b'{"type":"tool_result","call_id":"c1","ok":false,"result":null,"error":"boom"}\n'
    )


def test_encode_refuses_values_json_cannot_hold() -> None:
    with pytest.raises(TypeError):
        encode({"type": "task_start", "input": {1, 2}})


def test_a_failed_encode_leaves_nothing_behind_for_the_next_message() -> None:
    # YAML anchors can make a task input contain itself. The encoder is built once: the objects
    # a failed encode was in the middle of must not be taken for cycles in the next message.
    shared: dict[str, Any] = {"k": [1, 2]}
    looped: dict[str, Any] = {"shared": shared}
    looped["self"] = looped
    with pytest.raises(ValueError, match="Circular reference"):
        encode(task_start("t", looped))
    assert encode(task_start("t", [shared, shared])) == (
        b'{"type":"task_start","task_id":"t","input":[{"k":[1,2]},{"k":[1,2]}]}\n'
    )


@given(json_values)
def test_encode_writes_what_json_dumps_writes(value: Any) -> None:
    message = {"type": "tool_result", "result": value}
    expected = json.dumps(message, separators=(",", ":")) + "\n"
    assert encode(message) == expected.encode("ascii")


def _nested(levels: int) -> str:
    """A tool_call whose whole message nests ``levels`` objects and arrays deep."""
    inner = levels - 2  # the message and its args are the first two levels
    head = '{"type":"tool_call","name":"t","call_id":"c","args":{"q":'
    return head + "[" * inner + "]" * inner + "}}"


def test_a_message_may_nest_up_to_the_limit_and_not_one_level_more() -> None:
    # Every walk over an agent's data recurses: deeper data used to end the run in a traceback.
    message = parse_line(_nested(MAX_NESTING).encode(), 1)
    assert isinstance(message, ToolCallMsg)
    with pytest.raises(ProtocolError) as caught:
        parse_line(_nested(MAX_NESTING + 1).encode(), 7)
    assert caught.value.message == (
        "agent message on stdout line 7 nests objects and arrays more than 100 levels deep; "
        "trialrun takes at most 100"
    )
    # Brackets inside strings nest nothing.
    text = json.dumps({"type": "log", "message": "[" * 500 + "{" * 500})
    assert isinstance(parse_line(text.encode(), 1), LogMsg)


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


@given(json_values, st.integers(min_value=0, max_value=6))
def test_nests_deeper_than_agrees_with_a_plain_recursive_depth(value: Any, limit: int) -> None:
    expected = _depth(value) > limit
    assert nests_deeper_than(value, limit) is expected
    assert nests_deeper_than(value, limit, text=json.dumps(value)) is expected
    assert nests_deeper_than(value, limit, text=json.dumps(value).encode()) is expected


@given(json_values)
def test_encode_round_trips_any_json_value_as_ascii(value: Any) -> None:
    data = encode({"type": "tool_result", "result": value})
    assert data.isascii() and data.endswith(b"\n") and b"\n" not in data[:-1]
    assert json.loads(data)["result"] == value


# -- parse_line: valid messages ----------------------------------------------------------------


def test_parses_every_agent_message_type() -> None:
    call = parse_line(
        line({"type": "tool_call", "name": "s", "call_id": "c1", "args": {"q": 1}}), 1
    )
    assert call == ToolCallMsg(name="s", call_id="c1", args={"q": 1})
    assert parse_line(line({"type": "final_output", "output": {"a": [1]}}), 2) == FinalOutputMsg(
        {"a": [1]}
    )
    assert parse_line(
        line({"type": "log", "level": "warn", "message": "m", "data": {"k": 1}}), 3
    ) == (LogMsg("warn", "m", {"k": 1}))
    assert parse_line(line({"type": "task_error", "message": "no"}), 4) == TaskErrorMsg("no", None)
    usage = {"type": "usage", "tokens_in": 3, "tokens_out": 0, "cost_usd": 1, "model": "m"}
    assert parse_line(line(usage), 5) == UsageMsg(3, 0, 1.0, "m")
    assert parse_line(line({"type": "usage"}), 6) == UsageMsg(None, None, None, None)


def test_blank_lines_and_runner_messages_echoed_by_the_agent_are_ignored() -> None:
    assert parse_line(b"", 1) is None
    assert parse_line(b"  \t\r", 1) is None
    assert parse_line(line({"type": "task_start", "task_id": "x", "input": {}}), 1) is None
    assert parse_line(line({"type": "tool_result", "call_id": "c"}), 1) is None


def test_extra_fields_a_bom_and_crlf_are_tolerated() -> None:
    raw = b'\xef\xbb\xbf{"type":"final_output","output":{},"trace_id":"x"}\r'
    assert parse_line(raw, 1) == FinalOutputMsg({})


def test_log_level_defaults_to_info() -> None:
    assert parse_line(line({"type": "log", "message": "hi"}), 1) == LogMsg("info", "hi", None)


def test_lone_surrogate_escapes_and_encoded_surrogates_parse() -> None:
    escaped = parse_line(b'{"type":"final_output","output":{"s":"\\ud800"}}', 1)
    assert escaped == FinalOutputMsg({"s": "\ud800"})
    # CESU-style bytes for a surrogate, as some JVM/JS encoders write them.
    raw = b'{"type":"final_output","output":{"s":"\xed\xa0\x80"}}'
    assert parse_line(raw, 1) == FinalOutputMsg({"s": "\ud800"})


def test_a_five_megabyte_line_parses_in_linear_time() -> None:
    def best_parse_s(size: int) -> float:
        raw = line({"type": "final_output", "output": {"blob": "x" * size}})
        best = float("inf")
        for _ in range(3):  # best of three; this thread's CPU time, which waiting never adds to
            started = time.thread_time()
            message = parse_line(raw, 1)
            best = min(best, time.thread_time() - started)
        assert isinstance(message, FinalOutputMsg) and len(message.output["blob"]) == size
        return best

    small, big = best_parse_s(500_000), best_parse_s(5_000_000)
    # Ten times the bytes: about ten times the time when parsing is linear, a hundred times if
    # it were quadratic. A ratio to a reference measured here, so a loaded machine cannot fail it.
    assert big < 40 * small + 0.05, (small, big)


# -- parse_line: violations ----------------------------------------------------------------------


def test_non_json_text_is_noise_naming_the_line_and_the_fix() -> None:
    with pytest.raises(StdoutNoiseError) as info:
        parse_line(b"Loading model...", 7)
    assert str(info.value) == (
        "agent printed non-protocol text on stdout (line 7): Loading model...; print logs to stderr"
    )
    assert info.value.line_no == 7 and info.value.text == "Loading model..."


def test_noise_of_control_characters_is_shown_as_escapes() -> None:
    # A console strips control characters: binary garbage would read as an empty line.
    with pytest.raises(StdoutNoiseError) as info:
        parse_line(bytes(range(1, 9)) + b"\x1b[31m", 1)
    assert str(info.value) == (
        "agent printed non-protocol text on stdout (line 1): "
        "\\x01\\x02\\x03\\x04\\x05\\x06\\x07\\x08\\x1b[31m; print logs to stderr"
    )


def test_noise_preview_is_cut_at_200_characters() -> None:
    with pytest.raises(StdoutNoiseError) as info:
        parse_line(b"y" * 5000, 1)
    assert info.value.text == "y" * 200 + "..."
    assert "print logs to stderr" in str(info.value)


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (b'{"type": "final_output", "output": {"a": 1', "the line ends before its JSON does"),
        (b'  {"type":"log","message":"cut', "the line ends before its JSON does"),
        (b"{'type': 'log'}", "Expecting property name enclosed in double quotes"),
    ],
)
def test_a_line_that_starts_a_json_object_and_breaks_is_invalid_json(
    raw: bytes, problem: str
) -> None:
    with pytest.raises(ProtocolError) as info:
        parse_line(raw, 3)
    assert not isinstance(info.value, StdoutNoiseError)
    assert str(info.value).startswith("agent sent invalid JSON on stdout (line 3): ")
    assert problem in str(info.value)
    assert "print logs to stderr" not in str(info.value)
    assert info.value.line_no == 3 and info.value.text


def test_pretty_printed_json_is_noise() -> None:
    with pytest.raises(StdoutNoiseError):
        parse_line(b"{", 1)


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ([1, 2], "a protocol message must be a JSON object, found array"),
        ({"name": "x"}, 'needs a string "type" field, found none'),
        ({"type": 5}, 'needs a string "type" field, found number'),
        ({"type": "progress"}, "unknown message type 'progress'; expected one of tool_call, "),
        ({"type": "tool_call", "call_id": "c", "args": {}}, "tool_call.name is missing"),
        (
            {"type": "tool_call", "name": "s", "call_id": 1, "args": {}},
            "tool_call.call_id must be a string, found number",
        ),
        (
            {"type": "tool_call", "name": "s", "call_id": "c", "args": [1]},
            "tool_call.args must be a JSON object, found array",
        ),
        ({"type": "tool_call", "name": "s", "call_id": "c"}, "tool_call.args is missing"),
        (
            {"type": "final_output", "output": "done"},
            "final_output.output must be a JSON object, found string",
        ),
        ({"type": "final_output", "output": None}, "final_output.output must be a JSON object"),
        ({"type": "final_output"}, "final_output.output is missing"),
        ({"type": "log", "level": "x"}, "log.message is missing"),
        ({"type": "log", "message": "m", "data": 3}, "log.data must be a JSON object or null"),
        ({"type": "task_error", "message": ["x"]}, "task_error.message must be a string"),
        (
            {"type": "usage", "tokens_in": -1},
            "usage.tokens_in must be a non-negative integer up to 2**53 - 1, found -1",
        ),
        (
            # Beyond what every JSON reader holds exactly; the receipt is read by JavaScript too.
            {"type": "usage", "tokens_in": 2**53},
            "usage.tokens_in must be a non-negative integer up to 2**53 - 1, "
            "found 9007199254740992",
        ),
        ({"type": "usage", "tokens_out": 1.5}, "usage.tokens_out must be a non-negative integer"),
        ({"type": "usage", "tokens_out": True}, "found boolean"),
        ({"type": "usage", "cost_usd": -0.5}, "usage.cost_usd must be a non-negative number"),
        (
            {"type": "usage", "cost_usd": "1"},
            "usage.cost_usd must be a non-negative number up to 1e9, found string",
        ),
        (
            {"type": "usage", "cost_usd": 1e300},  # sums of these would overflow to infinity
            "usage.cost_usd must be a non-negative number up to 1e9, found 1e+300",
        ),
        ({"type": "usage", "model": 3}, "usage.model must be a string, found number"),
    ],
)
def test_protocol_violations_say_what_was_expected_and_found(message: Any, expected: str) -> None:
    with pytest.raises(ProtocolError) as info:
        parse_line(line(message), 12)
    assert not isinstance(info.value, StdoutNoiseError)
    assert expected in str(info.value)
    assert "(stdout line 12)" in str(info.value)
    assert info.value.line_no == 12


@pytest.mark.parametrize(
    "line",
    [
        b'{"type":"usage","cost_usd":NaN}',
        b'{"type":"tool_call","name":"t","call_id":"c1","args":{"x":Infinity}}',
        b'{"type":"final_output","output":{"score":-Infinity}}',
    ],
)
def test_non_finite_numbers_are_refused_anywhere(line: bytes) -> None:
    with pytest.raises(ProtocolError, match="is not valid JSON") as info:
        parse_line(line, 1)
    assert not isinstance(info.value, StdoutNoiseError)


@pytest.mark.parametrize("number", ["1e400", "-1e400", "1.5e309"])
def test_numbers_beyond_a_double_are_refused_not_read_as_infinity(number: str) -> None:
    # run.jsonl would hold "Infinity" (not JSON) and the receipt could not hash it.
    text = '{"type":"final_output","output":{"score":' + number + "}}"
    with pytest.raises(ProtocolError) as info:
        parse_line(text.encode(), 3)
    assert str(info.value).startswith(
        "agent message on stdout line 3 holds a value that cannot be read: "
        f"{number} is beyond the range of a JSON number"
    )
    assert parse_line(b'{"type":"final_output","output":{"score":1e308}}', 1) is not None


def test_invalid_utf8_in_json_names_the_line_and_byte() -> None:
    with pytest.raises(ProtocolError) as info:
        parse_line(b'{"type":"final_output","output":{"t":"\xff\xfe"}}', 4)
    assert not isinstance(info.value, StdoutNoiseError)
    assert "invalid UTF-8 on stdout (line 4, byte 38)" in str(info.value)
    assert "must be UTF-8 encoded" in str(info.value)


def test_invalid_utf8_that_is_not_json_is_noise() -> None:
    with pytest.raises(StdoutNoiseError, match=r"\(line 2\).*print logs to stderr"):
        parse_line(b"\xff\xfe binary \x80", 2)


def test_absurd_values_become_protocol_errors() -> None:
    with pytest.raises(ProtocolError, match="nested too deeply"):
        parse_line(b"[" * 100_000 + b"]" * 100_000, 1)
    with pytest.raises(ProtocolError, match="cannot be read"):
        parse_line(b'{"type":"final_output","output":{"n":' + b"9" * 5000 + b"}}", 1)


@given(st.binary(max_size=200))
def test_no_bytes_escape_as_anything_but_a_protocol_error(raw: bytes) -> None:
    try:
        message = parse_line(raw, 1)
    except ProtocolError as exc:
        assert exc.line_no == 1 and "line 1" in str(exc)
    else:
        assert message is None or isinstance(message, MESSAGE_CLASSES)


@given(json_values)
def test_any_json_value_parses_or_fails_as_a_protocol_error(value: Any) -> None:
    try:
        message = parse_line(json.dumps(value).encode(), 1)
    except ProtocolError as exc:
        assert not isinstance(exc, StdoutNoiseError)  # it is JSON, so never "noise"
    else:
        assert message is None or isinstance(message, MESSAGE_CLASSES)


@given(st.dictionaries(st.text(max_size=8), json_values, max_size=4))
def test_final_output_round_trips_through_encode(output: dict[str, Any]) -> None:
    assert parse_line(encode({"type": "final_output", "output": output}), 1) == FinalOutputMsg(
        output
    )


def test_json_type_names() -> None:
    values: list[Any] = [None, True, 1, 1.5, "s", [], {}]
    assert [json_type(v) for v in values] == [
        "null",
        "boolean",
        "number",
        "number",
        "string",
        "array",
        "object",
    ]


def test_local_tool_calls_and_tool_reports_parse() -> None:
    call = protocol.parse_line(
        b'{"type":"tool_call","name":"t","call_id":"1","args":{},"local":true}', 1
    )
    assert call == protocol.ToolCallMsg("t", "1", {}, local=True)
    report = protocol.parse_line(
        b'{"type":"tool_report","call_id":"1","ok":false,"result":null,"error":"boom"}', 2
    )
    assert report == protocol.ToolReportMsg("1", ok=False, result=None, error="boom")
    assert protocol.message_type(report) == "tool_report"
    # The runner's own tool_run echoed back is ignored like task_start and tool_result.
    assert protocol.parse_line(b'{"type":"tool_run","call_id":"1"}', 3) is None


@pytest.mark.parametrize(
    ("extra", "local"),
    [("", False), (',"local":null', False), (',"local":false', False), (',"local":true', True)],
)
def test_a_well_formed_tool_call_parses_whatever_local_says(extra: str, local: bool) -> None:
    line = '{"type":"tool_call","name":"t","call_id":"1","args":{"q":[1]}' + extra + "}"
    call = protocol.parse_line(line.encode(), 1)
    assert call == protocol.ToolCallMsg("t", "1", {"q": [1]}, local=local)
    assert isinstance(call, protocol.ToolCallMsg) and type(call.local) is bool


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        (b'{"type":"tool_call","name":"t","call_id":"1","args":{},"local":1}', "local must be a"),
        (b'{"type":"tool_call","name":"t","call_id":1,"args":{}}', "call_id must be a string"),
        (b'{"type":"tool_call","name":"t","call_id":"1","args":[]}', "args must be a JSON object"),
        (b'{"type":"tool_call","call_id":"1","args":{}}', "tool_call.name is missing"),
        (b'{"type":"tool_report","call_id":"1"}', "tool_report.ok is missing"),
        (b'{"type":"tool_report","call_id":2,"ok":true}', "tool_report.call_id must be a string"),
    ],
)
def test_invalid_local_calls_and_reports_are_protocol_errors(line: bytes, problem: str) -> None:
    with pytest.raises(ProtocolError, match=problem):
        protocol.parse_line(line, 1)


def test_errors_on_the_fd_channel_name_the_channel_not_stdout() -> None:
    with pytest.raises(ProtocolError) as caught:
        protocol.parse_line(b"not json", 4, "channel")
    assert "on channel (line 4)" in str(caught.value)
    assert "stdout" not in str(caught.value)
