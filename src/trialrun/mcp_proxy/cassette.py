"""The MCP cassette: one JSONL file per server and case, its validation and its matching keys.

Three kinds of line, one JSON object each with its keys sorted (see docs/mcp.md):

* the header (optional, first line): ``{"kind": "header", "schema_version": 1, "server": ...,
  "era": ..., "upstream": [...]}``;
* an exchange: ``{"method": M, "params": P, "result": R}`` or ``... "error": {code, message}``
  for ``initialize``, ``server/discover``, ``ping``, the ``*/list`` methods,
  ``completion/complete`` (answered every time they are asked) and for ``resources/read`` and
  ``prompts/get`` (consumed once each, in order);
* a tool call in trialrun's tool-cassette shape: ``{"tool", "args", "ok", "result", "error"}``
  plus ``progress`` (the recorded progress notifications, token removed), ``rpc_error`` (when the
  call failed with a JSON-RPC error), ``duration_ms``, ``meta`` (the caller's ``_meta`` for
  audit), ``input_responses`` (2026-07-28 input-required retries), ``inside_tool`` (the
  agent's tool whose body made the call while recording; absent otherwise) and ``recorded_at``
  (when it was recorded, ISO 8601 UTC; absent in older files).

``P`` holds only what the answer depends on: nothing for ``initialize``/``server/discover``/
``ping``, the ``cursor`` for list pages (pages are keyed by cursor and the recorded cursor strings
are served verbatim), all params but ``_meta`` otherwise. Request ids, progress tokens and
``_meta`` never enter a key.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from trialrun.base import canonjson
from trialrun.base.fsutil import atomic_write_bytes, escape_lone_surrogates
from trialrun.base.jsonnumbers import loads_finite
from trialrun.base.nesting import nests_deeper_than, too_deep
from trialrun.base.redact import DATA_KEYS, redact
from trialrun.errors import CassetteError
from trialrun.mcp_proxy.jsonrpc import JsonObject

SCHEMA_VERSION = 1

IDEMPOTENT_METHODS = frozenset(
    {
        "initialize",
        "server/discover",
        "ping",
        "tools/list",
        "resources/list",
        "resources/templates/list",
        "prompts/list",
        "completion/complete",
    }
)
CONSUMED_METHODS = frozenset({"resources/read", "prompts/get"})
LIST_METHODS = frozenset(m for m in IDEMPOTENT_METHODS if m.endswith("/list"))
_NO_KEY_METHODS = frozenset({"initialize", "server/discover", "ping"})

# List answers carry JSON Schemas whose property *names* are data: a tool parameter called
# ``api_key`` must keep its schema, or the replayed tools/list would be broken.
_SCHEMA_DATA_KEYS = DATA_KEYS | {"properties", "patternProperties", "$defs", "definitions"}


@dataclass(frozen=True, slots=True)
class ExchangeRecord:
    """A recorded request/answer pair other than a tool call."""

    method: str
    params: JsonObject
    result: Any = None
    error: JsonObject | None = None
    line: int = 0

    @property
    def key(self) -> str:
        return exchange_key(self.method, self.params)

    def to_json(self) -> JsonObject:
        line: JsonObject = {"method": self.method, "params": self.params}
        if self.error is not None:
            line["error"] = self.error
        else:
            line["result"] = self.result
        return line


@dataclass(frozen=True, slots=True)
class CallRecord:
    """A recorded ``tools/call``: the tool-cassette fields plus what MCP replay needs."""

    tool: str
    args: JsonObject
    ok: bool
    result: Any
    error: str | None
    progress: tuple[JsonObject, ...] = ()
    rpc_error: JsonObject | None = None
    input_responses: Any = None
    duration_ms: float | None = None
    meta: JsonObject | None = None
    line: int = 0
    inside_tool: str | None = None
    """The agent's tool whose real body made this call while recording (the call arrived while
    that tool ran): replay answers the tool from its cassette and never runs the body, so this
    recording is expected to stay unused there."""
    recorded_at: str | None = None
    """When the call was recorded (ISO 8601, UTC); None in files written before it was kept."""

    @property
    def key(self) -> str:
        return call_key(self.tool, self.args, self.input_responses)

    def to_json(self) -> JsonObject:
        line: JsonObject = {
            "tool": self.tool,
            "args": self.args,
            "ok": self.ok,
            "result": self.result,
            "error": self.error,
        }
        optional = {
            "progress": list(self.progress) or None,
            "rpc_error": self.rpc_error,
            "input_responses": self.input_responses,
            "duration_ms": self.duration_ms,
            "meta": self.meta or None,
            "inside_tool": self.inside_tool,  # absent when None: older files stay byte for byte
            "recorded_at": self.recorded_at,
        }
        line.update((k, v) for k, v in optional.items() if v is not None)
        return line


Record = ExchangeRecord | CallRecord


@dataclass(frozen=True)
class McpCassette:
    """A loaded cassette: the optional header and every record in file order."""

    path: Path | None
    header: JsonObject | None
    records: tuple[Record, ...]

    @property
    def calls(self) -> list[CallRecord]:
        return [r for r in self.records if isinstance(r, CallRecord)]

    @property
    def exchanges(self) -> list[ExchangeRecord]:
        return [r for r in self.records if isinstance(r, ExchangeRecord)]


def exchange_params(method: str, params: Mapping[str, Any]) -> JsonObject:
    """The part of a request's params that its recorded answer is looked up by."""
    if method in _NO_KEY_METHODS:
        return {}
    if method in LIST_METHODS:
        cursor = params.get("cursor")
        return {"cursor": cursor} if cursor is not None else {}
    return {k: v for k, v in params.items() if k != "_meta"}


