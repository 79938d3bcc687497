"""Replay: answer an MCP client from a cassette, with no server behind it.

One ``ReplaySession`` is one replay scope (a stdio connection, or one run's URL path over HTTP):

* ``initialize``, ``server/discover``, ``ping``, the list methods and ``completion/complete`` are
  answered from their recording every time they are asked;
* ``tools/call`` consumes the first unused recording of the same tool and arguments (repeated
  identical calls get their recordings in order), ``resources/read`` and ``prompts/get`` the
  same by their params; a miss is a JSON-RPC error whose message starts ``cassette mismatch``,
  names the nearest recordings and ends with the nearest one's line and the first field where
  the call differs from it (``httprec.difference``, as model and HTTP misses); the session
  stays up. Update mode asks ``take_call`` for a ``tools/call`` and sends a miss to the server;
* replies carry the incoming request id; recorded progress is re-emitted, before the response,
  with the incoming progress token, and only when the request carried one.

Era handling: a request without the 2026-07-28 ``_meta`` protocol version comes from a
handshake-era client, so it gets results without the 2026 fields (``resultType``, ``ttlMs``,
``cacheScope``, the ``serverInfo`` stamp), and its ``initialize`` is synthesized from a recorded
``server/discover`` when only that was recorded. ``server/discover`` on a cassette recorded with
``initialize`` only gets -32601, so the client falls back to the handshake.
"""

from __future__ import annotations

import difflib
import threading
import time
from collections import deque
from typing import Any

from trialrun.base.quoting import shortened
from trialrun.base.redact import redact
from trialrun.base.words import counted, inflected
from trialrun.mcp_proxy import jsonrpc
from trialrun.mcp_proxy.cassette import (
    CONSUMED_METHODS,
    IDEMPOTENT_METHODS,
    CallRecord,
    ExchangeRecord,
    McpCassette,
    call_key,
    canonical,
    exchange_key,
    exchange_params,
)
from trialrun.mcp_proxy.events import EventLog
from trialrun.mcp_proxy.jsonrpc import JsonObject

MODERN_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"
DEFAULT_HANDSHAKE_VERSION = "2025-11-25"
_MODERN_ONLY_FIELDS = ("resultType", "ttlMs", "cacheScope")
# Requests a replayed server can acknowledge without a recording: they change nothing replay
# could show (log levels, resource subscriptions that will never fire).
_ACKNOWLEDGED = frozenset({"logging/setLevel", "resources/subscribe", "resources/unsubscribe"})
MAX_NEAREST = 3
_MAX_SCORED = 200


