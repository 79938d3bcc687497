"""Text from outside shown as it is, characters that would hide or disguise it written as escapes.

A case id, a suite or tool name, an assertion message or an agent's output can hold a NUL, an
ESC that starts a terminal sequence (``\\x1b[31m`` colours, ``\\x1b]52;`` writes the clipboard), a
carriage return that overwrites the line, or a bidi control (U+202E) that shows the text after it
reversed. HTML escaping and XML's character rules neutralise none of these. Every view (the
console, report.html, junit.xml, the GitHub step summary and annotations, the progress line)
passes such text through ``visible``, which writes each as the escape a Python or JSON
reader knows: ``\\x1b``, ``\\x00``, ``\\u202e``. Backslashes are left alone, so the escapes are
for reading, not for decoding back.
"""

from __future__ import annotations

import re

_HIDDEN = (
    "\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f"  # C0 but tab, LF and CR; DEL; C1 (U+0085 too)
    "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"  # bidi marks, embeddings, overrides, isolates
    "\u2028\u2029"  # line and paragraph separators
    "\ud800-\udfff"  # lone surrogates, which no UTF-8 output can carry
)
# A CR is a line end only before a LF: alone, it sends a terminal back to overwrite the line.
_IN_TEXT = re.compile(f"[{_HIDDEN}]|\r(?!\n)")
_IN_NAME = re.compile(f"[\t\n\r{_HIDDEN}]")


_SHORT = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    if char in _SHORT:
        return _SHORT[char]
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """``text`` with every hidden character escaped; tabs and line ends (LF, CRLF) stay."""
    if _IN_TEXT.search(text) is None:
        return text
    return _IN_TEXT.sub(_escape, text)


def visible_name(text: str) -> str:
    """A name on one line (a case id, a suite or tool name): tabs and newlines escaped too."""
    if _IN_NAME.search(text) is None:
        return text
    return _IN_NAME.sub(_escape, text)


def visible_value(value: object) -> object:
    """jinja2's ``finalize`` for every page: each plain string a template prints is ``visible``.

    autoescape turns ``<`` into ``&lt;`` but leaves a bidi override or an ESC in the page.
    Markup the template made itself (``Markup``, a ``str`` subclass) and non-strings pass as
    they are.
    """
    return visible(value) if type(value) is str else value