def exchange_key(method: str, params: Mapping[str, Any]) -> str:
    return method + " " + canonical(dict(params))


def call_key(tool: str, args: Mapping[str, Any], input_responses: Any = None) -> str:
    key = tool + " " + canonical(dict(args))
    if input_responses is not None:
        key += " " + canonical(input_responses)
    return key


def canonical(value: Any) -> str:
    """``canonjson.dumps``, or for what it refuses (an integer no double can hold) exact JSON.

    A key must never raise: the value came off the wire, and one odd number must not take the
    proxy down. Such a value cannot collide with a canonical one, so matching stays exact.
    """
    try:
        return canonjson.dumps(value)
    except (ValueError, TypeError):
        return json.dumps(value, sort_keys=True, separators=(",", ":"), default=repr)


# ---- writing ----------------------------------------------------------------------------------


def cassette_lines(header: JsonObject | None, records: Iterable[Record]) -> bytes:
    """The file's bytes: every line redacted, one JSON object a line, its keys sorted."""
    lines = [] if header is None else [_line(redact(header))]
    for record in records:
        data_keys = (
            _SCHEMA_DATA_KEYS
            if isinstance(record, ExchangeRecord) and record.method in LIST_METHODS
            else DATA_KEYS
        )
        lines.append(_line(redact(record.to_json(), data_keys=data_keys)))
    return b"".join(lines)


def write_cassette(path: Path, header: JsonObject | None, records: Iterable[Record]) -> None:
    """Replace the cassette atomically (temp file + rename): a reader never sees half of it."""
    atomic_write_bytes(path, cassette_lines(header, records))


def _line(value: JsonObject) -> bytes:
    # The line's own keys are sorted; recorded messages keep their wire key order, so a replayed
    # result serializes exactly as the server sent it (an agent may show it to a model verbatim).
    ordered = {key: value[key] for key in sorted(value)}
    text = json.dumps(ordered, ensure_ascii=False, allow_nan=False)
    return (escape_lone_surrogates(text) + "\n").encode("utf-8")


# ---- loading ----------------------------------------------------------------------------------


def load_cassette(path: str | Path) -> McpCassette:
    """Parse and validate a cassette; the first problem raises ``CassetteError`` (file, line)."""
    cassette, problems = read_cassette(path)
    if problems:
        raise problems[0]
    assert cassette is not None
    return cassette


def read_cassette(path: str | Path) -> tuple[McpCassette | None, list[CassetteError]]:
    """Parse a cassette and collect every problem in it (a suite's load reports them all).

    The cassette is None when the file cannot be read or decoded at all. The file is read one
    line at a time: its records are all a large cassette holds in memory, not its bytes, its
    text and its lines beside them.
    """
    file = Path(path)
    try:
        with open(file, "rb") as stream:
            return _read_lines(stream, file)
    except FileNotFoundError:
        missing = (
            "cassette not found (replay needs a recorded cassette: run once with --mode record)"
        )
        return None, [CassetteError(missing, file=file)]
    except IsADirectoryError:
        return None, [CassetteError("expected a cassette file, found a directory", file=file)]
    except OSError as exc:
        return None, [CassetteError(f"cannot read cassette: {exc.strerror or exc}", file=file)]


def _read_lines(stream: BinaryIO, file: Path) -> tuple[McpCassette | None, list[CassetteError]]:
    header: JsonObject | None = None
    records: list[Record] = []
    problems: list[CassetteError] = []
    seen_line = False
    for line_no, raw in enumerate(stream, start=1):
        try:
            line_text = raw.removesuffix(b"\n").decode("utf-8")
        except UnicodeDecodeError as exc:
            message = f"expected UTF-8 text, found byte 0x{raw[exc.start]:02x}"
            return None, [CassetteError(message, file=file, line=line_no)]
        if line_no == 1:
            line_text = line_text.removeprefix("\ufeff")
        if not line_text.strip():
            continue
        try:
            raw_line = _parse_line(line_text, file, line_no)
            if raw_line.get("kind") == "header":
                if seen_line:
                    raise CassetteError(
                        "the header must be the first line", file=file, line=line_no
                    )
                header = _check_header(raw_line, file, line_no)
            else:
                records.append(_parse_record(raw_line, file, line_no))
        except CassetteError as exc:
            problems.append(exc)
        seen_line = True
    return McpCassette(path=file, header=header, records=tuple(records)), problems


