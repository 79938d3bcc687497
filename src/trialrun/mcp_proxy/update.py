"""Update mode: replay the ``tools/call`` requests that still match, record the rest.

The proxy runs the live server as record mode does (the handshake, the list methods and every
other request reach it and are recorded). A ``tools/call`` that finds an unused recording of
the old cassette (the match replay makes: same tool, canonical arguments, ``inputResponses``,
a live secret matching a recorded ``[REDACTED]``) is answered from it, never reaches the
server, and its line goes into the new cassette byte for byte, in the call's place. Any other
``tools/call`` is forwarded and recorded. Unused old tool calls are dropped, or, with
``keep_unused``, kept unchanged after the others; old exchanges are not kept (the server
answered them again).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trialrun.mcp_proxy import jsonrpc
from trialrun.mcp_proxy.cassette import McpCassette, load_cassette
from trialrun.mcp_proxy.events import EventLog
from trialrun.mcp_proxy.jsonrpc import JsonObject
from trialrun.mcp_proxy.record import Recorder
from trialrun.mcp_proxy.replay import ReplaySession


@dataclass(frozen=True)
class Previous:
    """The old cassette an update answers from, and its lines as they are in the file."""

    cassette: McpCassette
    lines: tuple[bytes, ...]
    """Line ``n`` of the file is ``lines[n - 1]``, without its newline (split as the cassette
    is read: at each newline byte only, so a line's own ``\\r`` stays)."""
    keep_unused: bool = False

    def line(self, number: int) -> bytes:
        raw = self.lines[number - 1]
        if number == 1:
            raw = raw.removeprefix(b"\xef\xbb\xbf")  # a BOM belongs to the file, not the line
        return raw + b"\n"


def load_previous(path: Path, *, keep_unused: bool = False) -> Previous | None:
    """The old cassette at ``path``; None when there is none yet (every call is recorded).

    A cassette that cannot be read or parsed raises ``CassetteError`` (file, line): updating
    over it would silently lose what it holds.
    """
    if not path.exists():
        return None
    cassette = load_cassette(path)
    lines = tuple(path.read_bytes().split(b"\n"))
    return Previous(cassette, lines, keep_unused)


class Updater:
    """Answers the ``tools/call`` requests that still match; the recorder keeps the new file."""

    def __init__(
        self, previous: Previous, recorder: Recorder, *, name: str, events: EventLog | None
    ) -> None:
        self._previous = previous
        self._recorder = recorder
        self._session = ReplaySession(previous.cassette, server_name=name, events=events)
        self._finished = False

    def answer(self, message: Any) -> list[JsonObject] | None:
        """The replies to ``message`` from the old cassette, its line copied into the new one;
        None: send ``message`` to the server (anything but a matching ``tools/call``)."""
        if not (jsonrpc.is_request(message) and message["method"] == "tools/call"):
            return None
        taken = self._session.take_call(message)
        if taken is None:
            return None
        record, replies = taken
        self._recorder.copy_line(record, self._previous.line(record.line))
        return replies

    def finish(self) -> None:
        """Before the new cassette is written: with ``keep_unused``, the old tool calls no call
        used go after the others, unchanged. Only the first call does anything."""
        finished, self._finished = self._finished, True
        if self._previous.keep_unused and not finished:
            for record in self._session.unused_calls():
                self._recorder.copy_line(record, self._previous.line(record.line))
