"""Record: watch the traffic between a client and a live MCP server, keep what replay needs.

The recorder never changes a message; the transport forwards them and shows each one to
``from_client`` / ``from_server`` (both may be called from different threads). Requests are
paired with their responses by id, and progress notifications with their request by progress
token; neither id nor token is kept. ``records()`` lists what was answered, in the order the
requests arrived, each idempotent answer once (the first one stands). In update mode a call
answered from the old cassette takes its place in that order through ``copy_line``, and is
written as its old line.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trialrun.base.fsutil import atomic_write_bytes
from trialrun.base.recordtime import recorded_at
from trialrun.mcp_proxy import jsonrpc
from trialrun.mcp_proxy.cassette import (
    CONSUMED_METHODS,
    IDEMPOTENT_METHODS,
    SCHEMA_VERSION,
    CallRecord,
    ExchangeRecord,
    Record,
    cassette_lines,
    exchange_params,
)
from trialrun.mcp_proxy.events import EventLog, call_outcome
from trialrun.mcp_proxy.jsonrpc import JsonObject

RECORDED_METHODS = IDEMPOTENT_METHODS | CONSUMED_METHODS | {"tools/call"}
_PROTOCOL_META_PREFIX = "io.modelcontextprotocol/"


@dataclass
class _Pending:
    method: str
    params: JsonObject
    seq: int
    started: float
    started_clock: float
    token: str | None
    progress: list[JsonObject] = field(default_factory=list)


class Recorder:
    """Pairs requests with answers and turns them into cassette records."""

    def __init__(
        self, *, server_name: str, upstream: Sequence[str], events: EventLog | None = None
    ) -> None:
        self.server_name = server_name
        self.upstream = list(upstream)
        self.events = events
        self.answered = False
        """Whether the server ever sent anything (a server that never did failed to start)."""
        self._lock = threading.Lock()
        self._all_answered = threading.Condition(self._lock)
        self._seq = 0
        self._pending: dict[str, _Pending] = {}
        self._by_token: dict[str, str] = {}
        # (arrival, record, its line as copied from an old recording by update mode or None)
        self._done: list[tuple[int, Record, bytes | None]] = []
        self._era: str | None = None

    def from_client(self, message: Any) -> None:
        for item in message if isinstance(message, list) else [message]:
            if jsonrpc.is_request(item) and item["method"] in RECORDED_METHODS:
                self._start(item)

    def from_server(self, message: Any) -> None:
        self.answered = True
        for item in message if isinstance(message, list) else [message]:
            if jsonrpc.is_response(item):
                self._finish(item)
            elif jsonrpc.is_notification(item) and item["method"] == "notifications/progress":
                self._progress(item)

    def _start(self, request: JsonObject) -> None:
        token = jsonrpc.progress_token(request)
        token_key = jsonrpc.id_key(token) if token is not None else None
        with self._lock:
            self._seq += 1
            key = jsonrpc.id_key(request["id"])
            self._pending[key] = _Pending(
                method=request["method"],
                params=jsonrpc.params_of(request),
                seq=self._seq,
                started=time.time(),
                started_clock=time.perf_counter(),
                token=token_key,
            )
            if token_key is not None:
                self._by_token[token_key] = key

    def _progress(self, notification: JsonObject) -> None:
        params = jsonrpc.params_of(notification)
        token = params.get("progressToken")
        if token is None:
            return
        with self._lock:
            request_key = self._by_token.get(jsonrpc.id_key(token))
            pending = self._pending.get(request_key) if request_key is not None else None
            if pending is not None:
                pending.progress.append({k: v for k, v in params.items() if k != "progressToken"})

    def _finish(self, response: JsonObject) -> None:
        with self._lock:
            pending = self._pending.pop(jsonrpc.id_key(response["id"]), None)
            if pending is None:
                return
            if pending.token is not None:
                self._by_token.pop(pending.token, None)
            if not self._pending:
                self._all_answered.notify_all()
        error = response.get("error")
        rpc_error = error if isinstance(error, dict) else None
        result = None if rpc_error is not None else response.get("result")
        record: Record | None
        if pending.method == "tools/call":
            record = self._call_record(pending, result, rpc_error)
        else:
            record = ExchangeRecord(
                method=pending.method,
                params=exchange_params(pending.method, pending.params),
                result=result,
                error=rpc_error,
            )
            self._note_era(pending, result)
        if record is not None:
            with self._lock:
                self._done.append((pending.seq, record, None))

    def _call_record(
        self, pending: _Pending, result: Any, rpc_error: JsonObject | None
    ) -> CallRecord | None:
        tool, args = pending.params.get("name"), pending.params.get("arguments")
        args = {} if args is None else args
        if not isinstance(tool, str) or not isinstance(args, dict):
            return None  # the server rejected a malformed call; replay rejects it the same way
        ok, error = call_outcome(result, rpc_error)
        duration_ms = round((time.perf_counter() - pending.started_clock) * 1000, 3)
        if self.events is not None:
            self.events.tool_call(
                tool=tool,
                args=args,
                ok=ok,
                result=result,
                error=error,
                timestamp=pending.started,
                duration_ms=duration_ms,
            )
        meta = pending.params.get("_meta")
        audit = {
            k: v
            for k, v in (meta.items() if isinstance(meta, dict) else ())
            if k != "progressToken" and not k.startswith(_PROTOCOL_META_PREFIX)
        }
        return CallRecord(
            tool=tool,
            args=args,
            ok=ok,
            result=result,
            error=error,
            progress=tuple(pending.progress),
            rpc_error=rpc_error,
            input_responses=pending.params.get("inputResponses"),
            duration_ms=duration_ms,
            meta=audit or None,
            recorded_at=recorded_at(),
        )

    def _note_era(self, pending: _Pending, result: Any) -> None:
        if not isinstance(result, dict):
            return
        if pending.method == "initialize" and isinstance(result.get("protocolVersion"), str):
            self._era = result["protocolVersion"]
        elif pending.method == "server/discover":
            meta = pending.params.get("_meta")
            version = (
                meta.get(_PROTOCOL_META_PREFIX + "protocolVersion")
                if isinstance(meta, dict)
                else None
            )
            self._era = version if isinstance(version, str) else self._era

    @property
    def requests(self) -> int:
        """How many recorded requests the client sent."""
        with self._lock:
            return self._seq

    @property
    def unanswered(self) -> int:
        """How many of them the server has not answered yet."""
        with self._lock:
            return len(self._pending)

    def wait_answered(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for every request sent so far to be answered."""
        with self._all_answered:
            return self._all_answered.wait_for(lambda: not self._pending, timeout)

    def header(self) -> JsonObject:
        return {
            "kind": "header",
            "schema_version": SCHEMA_VERSION,
            "server": self.server_name,
            "era": self._era,
            "upstream": self.upstream,
        }

    def copy_line(self, record: CallRecord, line: bytes) -> None:
        """Update mode: ``record`` answered a call from the old cassette, whose ``line`` (with
        its newline) the new one holds byte for byte, in the call's place."""
        with self._lock:
            self._seq += 1
            self._done.append((self._seq, record, line))

    def records(self) -> list[Record]:
        return [record for record, _line in self._entries()]

    def _entries(self) -> list[tuple[Record, bytes | None]]:
        with self._lock:
            done = sorted(self._done, key=lambda entry: entry[0])
        seen: set[str] = set()
        entries: list[tuple[Record, bytes | None]] = []
        for _, record, line in done:
            if isinstance(record, ExchangeRecord) and record.method in IDEMPOTENT_METHODS:
                if record.key in seen:
                    continue
                seen.add(record.key)
            entries.append((record, line))
        return entries

    def write(self, path: Path) -> int:
        """Write the cassette atomically; returns how many records it holds."""
        entries = self._entries()
        data = cassette_lines(self.header(), ())
        data += b"".join(line or cassette_lines(None, (record,)) for record, line in entries)
        atomic_write_bytes(path, data)
        return len(entries)