def load_replay_cassette(path: str | Path) -> McpCassette:
    """``load_cassette`` for serving: an empty file cannot answer even ``initialize``."""
    loaded = load_cassette(path)
    if loaded.header is None and not loaded.records:
        raise CassetteError(
            "the cassette is empty; expected recordings (run once with --mode record)",
            file=Path(path),
        )
    return loaded


def _parse_line(text: str, file: Path, line_no: int) -> JsonObject:
    try:
        raw = loads_finite(text)
    except json.JSONDecodeError as exc:
        raise CassetteError(
            f"invalid JSON: {exc.msg} at column {exc.colno}", file=file, line=line_no
        ) from None
    except (ValueError, RecursionError) as exc:
        raise CassetteError(f"invalid JSON: {exc}", file=file, line=line_no) from None
    if nests_deeper_than(raw, text=text):
        raise CassetteError(too_deep("the recording"), file=file, line=line_no)
    if not isinstance(raw, dict):
        raise CassetteError(
            f"expected a JSON object per line, found {_type_name(raw)}", file=file, line=line_no
        )
    return raw


def _check_header(raw: JsonObject, file: Path, line_no: int) -> JsonObject:
    version = raw.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise CassetteError(
            f"header 'schema_version' must be an integer, found {_type_name(version)}",
            file=file,
            line=line_no,
        )
    if version > SCHEMA_VERSION:
        raise CassetteError(
            f"cassette schema_version {version} is newer than this trialrun reads "
            f"({SCHEMA_VERSION}); upgrade trialrun",
            file=file,
            line=line_no,
        )
    return raw


def _parse_record(raw: JsonObject, file: Path, line_no: int) -> Record:
    def fail(message: str) -> CassetteError:
        return CassetteError(message, file=file, line=line_no)

    def expect(key: str, kinds: type | tuple[type, ...], what: str, *, required: bool) -> Any:
        if key not in raw:
            if required:
                raise fail(f"missing required key '{key}' (expected {what})")
            return None
        value = raw[key]
        if value is None and not required:
            return None
        if not isinstance(value, kinds) or (isinstance(value, bool) and kinds is not bool):
            raise fail(f"'{key}' must be {what}, found {_type_name(value)}")
        return value

    if "tool" in raw:
        tool = expect("tool", str, "a string", required=True)
        args = expect("args", dict, "an object", required=True)
        ok = expect("ok", bool, "true or false", required=True)
        error = expect("error", str, "a string or null", required=False)
        progress = expect("progress", list, "a list of objects", required=False) or []
        if not all(isinstance(p, dict) for p in progress):
            raise fail("'progress' must be a list of objects")
        rpc_error = expect("rpc_error", dict, "an object", required=False)
        if rpc_error is not None:
            _check_error_object(rpc_error, "rpc_error", fail)
        duration = expect("duration_ms", (int, float), "a number", required=False)
        return CallRecord(
            tool=tool,
            args=args,
            ok=ok,
            result=raw.get("result"),
            error=error,
            progress=tuple(progress),
            rpc_error=rpc_error,
            input_responses=raw.get("input_responses"),
            duration_ms=float(duration) if duration is not None else None,
            meta=expect("meta", dict, "an object", required=False),
            line=line_no,
            inside_tool=expect("inside_tool", str, "a string (a tool's name)", required=False),
            recorded_at=expect("recorded_at", str, "an ISO 8601 time (a string)", required=False),
        )
    if "method" in raw:
        method = expect("method", str, "a string", required=True)
        if method == "tools/call":
            raise fail("tools/call is recorded as a tool line ('tool', 'args', 'ok', ...)")
        params = expect("params", dict, "an object", required=False) or {}
        has_result, has_error = "result" in raw, raw.get("error") is not None
        if has_result == has_error:
            raise fail("an exchange needs exactly one of 'result' and 'error'")
        error = None
        if has_error:
            error = expect("error", dict, "an object with 'code' and 'message'", required=True)
            _check_error_object(error, "error", fail)
        return ExchangeRecord(
            method=method,
            params=exchange_params(method, params),
            result=raw.get("result"),
            error=error,
            line=line_no,
        )
    raise fail(
        "expected a tool call (with 'tool'), an exchange (with 'method') "
        "or the header ('kind': 'header')"
    )


def _check_error_object(error: JsonObject, name: str, fail: Any) -> None:
    code, message = error.get("code"), error.get("message")
    if not isinstance(code, int) or isinstance(code, bool):
        raise fail(f"'{name}.code' must be an integer, found {_type_name(code)}")
    if not isinstance(message, str):
        raise fail(f"'{name}.message' must be a string, found {_type_name(message)}")


def _type_name(value: Any) -> str:
    names = {
        type(None): "null",
        bool: "true/false",
        int: "a number",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "an object",
    }
    return names.get(type(value), type(value).__name__)
