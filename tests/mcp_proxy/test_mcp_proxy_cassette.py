"""The MCP cassette format, the events file, ``proxy_command`` and the CLI's argument checks."""

from __future__ import annotations

import json
import os
import string
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trialrun.cli import run_cli
from trialrun.errors import CassetteError, TrialrunError
from trialrun.mcp_proxy import load_cassette, proxy_command, read_events
from trialrun.mcp_proxy.cassette import (
    SCHEMA_VERSION,
    CallRecord,
    ExchangeRecord,
    cassette_lines,
    write_cassette,
)
from trialrun.mcp_proxy.jsonrpc import read_lines


def load_text(tmp_path: Path, text: str) -> Any:
    path = tmp_path / "c.jsonl"
    path.write_text(text, encoding="utf-8")
    return load_cassette(path)


def error_of(tmp_path: Path, text: str) -> CassetteError:
    with pytest.raises(CassetteError) as info:
        load_text(tmp_path, text)
    return info.value


GOOD_CALL = '{"tool": "t", "args": {}, "ok": true, "result": null, "error": null}'


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("[1, 2]\n", 1, "expected a JSON object per line, found a list"),
        ('{"tool": "t"\n', 1, "invalid JSON"),
        ("NaN\n", 1, "invalid JSON: NaN is not valid JSON"),
        (GOOD_CALL + "\n-1e400\n", 2, "invalid JSON: -1e400 is beyond the range of a JSON number"),
        (GOOD_CALL + '\n{"tool": "t", "ok": true}\n', 2, "missing required key 'args'"),
        ('{"tool": "t", "args": [], "ok": true}\n', 1, "'args' must be an object, found a list"),
        ('{"tool": "t", "args": {}, "ok": "yes"}\n', 1, "'ok' must be true or false"),
        ('{"tool": 3, "args": {}, "ok": true}\n', 1, "'tool' must be a string, found a number"),
        (
            '{"tool": "t", "args": {}, "ok": true, "error": 5}\n',
            1,
            "'error' must be a string or null",
        ),
        (
            '{"tool": "t", "args": {}, "ok": true, "progress": [1]}\n',
            1,
            "'progress' must be a list",
        ),
        (
            '{"tool": "t", "args": {}, "ok": false, "rpc_error": {"message": "x"}}\n',
            1,
            "'rpc_error.code'",
        ),
        (
            '{"tool": "t", "args": {}, "ok": true, "duration_ms": true}\n',
            1,
            "'duration_ms' must be",
        ),
        (
            '{"tool": "t", "args": {}, "ok": true, "inside_tool": 7}\n',
            1,
            "'inside_tool' must be a string (a tool's name), found a number",
        ),
        ('{"method": "ping", "params": {}}\n', 1, "exactly one of 'result' and 'error'"),
        (
            '{"method": "ping", "result": {}, "error": {"code": 1, "message": "m"}}\n',
            1,
            "exactly one",
        ),
        ('{"method": "ping", "error": {"code": "x", "message": "m"}}\n', 1, "'error.code' must be"),
        ('{"method": "tools/call", "result": {}}\n', 1, "tools/call is recorded as a tool line"),
        ('{"something": 1}\n', 1, "expected a tool call (with 'tool'), an exchange"),
        (GOOD_CALL + '\n{"kind": "header", "schema_version": 1}\n', 2, "header must be the first"),
        ('{"kind": "header", "schema_version": "1"}\n', 1, "'schema_version' must be an integer"),
        ('{"kind": "header", "schema_version": 99}\n', 1, "schema_version 99 is newer"),
        (
            '{"tool": "t", "args": {"x": ' + "[" * 99 + "]" * 99 + '}, "ok": true}\n',
            1,
            "the recording nests objects and arrays more than 100 levels deep",
        ),
    ],
)
def test_invalid_lines_are_reported_with_file_and_line(
    tmp_path: Path, text: str, line: int, message: str
) -> None:
    error = error_of(tmp_path, text)
    assert error.line == line
    assert message in error.message
    assert str(error).startswith(f"{tmp_path / 'c.jsonl'}:{line}: ")


def test_bad_utf8_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_bytes(GOOD_CALL.encode() + b"\n" + b'{"tool": "\xff"}\n')
    with pytest.raises(CassetteError) as info:
        load_cassette(path)
    assert info.value.line == 2 and "0xff" in info.value.message


