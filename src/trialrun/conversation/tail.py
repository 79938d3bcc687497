"""The last lines an agent wrote to stderr (and, on the ``fd`` channel, to stdout)."""

from __future__ import annotations

from collections import deque

from trialrun.base.linesredact import LineRedactor
from trialrun.base.redact import redact_text

__all__ = ["STDERR_TAIL_BYTES", "STDERR_TAIL_LINES", "StderrRing"]

STDERR_TAIL_LINES = 200
STDERR_TAIL_BYTES = 64 * 1024


class StderrRing:
    """The last lines an agent wrote to stderr, bounded in lines and in bytes, redacted.

    A private key block is dropped as its lines arrive (``LineRedactor``), before the ring can
    drop its BEGIN line and keep the rest; everything else is redacted when the text is read
    (a line is kept whole or dropped whole, so no secret is cut in two on the way), which costs
    a chatty agent nothing per line.
    """

    def __init__(self, max_lines: int = STDERR_TAIL_LINES, max_bytes: int = STDERR_TAIL_BYTES):
        self._lines: deque[bytes] = deque()
        self._max_lines = max_lines
        self._max_bytes = max_bytes
        self._size = 0
        self._partial = bytearray()
        self._redactor = LineRedactor()

    def feed(self, chunk: bytes) -> None:
        """Add the next bytes, in chunks of any size: how they were split changes nothing."""
        self._partial += chunk
        if b"\n" in chunk:
            data = bytes(self._partial)
            *complete, rest = data.split(b"\n")
            self._partial = bytearray(rest)
            if self._redactor.in_block or b"-----BEGIN" in data:
                for line in complete:
                    self._push_guarded(line)
            else:
                for line in complete:
                    self._push(line)
        if len(self._partial) > self._max_bytes:
            # One endless line: keep its end, which is what a reader wants to see, redacted
            # before it is cut.
            text = self._redactor.unfinished(self._partial.decode("utf-8", "replace"))
            self._partial = bytearray(text.encode("utf-8")[-self._max_bytes :])

    def text(self) -> str:
        lines = list(self._lines)
        if self._partial:
            lines.append(bytes(self._partial))
        return redact_text(b"\n".join(lines).decode("utf-8", "replace"))

    def _push_guarded(self, line: bytes) -> None:
        """``_push`` for lines that may open, lie in or close a private key block."""
        if self._redactor.in_block or b"-----BEGIN" in line:
            text = self._redactor.line(line.decode("utf-8", "replace"))
            if text is None:
                return
            line = text.encode("utf-8")
        self._push(line)

    def _push(self, line: bytes) -> None:
        line = line[-self._max_bytes :]
        self._lines.append(line)
        self._size += len(line) + 1
        while len(self._lines) > self._max_lines or self._size > self._max_bytes:
            self._size -= len(self._lines.popleft()) + 1