class ReplaySession:
    """Answers one client from one cassette; thread-safe (HTTP runs share nothing else)."""

    def __init__(
        self, cassette: McpCassette, *, server_name: str, events: EventLog | None = None
    ) -> None:
        self.cassette = cassette
        self.server_name = server_name
        self.events = events
        self._lock = threading.Lock()
        self._answers: dict[str, ExchangeRecord] = {}
        self._queued: dict[str, deque[ExchangeRecord]] = {}
        self._calls: dict[str, deque[CallRecord]] = {}
        self._used: dict[str, int] = {}
        for record in cassette.records:
            if isinstance(record, CallRecord):
                self._calls.setdefault(record.key, deque()).append(record)
            elif record.method in IDEMPOTENT_METHODS:
                self._answers.setdefault(record.key, record)  # the first answer stands
            else:
                self._queued.setdefault(record.key, deque()).append(record)
        self._queued_methods = {
            r.method for r in cassette.exchanges if r.method not in IDEMPOTENT_METHODS
        }

    def handle(self, message: Any) -> list[JsonObject]:
        """The messages to send back for one incoming message: notifications, then the reply."""
        if jsonrpc.is_notification(message) or jsonrpc.is_response(message):
            return []  # initialized, cancelled, answers to requests replay never sends
        if not jsonrpc.is_request(message):
            request_id = message.get("id") if isinstance(message, dict) else None
            problem = (
                "Invalid Request: JSON-RPC batches are not supported"
                if isinstance(message, list)
                else "Invalid Request: expected a JSON-RPC request object"
            )
            return [jsonrpc.error_response(request_id, jsonrpc.INVALID_REQUEST, problem)]
        with self._lock:
            return self._request(message)

    # ---- dispatch -----------------------------------------------------------------------------

    def _request(self, message: JsonObject) -> list[JsonObject]:
        method: str = message["method"]
        request_id = message["id"]
        params = jsonrpc.params_of(message)
        if method == "tools/call":
            return self._tool_call(message)
        if method == "initialize":
            return [self._initialize(request_id, params)]
        recorded = self._answers.get(exchange_key(method, exchange_params(method, params)))
        if recorded is not None:
            return [self._reply(message, recorded.result, recorded.error)]
        if method == "server/discover":
            return [
                jsonrpc.error_response(
                    request_id,
                    jsonrpc.METHOD_NOT_FOUND,
                    "Method not found: server/discover (the cassette was recorded with the "
                    "initialize handshake)",
                )
            ]
        if method == "ping" or method in _ACKNOWLEDGED:
            return [self._reply(message, {}, None)]
        if method in IDEMPOTENT_METHODS:
            return [self._no_answer(request_id, method, params)]
        key = exchange_key(method, exchange_params(method, params))
        queue = self._queued.get(key)
        if queue:
            record = queue.popleft()
            self._used[key] = self._used.get(key, 0) + 1
            return [self._reply(message, record.result, record.error)]
        if method in CONSUMED_METHODS or method in self._queued_methods:
            return [self._no_answer(request_id, method, params)]
        return [
            jsonrpc.error_response(
                request_id, jsonrpc.METHOD_NOT_FOUND, f"Method not found: {method}"
            )
        ]

    def _tool_call(self, message: JsonObject) -> list[JsonObject]:
        started, started_clock = time.time(), time.perf_counter()
        request_id, params = message["id"], jsonrpc.params_of(message)
        tool, args = params.get("name"), params.get("arguments")
        args = {} if args is None else args
        if not isinstance(tool, str) or not isinstance(args, dict):
            return [
                jsonrpc.error_response(
                    request_id, -32602, "tools/call needs params.name (string), arguments (object)"
                )
            ]
        input_responses = params.get("inputResponses")
        record = self._take_call(tool, args, input_responses)
        if record is None:
            reply = self._call_mismatch(request_id, tool, args, input_responses)
            error = reply["error"]["message"]
            if self.events is not None:
                self.events.tool_call(
                    tool=tool,
                    args=args,
                    ok=False,
                    result=None,
                    error=error,
                    timestamp=started,
                    duration_ms=_ms_since(started_clock),
                )
            return [reply]
        return self._answered(message, record, started, started_clock)

    def take_call(self, message: JsonObject) -> tuple[CallRecord, list[JsonObject]] | None:
        """Update mode: a ``tools/call`` request answered from its first unused recording, the
        recording with the messages to send back; None (nothing used, nothing logged) when no
        unused recording matches or the request is malformed (the live server judges it)."""
        started, started_clock = time.time(), time.perf_counter()
        params = jsonrpc.params_of(message)
        tool, args = params.get("name"), params.get("arguments")
        args = {} if args is None else args
        if not isinstance(tool, str) or not isinstance(args, dict):
            return None
        with self._lock:
            record = self._take_call(tool, args, params.get("inputResponses"))
        if record is None:
            return None
        return record, self._answered(message, record, started, started_clock)

    def _answered(
        self, message: JsonObject, record: CallRecord, started: float, started_clock: float
    ) -> list[JsonObject]:
        """The recorded progress and answer to ``message``, logged as a replayed call."""
        out: list[JsonObject] = []
        token = jsonrpc.progress_token(message)
        if token is not None:
            out.extend(jsonrpc.progress_notification(token, p) for p in record.progress)
        out.append(self._reply(message, record.result, record.rpc_error))
        params = jsonrpc.params_of(message)
        args = params.get("arguments")
        if self.events is not None:
            self.events.tool_call(
                tool=record.tool,
                args={} if args is None else args,
                ok=record.ok,
                result=record.result,
                error=record.error,
                timestamp=started,
                duration_ms=_ms_since(started_clock),
                recording=record.line,
                replayed=True,
            )
        return out

    def unused_calls(self) -> list[CallRecord]:
        """The recorded calls no call used yet, in file order."""
        with self._lock:
            left = {id(record) for queue in self._calls.values() for record in queue}
        return [call for call in self.cassette.calls if id(call) in left]

    def _take_call(self, tool: str, args: JsonObject, input_responses: Any) -> CallRecord | None:
        # Cassettes are redacted when written: a live secret matches a recorded [REDACTED].
        keys = [call_key(tool, args, input_responses)]
        redacted = call_key(tool, redact(args), redact(input_responses))
        if redacted != keys[0]:
            keys.append(redacted)
        for key in keys:
            queue = self._calls.get(key)
            if queue:
                self._used[key] = self._used.get(key, 0) + 1
                return queue.popleft()
        return None

    # ---- answers ------------------------------------------------------------------------------

    def _reply(self, request: JsonObject, result: Any, error: JsonObject | None) -> JsonObject:
        if error is not None:
            return {"jsonrpc": "2.0", "id": request["id"], "error": error}
        modern = MODERN_VERSION_KEY in jsonrpc.meta_of(request)
        return jsonrpc.result_response(request["id"], _for_era(result, modern=modern))

    def _initialize(self, request_id: Any, params: JsonObject) -> JsonObject:
        recorded = self._answers.get(exchange_key("initialize", {}))
        if recorded is not None:
            if recorded.error is not None:
                return {"jsonrpc": "2.0", "id": request_id, "error": recorded.error}
            return jsonrpc.result_response(request_id, recorded.result)
        requested = params.get("protocolVersion")
        version = requested if isinstance(requested, str) else DEFAULT_HANDSHAKE_VERSION
        discover = self._answers.get(exchange_key("server/discover", {}))
        found = discover.result if discover is not None and discover.error is None else None
        result: JsonObject = {"protocolVersion": version}
        if isinstance(found, dict):
            meta = found.get("_meta")
            info = meta.get(SERVER_INFO_KEY) if isinstance(meta, dict) else None
            result["capabilities"] = found.get("capabilities") or {}
            result["serverInfo"] = info or {"name": self.server_name, "version": "replay"}
            if isinstance(found.get("instructions"), str):
                result["instructions"] = found["instructions"]
        else:
            result["capabilities"] = self._derived_capabilities()
            result["serverInfo"] = {"name": self.server_name, "version": "replay"}
        return jsonrpc.result_response(request_id, result)

    def _derived_capabilities(self) -> JsonObject:
        """What a cassette without a handshake shows the server can do."""
        methods = {r.method for r in self.cassette.exchanges}
        capabilities: JsonObject = {}
        if self._calls or "tools/list" in methods:
            capabilities["tools"] = {}
        if methods & {"resources/list", "resources/read", "resources/templates/list"}:
            capabilities["resources"] = {}
        if methods & {"prompts/list", "prompts/get"}:
            capabilities["prompts"] = {}
        if "completion/complete" in methods:
            capabilities["completions"] = {}
        return capabilities

    def _no_answer(self, request_id: Any, method: str, params: JsonObject) -> JsonObject:
        key_params = exchange_params(method, params)
        recorded = [
            r.params
            for r in self.cassette.exchanges
            if r.method == method and r.params != key_params
        ]
        shown = "; ".join(_preview(canonical(redact(p))) for p in recorded[:MAX_NEAREST])
        nearest = (
            f" Recorded for {method}: {shown}." if shown else f" Nothing recorded for {method}."
        )
        args_text = _preview(canonical(redact(key_params)))
        # Idempotent answers are never used up; consumed ones (resources/read) may have been.
        what = (
            "no recorded answer for" if method in IDEMPOTENT_METHODS else "no unused recording of"
        )
        return jsonrpc.error_response(
            request_id,
            jsonrpc.CASSETTE_MISMATCH,
            f"cassette mismatch: {what} {method} {args_text}.{nearest}",
            {"method": method, "params": redact(key_params)},
        )

    def _call_mismatch(
        self, request_id: Any, tool: str, args: JsonObject, input_responses: Any
    ) -> JsonObject:
        shown_args = redact(args)
        text = f"cassette mismatch: no unused recording of tools/call {tool} "
        text += _preview(canonical(shown_args)) + "."
        used = self._used.get(call_key(tool, args, input_responses), 0)
        if used:
            text += (
                f" {counted(used, 'identical recording')} {inflected(used, 'was', 'were')} "
                f"already used by {inflected(used, 'an earlier call', 'earlier calls')}."
            )
        nearest = self._nearest(tool, canonical(args))
        difference = None
        if nearest:
            text += " Nearest recorded: " + "; ".join(
                f"{r.tool} {_preview(canonical(redact(r.args)))} (similarity {s:.2f})"
                for r, s in nearest
            )
            difference = self._difference(nearest[0][0], tool, args, input_responses)
            text += ". " + difference[0].upper() + difference[1:] + "."
        else:
            text += " The cassette has no tool calls."
        data = {
            "tool": tool,
            "args": shown_args,
            "nearest": [
                {"tool": r.tool, "args": redact(r.args), "line": r.line, "score": round(s, 3)}
                for r, s in nearest
            ],
            "difference": difference,
        }
        return jsonrpc.error_response(request_id, jsonrpc.CASSETTE_MISMATCH, text, data)

    def _difference(
        self, record: CallRecord, tool: str, args: JsonObject, input_responses: Any
    ) -> str:
        """``nearest recording: line 7; first difference at args.q: recorded ..., requested
        ...``: where the call first differs from its nearest recording, both sides shown around
        that place (redacted; a secret that differs is named by its place only)."""
        from trialrun.httprec.difference import describe, describe_redacted

        queue = self._calls.get(record.key)
        used = not (queue and any(left is record for left in queue))
        if record.tool != tool:
            return describe(record.line, ("tool", record.tool, tool), used=used)
        recorded: JsonObject = {"args": record.args}
        requested: JsonObject = {"args": args}
        if record.input_responses is not None or input_responses is not None:
            recorded["input_responses"] = record.input_responses
            requested["input_responses"] = input_responses
        return describe_redacted(record.line, recorded, requested, used=used)

    def _nearest(self, tool: str, args_json: str) -> list[tuple[CallRecord, float]]:
        """The most similar recorded calls (same tool first), one per distinct call."""
        calls = self.cassette.calls
        pool = [c for c in calls if c.tool == tool] or calls
        distinct: dict[str, CallRecord] = {}
        for call in pool:
            distinct.setdefault(call.key, call)
        scored = [
            (call, difflib.SequenceMatcher(None, args_json, canonical(call.args)).ratio())
            for call in list(distinct.values())[:_MAX_SCORED]
        ]
        scored.sort(key=lambda pair: -pair[1])
        return scored[:MAX_NEAREST]


def _ms_since(started_clock: float) -> float:
    return (time.perf_counter() - started_clock) * 1000


def _for_era(result: Any, *, modern: bool) -> Any:
    """A recorded result as a client of the asking era expects it."""
    if not isinstance(result, dict):
        return result
    if modern:
        # Handshake-era recordings lack the tag that 2026-07-28 results must carry.
        return result if "resultType" in result else {**result, "resultType": "complete"}
    if not any(field in result for field in _MODERN_ONLY_FIELDS) and "_meta" not in result:
        return result
    legacy = {k: v for k, v in result.items() if k not in _MODERN_ONLY_FIELDS}
    meta = legacy.get("_meta")
    if isinstance(meta, dict) and SERVER_INFO_KEY in meta:
        rest = {k: v for k, v in meta.items() if k != SERVER_INFO_KEY}
        if rest:
            legacy["_meta"] = rest
        else:
            del legacy["_meta"]
    return legacy


def _preview(text: str, limit: int = 200) -> str:
    return shortened(text, limit)
