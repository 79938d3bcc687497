"""Redaction of a stream kept as a rolling tail: each line is redacted as it arrives.

A tail cut from a stream keeps its last lines, and a private key block printed before the cut
would lose its ``-----BEGIN`` line there, leaving lines of bare base64 that no rule recognises.
So the stream is redacted on the way in, line by line, remembering whether a private key block
is open: the line that opens one keeps what precedes the block and ends in ``[REDACTED]``; the
lines inside it are dropped, up to and including the ``-----END`` line (what follows that on its
line is kept, redacted). A block that never ends hides the rest of the stream.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from trialrun.base.redact import REDACTED, redact_text
from trialrun.base.secretshapes import BLOCK_BEGIN, BLOCK_END

__all__ = ["LineRedactor", "redact_stream_text", "redact_then_cut_tail", "redacting_sink"]


class LineRedactor:
    """Redacts the lines of one stream in order (see the module docstring)."""

    __slots__ = ("_in_block",)

    def __init__(self) -> None:
        self._in_block = False

    def line(self, text: str) -> str | None:
        """The line redacted, or None when it lies wholly inside a private key block."""
        if self._in_block:
            end = BLOCK_END.search(text)
            if end is None:
                return None
            self._in_block = False
            rest = text[end.end() :]
            return self.line(rest) if rest.strip() else None
        if "-----BEGIN" in text:
            begin = BLOCK_BEGIN.search(text)
            if begin is not None and BLOCK_END.search(text, begin.end()) is None:
                self._in_block = True
                return redact_text(text[: begin.start()]) + REDACTED
        return redact_text(text)

    def lines(self, lines: Iterable[str]) -> list[str]:
        """Each of ``lines`` redacted, in order, without those inside a private key block."""
        out = []
        for text in lines:
            redacted = self.line(text)
            if redacted is not None:
                out.append(redacted)
        return out

    def unfinished(self, text: str) -> str:
        """A line still being written, redacted as far as it goes, for a tail cut through it.

        A private key block it opens is taken as open from here on, as ``line`` would.
        """
        if self._in_block:
            return ""
        begin = BLOCK_BEGIN.search(text) if "-----BEGIN" in text else None
        if begin is not None and BLOCK_END.search(text, begin.end()) is None:
            self._in_block = True
            return redact_text(text[: begin.start()]) + REDACTED
        return redact_text(text)


def redact_stream_text(text: str) -> str:
    """``text`` redacted line by line as ``LineRedactor`` does, line endings kept."""
    redactor = LineRedactor()
    out: list[str] = []
    for raw in text.splitlines(keepends=True):
        body = raw.rstrip("\r\n")
        redacted = redactor.line(body)
        if redacted is not None:
            out.append(redacted + raw[len(body) :])
    return "".join(out)


def redacting_sink(append: Callable[[str], None]) -> Callable[[str], None]:
    """A sink for a stream's lines that redacts each before ``append`` keeps it (in a bounded
    tail that may drop the start of a secret)."""
    redactor = LineRedactor()

    def sink(text: str) -> None:
        redacted = redactor.line(text)
        if redacted is not None:
            append(redacted)

    return sink


def redact_then_cut_tail(text: str, limit: int) -> str:
    """The last ``limit`` characters of ``text`` once redacted.

    Redacting first means a secret that begins before the cut is still recognised whole.
    """
    return redact_text(text)[-limit:] if limit > 0 else ""
