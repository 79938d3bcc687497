"""The agent's end of the runner channel: one Unix stream socket carrying JSONL both ways.

``trialrun run`` with ``agent_channel: fd`` hands the agent one end of a socketpair and names its
file descriptor in ``TRIALRUN_FD``. This module owns that socket: it frames messages as single
JSON lines, reads replies of any size without quadratic buffering, and turns every way the
channel can break (bad descriptor, runner gone, garbage on the wire) into a ``ChannelError`` that
says what happened. It knows nothing of tool calls; ``trialrun.agent.client`` does.

The descriptor is made non-inheritable at once, so a tool that starts a subprocess does not hand
the runner's socket to it (a child holding it open would also hide the agent's exit).
"""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import Mapping
from typing import Any

from trialrun.errors import TrialrunError

ENV_FD = "TRIALRUN_FD"
"""Environment variable naming the channel's file descriptor."""

_RECV_CHUNK = 1 << 20
# MSG_NOSIGNAL: a runner that went away must give us EPIPE, not kill us with SIGPIPE (Python
# ignores SIGPIPE by default, but an agent embedding us may have restored it).
_SEND_FLAGS = getattr(socket, "MSG_NOSIGNAL", 0)


class ChannelError(TrialrunError):
    """The channel to the trialrun runner is unusable: misconfigured, closed, or out of step."""


def encode_line(message: Mapping[str, Any]) -> bytes:
    """One compact JSON line, ASCII only (``\\u`` escapes), ending in ``\\n``.

    Raises ``TypeError`` for values JSON cannot hold and ``ValueError`` for NaN or infinity,
    which JSON has no spelling for (the runner would refuse them).
    """
    text = json.dumps(message, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    return text.encode("ascii") + b"\n"


class Channel:
    """A connected stream socket speaking JSONL. ``send_line`` is thread-safe; ``receive`` is not
    (the session lets one caller at a time wait for a reply)."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._buffer = bytearray()
        self._scanned = 0  # bytes of _buffer already searched for a newline
        self._send_lock = threading.Lock()

    @classmethod
    def from_environment(cls, fd_text: str) -> Channel:
        """The channel named by ``TRIALRUN_FD``'s value; ``ChannelError`` if it is not usable."""
        try:
            fd = int(fd_text.strip())
        except ValueError:
            fd = -1
        if fd < 0:
            raise ChannelError(
                f"{ENV_FD} must be a file descriptor number, found {fd_text!r} "
                "(set by trialrun run when the suite says agent_channel: fd)"
            )
        try:
            os.set_inheritable(fd, False)
            sock = socket.socket(fileno=fd)
        except OSError as exc:
            raise ChannelError(
                f"{ENV_FD}={fd} is not an open socket in this process ({exc.strerror or exc}); "
                "only the process trialrun started, not a process it spawned, can talk to the "
                "runner"
            ) from None
        if sock.type != socket.SOCK_STREAM:
            sock.detach()  # the descriptor is not ours to close
            raise ChannelError(
                f"{ENV_FD}={fd} is a {sock.type.name} socket; trialrun passes a stream socket"
            )
        sock.setblocking(True)
        return cls(sock)

    def send_line(self, line: bytes) -> None:
        """Send one encoded line whole (no other sender's bytes can land inside it)."""
        try:
            with self._send_lock:
                self._sock.sendall(line, _SEND_FLAGS)
        except OSError as exc:
            raise ChannelError(
                f"cannot send to the trialrun runner: it closed the channel ({_reason(exc)})"
            ) from None

    def receive(self) -> dict[str, Any]:
        """The next message from the runner (a JSON object with a string ``type``).

        Blocks until a whole line arrived. Raises ``ChannelError`` when the runner closed the
        channel or sent something that is not a protocol message.
        """
        while True:
            end = self._buffer.find(b"\n", self._scanned)
            if end < 0:
                self._scanned = len(self._buffer)
                self._fill()
                continue
            line = bytes(self._buffer[:end])
            del self._buffer[: end + 1]
            self._scanned = 0
            if line.strip():
                return _parse(line)

    def close(self) -> None:
        self._sock.close()

    def _fill(self) -> None:
        try:
            chunk = self._sock.recv(_RECV_CHUNK)
        except OSError as exc:
            raise ChannelError(
                f"lost the channel to the trialrun runner while waiting for its answer "
                f"({_reason(exc)})"
            ) from None
        if not chunk:
            partial = " in the middle of a message" if self._buffer else ""
            raise ChannelError(
                f"the trialrun runner closed the channel{partial} while the agent waited for "
                "its answer (the run was stopped or timed out)"
            )
        self._buffer += chunk


def _parse(line: bytes) -> dict[str, Any]:
    try:
        value = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise ChannelError(
            f"the trialrun runner sent a line that is not JSON: {_preview(line)}"
        ) from None
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        raise ChannelError(
            "the trialrun runner sent a line that is not a protocol message (expected a JSON "
            f'object with a string "type"): {_preview(line)}'
        )
    return value


def _preview(line: bytes, limit: int = 200) -> str:
    text = line.decode("utf-8", "replace")
    return text if len(text) <= limit else text[:limit] + "..."


def _reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__
