"""Where a line ends in the line-based formats trialrun reads: JSON Lines and server-sent events.

``str.splitlines`` also ends a line at U+2028, U+2029, U+0085, VT, FF and the other separators
Unicode knows. JSON allows every one of them raw inside a string, so splitting a JSON Lines text
that way cuts a record in two (``incident import`` refused trialrun's own run.jsonl). Human text
may keep ``splitlines``; a format whose lines are records splits here.
"""

from __future__ import annotations

import re

_SSE_LINE_END = re.compile("\r\n|\r|\n")


def jsonl_lines(text: str) -> list[str]:
    """The lines of a JSON Lines text: ended by ``\\n`` only, with a ``\\r`` before it dropped.

    As ``splitlines`` does, a final line end gives no empty last line.
    """
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def sse_lines(text: str) -> list[str]:
    """The lines of a ``text/event-stream`` body, which the standard ends with CRLF, LF or CR."""
    lines = _SSE_LINE_END.split(text)
    if lines[-1] == "":
        lines.pop()
    return lines
