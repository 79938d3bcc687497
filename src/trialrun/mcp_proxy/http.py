"""The streamable-HTTP front end: one proxy process, one URL path, cassette and cursor per run.

``POST /run/<run-id>/mcp`` carries one JSON-RPC message. The 2026-07-28 revision has no session
id, so the path is the only per-run scope: each run id has its own cassette
``<cassette-dir>/<run-id>.jsonl``, its own replay cursor and, in record mode, its own upstream
stdio server, started on the run's first request. Replies are ``application/json``, or
``text/event-stream`` (progress notifications, then the response) when progress precedes the
answer; notifications and client responses get 202. ``GET`` is 405 (there is no server-initiated
stream); ``DELETE`` ends the run (record: the server is stopped and the cassette written) and
answers 200. A handshake-era ``initialize`` gets a fresh ``Mcp-Session-Id``, which is never
checked or recorded. Update mode is record mode whose run first reads the run's cassette, if
there is one: a ``tools/call`` an unused recording of it matches is answered from it
(``update``), and the cassette is replaced by the updated one when the run ends.

With a key (the proxy's ``token``, or a run's own key given by ``allow_run``, as ``trialrun
run`` does for each case), only paths under ``/key/<key>`` are served; anything else gets a 401
that says nothing about the runs. A body over ``MAX_BODY_BYTES`` gets 413 and a malformed
``Content-Length`` 400, before the body is read.

Record mode's per-run server and its id/token renumbering live in ``http_record``.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import signal
import sys
import threading
import time
import uuid
from collections.abc import Generator, Iterator, Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from trialrun.base.accesskey import REFUSED, key_matches, split_key
from trialrun.base.hangups import HANG_UPS, describe
from trialrun.base.localserver import BadLength, LocalHandler, LocalServer, declared_length
from trialrun.base.quoting import shortened
from trialrun.base.signals import routed_signals
from trialrun.errors import CassetteError
from trialrun.mcp_proxy import jsonrpc
from trialrun.mcp_proxy.cassette import load_replay_cassette
from trialrun.mcp_proxy.events import EventLog
from trialrun.mcp_proxy.http_record import RecordRun
from trialrun.mcp_proxy.jsonrpc import JsonObject
from trialrun.mcp_proxy.record import Recorder
from trialrun.mcp_proxy.replay import ReplaySession
from trialrun.mcp_proxy.update import Updater, load_previous
from trialrun.mcp_proxy.upstream import UpstreamError

RUN_PATH = re.compile(r"^/run/(?P<run>[A-Za-z0-9][A-Za-z0-9._-]{0,199})/mcp/?$")
SESSION_HEADER = "Mcp-Session-Id"
MAX_BODY_BYTES = 64 * 1024 * 1024
"""One JSON-RPC message; larger requests get 413 before a byte of their body is read."""


class _ReplayRun:
    def __init__(self, session: ReplaySession) -> None:
        self.session = session

    def request(self, message: JsonObject) -> Generator[JsonObject, None, None]:
        yield from self.session.handle(message)

    def notify(self, message: Any) -> None:
        self.session.handle(message)

    def close(self) -> None:
        """Replay keeps the run's cursor: the run id, not the connection, is the scope."""