def test_missing_and_directory_cassettes(tmp_path: Path) -> None:
    with pytest.raises(CassetteError, match="cassette not found"):
        load_cassette(tmp_path / "nope.jsonl")
    with pytest.raises(CassetteError, match="found a directory"):
        load_cassette(tmp_path)


def test_blank_lines_bom_and_the_tool_cassette_shape_load(tmp_path: Path) -> None:
    cassette = load_text(tmp_path, "\ufeff\n" + GOOD_CALL + "\n\n   \n")
    [call] = cassette.calls
    assert (call.tool, call.args, call.ok, call.line) == ("t", {}, True, 2)
    assert cassette.header is None


def test_write_then_load_round_trips_and_keeps_wire_key_order(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "c.jsonl"
    result = {"structuredContent": {"zeta": 1, "alpha": 2}, "content": [], "isError": False}
    records = [
        ExchangeRecord("tools/list", {"cursor": "p2"}, result={"tools": [], "nextCursor": None}),
        ExchangeRecord("server/discover", {}, error={"code": -32601, "message": "nope"}),
        CallRecord("t", {"b": 1, "a": [1.5, None]}, True, result, None, ({"progress": 1},)),
        CallRecord(
            "t", {}, False, None, "JSON-RPC error -1: x", rpc_error={"code": -1, "message": "x"}
        ),
    ]
    header = {"kind": "header", "schema_version": SCHEMA_VERSION, "server": "s"}
    write_cassette(path, header, records)
    loaded = load_cassette(path)
    assert loaded.header == header
    assert [r.to_json() for r in loaded.records] == [r.to_json() for r in records]
    first_call = path.read_text().splitlines()[3]
    assert list(json.loads(first_call)) == sorted(json.loads(first_call))  # the line's keys
    assert '"zeta": 1, "alpha": 2' in first_call  # the recorded message's own order


def test_everything_written_is_redacted_but_schemas_keep_their_property_names() -> None:
    schema = {"type": "object", "properties": {"api_key": {"type": "string"}, "q": {}}}
    data = cassette_lines(
        {"kind": "header", "schema_version": 1, "upstream": ["srv", "--token=ghp_" + "a" * 36]},
        [
            ExchangeRecord(
                "tools/list", {}, result={"tools": [{"name": "x", "inputSchema": schema}]}
            ),
            CallRecord(
                "login",
                {"user": "ann", "password": "hunter2"},
                True,
                {"content": [{"type": "text", "text": "key sk-" + "b" * 40}]},
                None,
                meta={"authorization": "Bearer abc.def"},
            ),
        ],
    ).decode()
    assert "hunter2" not in data and "ghp_" not in data and "sk-bbbb" not in data
    assert "abc.def" not in data
    listing = json.loads(data.splitlines()[1])
    assert listing["result"]["tools"][0]["inputSchema"] == schema


SAFE_TEXT = st.text(alphabet=string.ascii_letters + string.digits + " ", max_size=12)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | SAFE_TEXT,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["q", "n", "hits", "page"]), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=60)
@given(
    tool=st.text(alphabet=string.ascii_lowercase + "_", min_size=1, max_size=10),
    args=st.dictionaries(st.sampled_from(["q", "n", "limit"]), JSON_VALUES, max_size=3),
    result=JSON_VALUES,
    ok=st.booleans(),
    inside=st.none() | st.text(alphabet=string.ascii_lowercase + "_", min_size=1, max_size=10),
)
def test_any_recorded_call_round_trips(
    tmp_path_factory: pytest.TempPathFactory,
    tool: str,
    args: dict[str, Any],
    result: Any,
    ok: bool,
    inside: str | None,
) -> None:
    path = tmp_path_factory.mktemp("example") / "rt.jsonl"
    record = CallRecord(tool, args, ok, result, None if ok else "failed", inside_tool=inside)
    write_cassette(path, None, [record])
    [loaded] = load_cassette(path).calls
    assert (loaded.key, loaded.result, loaded.ok, loaded.error, loaded.inside_tool) == (
        record.key,
        result,
        ok,
        record.error,
        inside,
    )
    # Unmarked, the line is what it was before the field existed.
    assert ("inside_tool" in json.loads(path.read_text(encoding="utf-8"))) == (inside is not None)


