"""JSON-RPC 2.0 as the MCP proxy sees it: message kinds, replies, and newline-delimited I/O.

The proxy never validates MCP messages against a schema (that is what makes it lossless and
version-agnostic); it only needs to tell requests, notifications and responses apart, to build
error replies, and to move newline-delimited messages between file descriptors. Reads and writes
go straight to the descriptors (``os.read``/``os.write``) so that no buffered-file lock is held
by a thread that is blocked reading when the process ends.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from typing import Any

from trialrun.base.fsutil import escape_lone_surrogates
from trialrun.base.jsonnumbers import finite_float
from trialrun.base.nesting import MAX_NESTING, nests_deeper_than

JsonObject = dict[str, Any]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
# The JSON-RPC "server error" range: a replay miss is the proxy's own failure, not the tool's.
CASSETTE_MISMATCH = -32000
UPSTREAM_FAILED = -32001

_READ_CHUNK = 1 << 16


class MessageError(ValueError):
    """A line that is not a JSON value (the proxy answers it with a -32700 parse error)."""


def _reject_constant(name: str) -> Any:
    raise MessageError(f"{name} is not valid JSON")


def parse(line: bytes) -> Any:
    """The JSON value on one line; ``MessageError`` when it is not JSON."""
    try:
        value = json.loads(line, parse_constant=_reject_constant, parse_float=finite_float)
    except MessageError:
        raise
    except json.JSONDecodeError as exc:
        raise MessageError(f"invalid JSON: {exc.msg} at column {exc.colno}") from None
    except (ValueError, RecursionError) as exc:  # bad UTF-8, nesting too deep
        raise MessageError(f"invalid JSON: {exc}") from None
    if nests_deeper_than(value, text=line):
        raise MessageError(
            f"objects and arrays nested more than {MAX_NESTING} levels deep; "
            f"trialrun takes at most {MAX_NESTING}"
        )
    return value


def encode(message: Any) -> bytes:
    """One compact line, newline-terminated; lone surrogates survive as ``\\udxxx`` escapes."""
    text = json.dumps(message, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return (escape_lone_surrogates(text) + "\n").encode("utf-8")


def is_request(message: Any) -> bool:
    return isinstance(message, dict) and isinstance(message.get("method"), str) and "id" in message


def is_notification(message: Any) -> bool:
    return (
        isinstance(message, dict) and isinstance(message.get("method"), str) and "id" not in message
    )


def is_response(message: Any) -> bool:
    return (
        isinstance(message, dict)
        and "method" not in message
        and "id" in message
        and ("result" in message or "error" in message)
    )


def id_key(request_id: Any) -> str:
    """A dict key for a request id that keeps ``1`` and ``"1"`` apart, as JSON-RPC does."""
    return json.dumps(request_id, sort_keys=True)


def params_of(message: JsonObject) -> JsonObject:
    params = message.get("params")
    return params if isinstance(params, dict) else {}


def meta_of(message: JsonObject) -> JsonObject:
    meta = params_of(message).get("_meta")
    return meta if isinstance(meta, dict) else {}


def progress_token(message: JsonObject) -> Any:
    """The request's ``_meta.progressToken``, or None when it asked for no progress."""
    return meta_of(message).get("progressToken")


def result_response(request_id: Any, result: Any) -> JsonObject:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def error_response(request_id: Any, code: int, message: str, data: Any = None) -> JsonObject:
    error: JsonObject = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def progress_notification(token: Any, recorded: JsonObject) -> JsonObject:
    return {
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {**recorded, "progressToken": token},
    }


def read_lines(fd: int) -> Iterator[bytes]:
    """Newline-delimited lines from a descriptor until EOF (blank lines skipped).

    Lines of several megabytes are ordinary MCP traffic: the search for the newline only scans
    the bytes that arrived since the last search.
    """
    buffer = bytearray()
    scanned = 0
    while True:
        chunk = os.read(fd, _READ_CHUNK)
        if not chunk:
            break
        buffer += chunk
        start = 0
        while True:
            end = buffer.find(b"\n", scanned)
            if end < 0:
                break
            line = bytes(buffer[start:end]).strip()
            start = scanned = end + 1
            if line:
                yield line
        del buffer[:start]
        scanned = len(buffer)
    tail = bytes(buffer).strip()
    if tail:
        yield tail


class LineWriter:
    """Whole lines to a descriptor; several threads may write, lines never interleave."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._lock = threading.Lock()

    def write(self, data: bytes) -> None:
        """Write all of ``data``; ``OSError`` (a closed pipe) reaches the caller."""
        with self._lock:
            view = memoryview(data)
            while view:
                written = os.write(self._fd, view)
                view = view[written:]

    def send(self, message: Any) -> None:
        self.write(encode(message))