class McpHttpProxy:
    """The runs served by one HTTP proxy, created on their first request."""

    def __init__(
        self,
        *,
        mode: str,
        cassette_dir: Path,
        server_command: Sequence[str],
        name: str,
        events_dir: Path | None = None,
        token: str | None = None,
        server_env: Mapping[str, str] | None = None,
        keep_unused: bool = False,
    ) -> None:
        """``token``: the key a request must present (``/key/<token>/run/...``) unless its run
        was given a key of its own by ``allow_run``; None: no key. ``server_env``: variables
        for the recorded server, laid over ours. ``keep_unused`` (update): the old tool calls
        no call used stay, after the others."""
        if mode not in ("record", "replay", "update"):
            raise ValueError(f"mode must be 'record', 'replay' or 'update', found {mode!r}")
        self.mode = mode
        self.keep_unused = keep_unused
        self.cassette_dir = cassette_dir
        self.server_command = list(server_command)
        self.name = name
        self.events_dir = events_dir
        self._lock = threading.Lock()
        self._runs: dict[str, RecordRun | _ReplayRun] = {}
        self._events: list[EventLog] = []
        self._token = token
        self._keys: dict[str, str] = {}
        self._server_env = dict(server_env) if server_env else None

    def allow_run(self, run_id: str, key: str) -> None:
        """Serve ``run_id`` to requests presenting ``key`` (until ``end_run``)."""
        with self._lock:
            self._keys[run_id] = key

    def key_of(self, run_id: str | None) -> str | None:
        """The key a request for ``run_id`` (None: a path naming no run) must present."""
        with self._lock:
            return self._keys.get(run_id, self._token) if run_id is not None else self._token

    def run(self, run_id: str) -> RecordRun | _ReplayRun:
        """The run's state; raises ``CassetteError`` when a replayed run has no usable cassette."""
        with self._lock:
            existing = self._runs.get(run_id)
            if existing is not None:
                return existing
            cassette = self.cassette_dir / f"{run_id}.jsonl"
            loaded = load_replay_cassette(cassette) if self.mode == "replay" else None
            events_path = self.events_dir / f"{run_id}.jsonl" if self.events_dir else None
            events = EventLog(events_path, server=self.name, replayed=loaded is not None)
            self._events.append(events)
            state: RecordRun | _ReplayRun
            if loaded is not None:
                state = _ReplayRun(ReplaySession(loaded, server_name=self.name, events=events))
            else:
                recorder = Recorder(
                    server_name=self.name, upstream=self.server_command, events=events
                )
                updater = None
                if self.mode == "update":
                    previous = load_previous(cassette, keep_unused=self.keep_unused)
                    if previous is not None:
                        updater = Updater(previous, recorder, name=self.name, events=events)
                state = RecordRun(
                    self.server_command, cassette, recorder, self._server_env, updater
                )
            self._runs[run_id] = state
            return state

    def end_run(self, run_id: str) -> bool:
        with self._lock:
            self._keys.pop(run_id, None)  # the run's key stops opening anything
            state = self._runs.get(run_id)
        if state is None:
            return False
        state.close()
        return True

    def close(self) -> None:
        """Shut down: every recorded run's server stopped and its cassette written."""
        with self._lock:
            runs = list(self._runs.values())
        for state in runs:
            try:
                state.close()
            except (OSError, CassetteError) as exc:
                print(f"trialrun mcp-proxy: {exc}", file=sys.stderr)
        for events in self._events:
            events.close()


def serve_http(host: str, port: int, proxy: McpHttpProxy) -> int:
    """Serve ``proxy`` until SIGTERM/SIGINT; the base URL (never the token) is the first line
    on stdout. Returns 0.

    In record and update modes the server command is checked before anything is served
    (``UpstreamError``).
    """
    if proxy.mode in ("record", "update"):
        check_command(proxy.server_command)
    try:
        server = make_server(host, port, proxy)
    except OSError as exc:
        raise UpstreamError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sys.stdout.write(server_url(server) + "\n")
    sys.stdout.flush()
    stop_requested: list[int] = []

    def stop(signum: int, frame: FrameType | None) -> None:
        stop_requested.append(signum)

    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.2}, name="mcp-http", daemon=True
    )
    with routed_signals(stop):
        thread.start()
        while not stop_requested:
            time.sleep(0.1)
    with routed_signals(signal.SIG_IGN):
        server.shutdown()
        server.server_close()
        proxy.close()
    return 0


def check_command(command: Sequence[str]) -> None:
    """Fail early when the server command cannot run (record mode starts it lazily per run)."""
    if not command:
        raise UpstreamError("record mode needs the MCP server command after '--'")
    if shutil.which(command[0]) is None:
        raise UpstreamError(f"cannot start MCP server: command not found: {command[0]}")


class _Server(LocalServer):
    """A client that hangs up ends its connection quietly; other errors are one stderr line."""

    proxy: McpHttpProxy

    def report_error(self, line: str) -> None:
        print(f"trialrun mcp-proxy: error: {line}", file=sys.stderr, flush=True)


def make_server(host: str, port: int, proxy: McpHttpProxy) -> _Server:
    """Bind (port 0 picks a free one; an IPv6 host such as ``::1`` too); ``server_url(server)``
    is the base URL."""
    server = _Server((host, port), _Handler)
    server.proxy = proxy
    return server


def server_url(server: _Server) -> str:
    return server.url


