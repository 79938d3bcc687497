"""Redaction of a stream kept as a rolling tail: each line is redacted as it arrives.

A tail cut from a stream keeps its last lines, and a private key block printed before the cut
would lose its ``-----BEGIN`` line there, leaving lines of bare base64 that no rule recognises.
So the stream is redacted on the way in, line by line, remembering whether a private key block
is open. A block opens on a line that ends with its BEGIN marker, as a key printed raw does (a
key inside one JSON line, its newlines escaped, is that line's business: ``redact_text`` hides
it from the marker on). That line keeps what precedes the marker and ends in ``[REDACTED]``;
the lines after it are dropped while they look like key material (base64, ``Name: value``
headers, blank lines), up to and including the ``-----END`` line, whose rest is kept. A line
of anything else ends a block whose END never came (a key cut short by ``head``), and is kept.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from trialrun.base.redact import REDACTED, redact_text
from trialrun.base.secretshapes import BLOCK_BEGIN, BLOCK_END

__all__ = ["LineRedactor", "redact_stream_text", "redacting_sink"]

# What the lines between a private key's BEGIN and END lines hold: base64 (a PGP checksum line
# too), headers such as ``Proc-Type: 4,ENCRYPTED`` or ``Version: ...``, blank lines.
_KEY_MATERIAL = re.compile(r"[A-Za-z0-9+/=]*|[A-Za-z][A-Za-z0-9-]*: [^\n]*")


class LineRedactor:
    """Redacts the lines of one stream in order (see the module docstring)."""

    __slots__ = ("_in_block",)

    def __init__(self) -> None:
        self._in_block = False

    @property
    def in_block(self) -> bool:
        """Whether a private key block is open: the next line needs ``line`` to be kept."""
        return self._in_block

    def line(self, text: str) -> str | None:
        """The line redacted, or None when it lies wholly inside a private key block."""
        if self._in_block:
            end = BLOCK_END.search(text)
            if end is not None:
                self._in_block = False
                rest = text[end.end() :]
                return self.line(rest) if rest.strip() else None
            if _KEY_MATERIAL.fullmatch(text.strip()):
                return None
            self._in_block = False
        opened = self._opening(text)
        return redact_text(text) if opened is None else opened

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
            return self.line(text) or ""
        opened = self._opening(text)
        return redact_text(text) if opened is None else opened

    def _opening(self, text: str) -> str | None:
        """The line's redaction when it opens a block (and the block is now open), else None."""
        if "-----BEGIN" not in text:
            return None
        begin = BLOCK_BEGIN.search(text)
        if begin is None or text[begin.end() :].strip():
            return None
        self._in_block = True
        return redact_text(text[: begin.start()]) + REDACTED


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
