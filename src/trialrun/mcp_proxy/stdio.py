"""The stdio proxy: an MCP server on our stdin/stdout that records a live server or replays one.

stdout carries protocol only; diagnostics go to stderr. A line that is not JSON gets a -32700
parse error and the proxy keeps going (in both modes it is answered here, never forwarded).

* **record**: the server command runs as a child; every line is forwarded unchanged in both
  directions by two threads while the main thread waits for the end of the session: EOF on
  stdin, SIGTERM or SIGINT (the proxy runs in the agent's process group and gets SIGTERM when
  the case ends), or the server exiting. After EOF the server first answers every request
  already sent (bounded by ``answer_timeout``: input piped in at once arrives before a slow
  server has started). The cassette is then written atomically and the server stopped. A
  server that exits before saying anything is reported as not starting (exit 2, nothing
  written); one that dies mid-session still gets its cassette written (exit 1). A request left
  unanswered never gets its cassette written: an existing one is kept (exit 1).
* **replay**: no child at all; one thread answers each line from the cassette.
* **update**: as record, but a ``tools/call`` that an unused recording of the old cassette
  (``update_from``, by default the cassette itself) answers is answered here and never reaches
  the server; its line is copied into the new cassette (``mcp_proxy.update``).
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

from trialrun.base.signals import routed_signals
from trialrun.base.words import counted
from trialrun.mcp_proxy import jsonrpc
from trialrun.mcp_proxy.cassette import load_replay_cassette
from trialrun.mcp_proxy.events import EventLog, note_failure
from trialrun.mcp_proxy.record import Recorder
from trialrun.mcp_proxy.replay import ReplaySession
from trialrun.mcp_proxy.update import Previous, Updater, load_previous
from trialrun.mcp_proxy.upstream import Upstream, UpstreamError, describe

T = TypeVar("T")

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_INVALID = 2
# After the client hangs up and every request is answered, how long the server gets to finish
# on its own before it is stopped.
DRAIN_SECONDS = 1.0
ANSWER_TIMEOUT_SECONDS = 30.0
"""How long a server gets, after the client's input ended, to answer what it was sent."""
# Exit codes (negative: killed by that signal) of a server stopped together with the proxy.
_STOPPED_WITH_US = frozenset({-signal.SIGTERM, -signal.SIGINT, -signal.SIGHUP})


class _Stop(Exception):
    """Raised by the signal handler to leave a blocking read in replay mode."""


def run_stdio_proxy(
    *,
    mode: str,
    cassette: Path,
    server_command: Sequence[str],
    name: str,
    events: Path | None = None,
    stdin_fd: int = 0,
    stdout_fd: int = 1,
    answer_timeout: float = ANSWER_TIMEOUT_SECONDS,
    update_from: Path | None = None,
    keep_unused: bool = False,
) -> int:
    """Serve one MCP session on the given descriptors; returns the process exit code.

    ``update_from`` and ``keep_unused`` are for update mode: the old cassette (default: the
    cassette itself, replaced at the end) and whether its unused tool calls stay.

    Raises ``CassetteError`` (missing or corrupt cassette in replay, a corrupt old cassette in
    update) and ``UpstreamError`` (server command cannot start) before anything is served.
    """
    if mode == "replay":
        return _replay(cassette, name, events, stdin_fd, stdout_fd)
    if mode not in ("record", "update"):
        raise ValueError(f"mode must be 'record', 'replay' or 'update', found {mode!r}")
    previous = None
    if mode == "update":
        previous = load_previous(update_from or cassette, keep_unused=keep_unused)
    try:
        return _record(
            cassette,
            list(server_command),
            name,
            events,
            (stdin_fd, stdout_fd),
            answer_timeout,
            previous,
        )
    except UpstreamError as exc:
        if events is not None:
            note_failure(events, str(exc))
        raise


