"""The agent's messages as protocol lines, read by the event loop.

``LineReader`` is the protocol of the agent's stdout pipe (``stdio`` channel) and
``SocketLineReader`` that of its socket (``fd`` channel). Unlike the subprocess transport's
stream, which hands every chunk to the loop once more before a reader sees it, their
``data_received`` runs straight from the readiness callback: one loop iteration per message
instead of three.
"""

from __future__ import annotations

import asyncio
from typing import cast

from trialrun.errors import TrialrunError

__all__ = [
    "ChannelLostError",
    "LineReader",
    "MessageTooLargeError",
    "SocketLineReader",
    "UnterminatedLine",
    "Writable",
]


class MessageTooLargeError(TrialrunError):
    """A stdout line is longer than ``max_message_bytes``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        super().__init__(
            f"agent sent a stdout line longer than max_message_bytes={limit} bytes; "
            "raise max_message_bytes in suite.yaml or send smaller messages"
        )


class ChannelLostError(TrialrunError):
    """The agent reset its end of the channel: it closed it with bytes of ours still unread.

    A Unix or TCP socket whose owner exits before reading what was sent to it resets the
    connection, so the runner's next read fails instead of seeing the end of the stream.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(f"the agent closed its channel with messages unread ({reason})")


class UnterminatedLine(bytes):
    """The last bytes of a stream that ended without a newline: a whole message, or half of one."""


class LineReader(asyncio.Protocol):
    """Newline-terminated lines of at most ``limit`` bytes (the newline not counted)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.buffer = bytearray()
        self.eof = False
        self.lost: ConnectionError | None = None
        """Why the stream ended, when the agent reset it rather than closing it."""
        self._scanned = 0
        """Leading bytes of ``buffer`` known to hold no newline: a long line is scanned once."""
        self._transport: asyncio.ReadTransport | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._full = False
        """Reading paused because the buffer holds more than a whole line may: the agent waits."""

    # --- the transport's side ---------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.ReadTransport, transport)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if len(self.buffer) > 2 * self.limit and not self._full:
            # Whatever the session reads next fails as too large; no need to hold more of it.
            self._full = True
            if self._transport is not None and not self._transport.is_closing():
                self._transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        self.eof = True
        self._wake()
        return True  # a socket stays open for our side's messages (pipes ignore this)

    def connection_lost(self, exc: Exception | None) -> None:
        if isinstance(exc, ConnectionError):
            self.lost = exc
        self.eof = True
        self._wake()

    # --- the reader's side ------------------------------------------------------------------

    async def readline(self) -> bytes | None:
        """The next line without its newline; None at end of stream.

        A last line without a newline comes as an ``UnterminatedLine``. Raises
        ``MessageTooLargeError`` for a line longer than ``limit`` and, once the lines that
        came before it are read, ``ChannelLostError`` for a reset channel.
        """
        while True:
            line = self.take_line()
            if line is not None:
                return line
            if self.lost is not None:
                raise ChannelLostError(self.lost.strerror or type(self.lost).__name__)
            if self.eof:
                rest = bytes(self.buffer)
                self.buffer.clear()
                self._scanned = 0
                return UnterminatedLine(rest) if rest else None
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None

    def take_line(self) -> bytes | None:
        """The next whole line if the buffer holds one (consumed), else None. Raises
        ``MessageTooLargeError``."""
        end = self.buffer.find(b"\n", self._scanned)
        if end < 0:
            self._scanned = len(self.buffer)
            if self._scanned > self.limit:
                raise MessageTooLargeError(self.limit)
            return None
        if end > self.limit:
            raise MessageTooLargeError(self.limit)
        line = bytes(self.buffer[:end])
        del self.buffer[: end + 1]
        self._scanned = 0
        if self._full and len(self.buffer) <= self.limit:
            self._full = False
            if not self.eof and self._transport is not None and not self._transport.is_closing():
                self._transport.resume_reading()
        return line

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)


class Writable(asyncio.streams.FlowControlMixin):
    """What a ``StreamWriter`` writes our messages through (the agent's stdin pipe, or its
    socket) and waits on for the agent to take them (``drain``)."""

    def __init__(self) -> None:
        loop = asyncio.get_running_loop()
        super().__init__(loop)
        self._closed: asyncio.Future[None] = loop.create_future()

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        if not self._closed.done():
            self._closed.set_result(None)

    def _get_close_waiter(self, stream: asyncio.StreamWriter) -> asyncio.Future[None]:
        return self._closed


class SocketLineReader(LineReader, Writable):
    """``LineReader`` for a socket, which also carries our messages."""

    def __init__(self, limit: int) -> None:
        LineReader.__init__(self, limit)
        Writable.__init__(self)

    def connection_lost(self, exc: Exception | None) -> None:
        LineReader.connection_lost(self, exc)
        Writable.connection_lost(self, exc)