@settings(max_examples=150)
@given(
    st.lists(
        st.one_of(
            st.text(max_size=40),
            st.builds(json.dumps, JSON_VALUES),
            st.sampled_from([GOOD_CALL, '{"method": "ping", "result": {}}', '{"kind": "header"}']),
        ),
        max_size=5,
    )
)
def test_the_loader_either_loads_or_raises_cassette_error(
    tmp_path_factory: pytest.TempPathFactory, lines: list[str]
) -> None:
    path = tmp_path_factory.mktemp("example") / "fuzz.jsonl"
    path.write_text("\n".join(lines), encoding="utf-8", errors="surrogatepass")
    try:
        load_cassette(path)
    except CassetteError as exc:
        assert exc.line is None or 1 <= exc.line <= max(1, len("\n".join(lines).split("\n")))


@settings(max_examples=80)
@given(st.lists(st.binary(max_size=300), max_size=12), st.sampled_from([b"\n", b"\r\n"]))
def test_line_reader_splits_any_stream_like_split_does(chunks: list[bytes], eol: bytes) -> None:
    data = eol.join(chunks)
    read_fd, write_fd = os.pipe()
    try:
        os.write(write_fd, data)  # small enough for the pipe buffer
        os.close(write_fd)
        lines = list(read_lines(read_fd))
    finally:
        os.close(read_fd)
    assert lines == [part.strip() for part in data.split(b"\n") if part.strip()]


def test_line_reader_handles_lines_larger_than_its_read_size() -> None:
    big = b'{"x": "' + b"a" * 300_000 + b'"}'
    read_fd, write_fd = os.pipe()

    def write_all() -> None:
        view = memoryview(big + b"\n\n" + big)
        while view:
            view = view[os.write(write_fd, view) :]
        os.close(write_fd)

    writer = threading.Thread(target=write_all)
    writer.start()
    try:
        assert list(read_lines(read_fd)) == [big, big]
    finally:
        writer.join()
        os.close(read_fd)


def test_proxy_command_builds_the_documented_argv() -> None:
    argv = proxy_command(
        ["node", "srv.js"], cassette="c.jsonl", mode="record", name="docs", events="e.jsonl"
    )
    assert argv == [
        sys.executable, "-m", "trialrun", "mcp-proxy", "--cassette", "c.jsonl", "--mode",
        "record", "--name", "docs", "--events", "e.jsonl", "--", "node", "srv.js",
    ]  # fmt: skip
    assert proxy_command([], cassette="c", mode="replay", name="n", python="py")[-2:] == ["n", "--"]
    with pytest.raises(ValueError, match="mode must be"):
        proxy_command(["x"], cassette="c", mode="live", name="n")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="needs the MCP server command"):
        proxy_command([], cassette="c", mode="record", name="n")


def test_read_events_tolerates_only_a_cut_off_last_line(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    assert read_events(events) == []
    events.write_text('{"tool": "a"}\n{"tool": "b", "ar')
    assert read_events(events) == [{"tool": "a"}]
    events.write_text('{"tool": "a"}\n{"tool": "b"}')  # complete, newline not yet written
    assert [e["tool"] for e in read_events(events)] == ["a", "b"]
    events.write_text('{"tool": "a"}\nbroken\n{"tool": "c"}\n')
    with pytest.raises(TrialrunError, match=r"events.jsonl:2: expected a JSON event"):
        read_events(events)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--mode", "record", "--cassette", "c.jsonl"], "record mode needs the MCP server command"),
        (["--mode", "replay"], "stdio mode needs --cassette FILE"),
        (["--mode", "replay", "--http", "nohost", "--cassette-dir", "d"], "expected HOST:PORT"),
        (["--mode", "replay", "--http", "127.0.0.1:99999", "--cassette-dir", "d"], "HOST:PORT"),
        (["--mode", "replay", "--http", "127.0.0.1:0"], "--http needs --cassette-dir"),
        (["--mode", "replay", "--cassette", "c", "--cassette-dir", "d"], "go with --http"),
        (["--mode", "live", "--cassette", "c"], "'live' is not one of"),
    ],
)
def test_cli_argument_errors_exit_2(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["mcp-proxy", *args]) == 2
    assert message in capsys.readouterr().err