def _parse_error(exc: jsonrpc.MessageError) -> jsonrpc.JsonObject:
    return jsonrpc.error_response(None, jsonrpc.PARSE_ERROR, f"Parse error: {exc}")


def _client_messages(stdin_fd: int, out: jsonrpc.LineWriter) -> Iterator[tuple[bytes, Any]]:
    """Each line the client sends with its parsed message; a line that is no JSON is answered
    with a parse error here, since no request id can be read from it."""
    for line in jsonrpc.read_lines(stdin_fd):
        try:
            message = jsonrpc.parse(line)
        except jsonrpc.MessageError as exc:
            out.send(_parse_error(exc))
            continue
        yield line, message


def _replay(
    cassette_path: Path, name: str, events_path: Path | None, stdin_fd: int, stdout_fd: int
) -> int:
    session = ReplaySession(load_replay_cassette(cassette_path), server_name=name)
    session.events = EventLog(events_path, server=name, replayed=True)
    out = jsonrpc.LineWriter(stdout_fd)

    def stop(signum: int, frame: FrameType | None) -> None:
        raise _Stop

    try:
        with routed_signals(stop):
            for _, message in _client_messages(stdin_fd, out):
                replies: list[jsonrpc.JsonObject] | None = _guarded(session.handle, message, None)
                if replies is None:  # a bug: the request still gets an answer, never a hang
                    replies = _internal_error(message)
                for reply in replies:
                    out.send(reply)
    except _Stop:
        pass
    except OSError:
        pass  # the client closed our stdout: the session is over
    finally:
        session.events.close()
    return EXIT_OK


def _record(
    cassette_path: Path,
    command: list[str],
    name: str,
    events_path: Path | None,
    fds: tuple[int, int],
    answer_timeout: float,
    previous: Previous | None = None,
) -> int:
    stdin_fd, stdout_fd = fds
    events = EventLog(events_path, server=name, replayed=False)
    recorder = Recorder(server_name=name, upstream=command, events=events)
    updater = None if previous is None else Updater(previous, recorder, name=name, events=events)
    out = jsonrpc.LineWriter(stdout_fd)
    done = threading.Event()
    state: dict[str, Any] = {"signal": None, "client_eof": False, "exit": "running"}

    def from_server(line: bytes) -> None:
        # A non-JSON line is forwarded as it is: the client judges what its server says.
        with contextlib.suppress(jsonrpc.MessageError):
            _guarded(recorder.from_server, jsonrpc.parse(line), None)
        try:
            out.write(line + b"\n")
        except OSError:
            # The client closed the pipe it reads: it hung up, as much as an EOF on our stdin
            # says so. The server is fine; blaming it would fail the session.
            state["client_eof"] = True
            done.set()

    def server_exited(code: int | None) -> None:
        state["exit"] = code
        done.set()
        finished.set()

    # Set when waiting for answers is pointless: the server exited or a stop signal came.
    finished = threading.Event()

    # It is in the agent's process group, with us: trialrun notes that group.
    upstream = Upstream(command, on_line=from_server, on_exit=server_exited, noted=False)
    upstream.start()

    def from_client() -> None:
        try:
            for line, message in _client_messages(stdin_fd, out):
                replayed = None if updater is None else _guarded(updater.answer, message, None)
                if replayed is not None:  # update: answered from the old cassette
                    for reply in replayed:
                        out.send(reply)
                    continue
                _guarded(recorder.from_client, message, None)
                if not upstream.send(line + b"\n"):
                    return  # the server is gone; server_exited reports that
        except OSError:
            pass  # our stdin broke: the client is gone, as on EOF
        state["client_eof"] = True
        done.set()

    def stop(signum: int, frame: FrameType | None) -> None:
        state["signal"] = signum  # only a flag: the main loop below does the work
        done.set()
        finished.set()

    threading.Thread(target=from_client, name="mcp-client", daemon=True).start()
    with routed_signals(stop):
        while not done.wait(0.2):
            pass
        if state["signal"] is None and state["client_eof"] and state["exit"] == "running":
            _await_answers(recorder, finished, answer_timeout)
    with routed_signals(signal.SIG_IGN):  # a second SIGTERM must not cut the cassette write short
        try:
            return _finish(
                recorder, upstream, cassette_path, command, state, answer_timeout, updater
            )
        finally:
            upstream.stop()
            events.close()


