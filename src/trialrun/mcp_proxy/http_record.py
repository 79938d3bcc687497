"""One recorded run behind the HTTP front end: a live stdio server shared by the run's requests.

Several HTTP connections may share one run (and one server), so request ids and progress tokens
are renumbered on their way upstream and restored on the way back: the client always sees its
own, the server sees unique ones, and the recorder (which keeps neither) sees the upstream side.
A server request or notification not tied to a request (sampling, logging) goes out on the
oldest request stream still open, and is dropped with a note on stderr when none is. When the
server exits, every waiting request gets a JSON-RPC error and the next request starts a new one.
"""

from __future__ import annotations

import queue
import sys
import threading
from collections.abc import Generator, Mapping, Sequence
from pathlib import Path
from typing import Any

from trialrun.base.redact import redact_text
from trialrun.base.words import counted
from trialrun.mcp_proxy import jsonrpc
from trialrun.mcp_proxy.jsonrpc import JsonObject
from trialrun.mcp_proxy.record import Recorder
from trialrun.mcp_proxy.update import Updater
from trialrun.mcp_proxy.upstream import Upstream, UpstreamError


class RecordRun:
    """One run's live server, the requests waiting for it, and the run's recorder."""

    def __init__(
        self,
        command: Sequence[str],
        cassette: Path,
        recorder: Recorder,
        env: Mapping[str, str] | None = None,
        updater: Updater | None = None,
    ) -> None:
        """``updater``: update mode, the ``tools/call`` requests it answers from the old
        cassette never reach the server."""
        self.command = list(command)
        self.updater = updater
        self.env = dict(env) if env else None
        self.cassette = cassette
        self.recorder = recorder
        self._lock = threading.Lock()
        self._upstream: Upstream | None = None
        self._next_id = 0
        # upstream id key -> (upstream id, the mailbox of the HTTP request waiting for it)
        self._waiting: dict[str, tuple[int, queue.Queue[JsonObject]]] = {}
        self._client_token: dict[str, Any] = {}  # upstream id -> the client's progress token
        self._client_ids: dict[str, int] = {}  # client id -> upstream id (for cancellations)

    def _ensure_upstream(self) -> Upstream:
        with self._lock:
            if self._upstream is None:
                started: list[Upstream] = []
                upstream = Upstream(
                    self.command,
                    on_line=self._from_upstream,
                    on_exit=lambda code: self._upstream_exited(started[0], code),
                    env=self.env,
                )
                started.append(upstream)
                upstream.start()
                self._upstream = upstream
            return self._upstream

    def request(self, message: JsonObject) -> Generator[JsonObject, None, None]:
        replayed = None if self.updater is None else self.updater.answer(message)
        if replayed is not None:
            yield from replayed
            return
        client_id = message["id"]
        try:
            upstream = self._ensure_upstream()
        except UpstreamError as exc:
            yield jsonrpc.error_response(client_id, jsonrpc.UPSTREAM_FAILED, str(exc))
            return
        mailbox: queue.Queue[JsonObject] = queue.Queue()
        with self._lock:
            self._next_id += 1
            upstream_id = self._next_id
            key = jsonrpc.id_key(upstream_id)
            self._waiting[key] = (upstream_id, mailbox)
            self._client_ids[jsonrpc.id_key(client_id)] = upstream_id
        forwarded = {**message, "id": upstream_id}
        token = jsonrpc.progress_token(message)
        if token is not None:
            params = jsonrpc.params_of(message)
            meta = {**jsonrpc.meta_of(message), "progressToken": upstream_id}
            forwarded["params"] = {**params, "_meta": meta}
            self._client_token[key] = token
        self.recorder.from_client(forwarded)
        try:
            if not upstream.send(jsonrpc.encode(forwarded)):
                mailbox.put(_gone(upstream_id, "the MCP server is not reading its input"))
            while True:
                item = mailbox.get()
                if jsonrpc.is_response(item) and item.get("id") == upstream_id:
                    yield {**item, "id": client_id}
                    return
                yield item
        finally:
            with self._lock:
                self._waiting.pop(key, None)
                self._client_token.pop(key, None)
                if self._client_ids.get(jsonrpc.id_key(client_id)) == upstream_id:
                    del self._client_ids[jsonrpc.id_key(client_id)]

    def notify(self, message: Any) -> None:
        """A notification or a client's answer to a server request: forward it."""
        with self._lock:
            upstream = self._upstream
            if (
                isinstance(message, dict)
                and message.get("method") == "notifications/cancelled"
                and isinstance(message.get("params"), dict)
            ):
                mapped = self._client_ids.get(jsonrpc.id_key(message["params"].get("requestId")))
                if mapped is not None:
                    message = {**message, "params": {**message["params"], "requestId": mapped}}
        if upstream is not None:
            upstream.send(jsonrpc.encode(message))

    def _from_upstream(self, line: bytes) -> None:
        try:
            message = jsonrpc.parse(line)
        except jsonrpc.MessageError:
            shown = redact_text(line.decode("utf-8", "replace"))[:200]
            print(f"trialrun mcp-proxy: server wrote a non-JSON line: {shown!r}", file=sys.stderr)
            return
        self.recorder.from_server(message)
        with self._lock:
            if jsonrpc.is_response(message):
                waiting = self._waiting.get(jsonrpc.id_key(message["id"]))
            elif jsonrpc.is_notification(message) and message["method"] == "notifications/progress":
                key = jsonrpc.id_key(jsonrpc.params_of(message).get("progressToken"))
                waiting = self._waiting.get(key)
                if waiting is not None and key in self._client_token:
                    params = {
                        **jsonrpc.params_of(message),
                        "progressToken": self._client_token[key],
                    }
                    message = {**message, "params": params}
            else:  # not tied to a request: the oldest open request stream carries it
                waiting = next(iter(self._waiting.values()), None)
        if waiting is not None:
            waiting[1].put(message)
        elif not jsonrpc.is_response(message):
            print(
                f"trialrun mcp-proxy: dropped {message.get('method')} from the server: "
                "no request stream is open to carry it",
                file=sys.stderr,
            )

    def _upstream_exited(self, upstream: Upstream, code: int | None) -> None:
        with self._lock:
            if self._upstream is upstream:
                self._upstream = None  # the next request starts a new one
            waiting = list(self._waiting.values())
        for upstream_id, mailbox in waiting:
            mailbox.put(_gone(upstream_id, f"the MCP server exited (code {code})"))

    def close(self) -> None:
        with self._lock:
            upstream, self._upstream = self._upstream, None
        if upstream is not None:
            upstream.stop()
        if self.updater is not None:
            self.updater.finish()
        count = self.recorder.write(self.cassette)
        print(
            f"trialrun mcp-proxy: recorded {counted(count, 'answer')} to {self.cassette}",
            file=sys.stderr,
        )


def _gone(upstream_id: Any, why: str) -> JsonObject:
    return jsonrpc.error_response(upstream_id, jsonrpc.UPSTREAM_FAILED, why)