class _Handler(LocalHandler):
    server: _Server

    def handle_one_request(self) -> None:
        try:
            super().handle_one_request()
        except HANG_UPS:
            self.close_connection = True  # the client went away: nothing left to answer
        except Exception as exc:  # a bug: one line, and an answer naming it if none went out
            problem = describe(exc)
            self.close_connection = True
            request = f"{getattr(self, 'command', None)} {getattr(self, 'path', None)!r}"
            self.server.report_error(f"error while serving {request}: {problem}")
            if not self.answered:
                # The client learns that it is a bug, not where: source paths stay on stderr.
                with contextlib.suppress(OSError):
                    self._plain(
                        500,
                        f"trialrun mcp-proxy internal error ({type(exc).__name__}); "
                        "its stderr has the details\n",
                    )

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the access log would drown the server's own diagnostics on stderr."""

    def _run_id(self) -> str | None:
        """The run of the request, its key checked; None once the request is answered."""
        # The key leaves the path first: nothing that echoes the path can show it.
        presented, self.path = split_key(self.path)
        match = RUN_PATH.match(self.path.split("?", 1)[0])
        run_id = match.group("run") if match is not None else None
        if not key_matches(presented, self.server.proxy.key_of(run_id)):
            self.close_connection = True  # its body is unread
            self._plain(401, REFUSED + "\n")
            return None
        if run_id is None:
            shown = repr(shortened(self.path, 120))
            self._plain(404, f"not found: expected POST /run/<run-id>/mcp, found {shown}\n")
        return run_id

    def do_GET(self) -> None:
        if self._run_id() is not None:
            self._plain(405, "no server-initiated stream: POST requests instead\n", allow=True)

    def do_DELETE(self) -> None:
        run_id = self._run_id()
        if run_id is not None:
            try:
                self.server.proxy.end_run(run_id)
            except (OSError, CassetteError) as exc:
                self._plain(500, f"{exc}\n")
                return
            self._plain(200, "")

    def do_POST(self) -> None:
        run_id = self._run_id()
        if run_id is None:
            return
        try:
            length = declared_length(self.headers, MAX_BODY_BYTES, service="MCP proxy")
        except BadLength as exc:
            self.close_connection = True  # its body is unread
            self._plain(exc.status, exc.message + "\n")
            return
        if length is None:
            self.close_connection = True
            self._plain(411, "a Content-Length header is required\n")
            return
        body = self.rfile.read(length)
        if len(body) != length:
            self.close_connection = True
            self._plain(400, "the request body ended before its Content-Length\n")
            return
        try:
            message = jsonrpc.parse(body)
        except jsonrpc.MessageError as exc:
            reply = jsonrpc.error_response(None, jsonrpc.PARSE_ERROR, f"Parse error: {exc}")
            self._json(400, reply)
            return
        if not (jsonrpc.is_request(message) or jsonrpc.is_notification(message)):
            if jsonrpc.is_response(message):
                self._accept(run_id, message)
                return
            reply = jsonrpc.error_response(
                message.get("id") if isinstance(message, dict) else None,
                jsonrpc.INVALID_REQUEST,
                "expected one JSON-RPC request, notification or response per POST",
            )
            self._json(400, reply)
            return
        if jsonrpc.is_notification(message):
            self._accept(run_id, message)
            return
        try:
            state = self.server.proxy.run(run_id)
        except CassetteError as exc:
            print(f"trialrun mcp-proxy: error: {exc}", file=sys.stderr)
            self._json(
                200, jsonrpc.error_response(message["id"], jsonrpc.CASSETTE_MISMATCH, str(exc))
            )
            return
        self._answer(message, state.request(message))

    def _accept(self, run_id: str, message: Any) -> None:
        with contextlib.suppress(CassetteError):  # reported when the run's first request arrives
            self.server.proxy.run(run_id).notify(message)
        self._plain(202, "")

    def _answer(self, request: JsonObject, replies: Generator[JsonObject, None, None]) -> None:
        try:
            self._stream(request, replies)
        finally:
            replies.close()  # stop waiting upstream; the recorder still gets the answer

    def _stream(self, request: JsonObject, replies: Iterator[JsonObject]) -> None:
        first = next(replies, None)
        if first is None:  # cannot happen: every request gets a reply
            first = jsonrpc.error_response(request["id"], jsonrpc.UPSTREAM_FAILED, "no answer")
        if jsonrpc.is_response(first):
            headers = {}
            if request["method"] == "initialize" and "result" in first:
                headers[SESSION_HEADER] = uuid.uuid4().hex
            self._json(200, first, headers)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")  # the body ends when the stream does
        self.end_headers()
        self.close_connection = True
        try:
            for message in _chain(first, replies):
                self.wfile.write(b"event: message\ndata: " + jsonrpc.encode(message) + b"\n")
                self.wfile.flush()
        except OSError:
            pass  # the client went away (on 2026-07-28 that is how it cancels)

    def _json(self, status: int, message: Any, headers: dict[str, str] | None = None) -> None:
        data = jsonrpc.encode(message)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _plain(self, status: int, text: str, *, allow: bool = False) -> None:
        data = text.encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        if allow:
            self.send_header("Allow", "POST, DELETE")
        self.end_headers()
        self.wfile.write(data)


def _chain(first: JsonObject, rest: Iterator[JsonObject]) -> Iterator[JsonObject]:
    yield first
    yield from rest