def _await_answers(recorder: Recorder, finished: threading.Event, timeout: float) -> None:
    """After the client's input ended: wait for the answers to what it sent, or the server's
    exit, or a stop signal, whichever comes first, at most ``timeout`` seconds."""
    if not recorder.unanswered:
        return
    print(
        f"trialrun mcp-proxy: input ended with {counted(recorder.unanswered, 'request')} "
        "unanswered; "
        f"waiting up to {timeout:g} s for the server (--answer-timeout)",
        file=sys.stderr,
        flush=True,
    )
    deadline = time.monotonic() + timeout
    # Short slices: a signal or the server's exit ends the wait as soon as it happens.
    while not finished.is_set():
        left = deadline - time.monotonic()
        if left <= 0 or recorder.wait_answered(min(left, 0.2)):
            return


def _finish(
    recorder: Recorder,
    upstream: Upstream,
    cassette_path: Path,
    command: list[str],
    state: dict[str, Any],
    answer_timeout: float,
    updater: Updater | None,
) -> int:
    if state["signal"] is None and state["exit"] in _STOPPED_WITH_US:
        # The case's SIGTERM reached the whole process group and the server went first.
        state["signal"] = -state["exit"]
    ended_by_server = state["signal"] is None and not state["client_eof"]
    if ended_by_server and not recorder.answered:
        said = upstream.stderr_tail()
        raise UpstreamError(
            f"MCP server exited with code {state['exit']} before answering: {describe(command)}"
            + (f" (its stderr: {said})" if said else "")
        )
    if state["signal"] is None and state["client_eof"]:
        # The client hung up: let the server see EOF and deliver what it still had to say.
        upstream.close_input()
        upstream.wait_finished(DRAIN_SECONDS)
    missing = recorder.unanswered
    if missing and not ended_by_server:
        # A cassette short of answers would replay as mismatches: keep the one there was.
        if state["signal"] is not None:
            why = "the session was stopped first"
        elif state["exit"] != "running":
            why = f"the MCP server exited (code {state['exit']}) first"
        else:
            why = f"no answer within {answer_timeout:g} s (--answer-timeout)"
        print(
            f"error: {cassette_path}: {missing} of {counted(recorder.requests, 'request')} "
            "unanswered: "
            f"{why}; the cassette was not written",
            file=sys.stderr,
        )
        return EXIT_FAILED
    if updater is not None:
        updater.finish()
    count = recorder.write(cassette_path)
    print(
        f"trialrun mcp-proxy: recorded {counted(count, 'answer')} to {cassette_path}",
        file=sys.stderr,
    )
    if ended_by_server:
        print(
            f"trialrun mcp-proxy: the MCP server exited (code {state['exit']}) mid-session",
            file=sys.stderr,
        )
        return EXIT_FAILED
    return EXIT_OK


def _internal_error(message: Any) -> list[jsonrpc.JsonObject]:
    if not jsonrpc.is_request(message):
        return []
    text = "Internal error in trialrun mcp-proxy (details on its stderr)"
    return [jsonrpc.error_response(message["id"], -32603, text)]


def _guarded(function: Callable[[Any], T], message: Any, fallback: T) -> T:
    """Run one step of bookkeeping; a bug in it is reported, never allowed to stop the traffic."""
    try:
        return function(message)
    except Exception:
        print("trialrun mcp-proxy: internal error (the session goes on):", file=sys.stderr)
        traceback.print_exc()
        return fallback
