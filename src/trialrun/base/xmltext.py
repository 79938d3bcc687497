"""Text safe for XML 1.0, for every junit-style file trialrun writes (runs, merges, incidents)."""

from __future__ import annotations

import re

from trialrun.base.visible import visible, visible_name

_XML_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
XML_DECLARATION = '<?xml version="1.0" encoding="UTF-8"?>\n'


def xml_text(text: str) -> str:
    """``text`` as XML 1.0 can carry it: control and bidi characters shown as escapes
    (``base.visible``; a CI page shows a NUL as ``\\x00`` instead of hiding it), U+FFFE and
    U+FFFF removed."""
    return _XML_ILLEGAL.sub("", visible(text))


def xml_name(text: str) -> str:
    """A name for an attribute (a suite, a case): as ``xml_text``, newlines and tabs escaped."""
    return _XML_ILLEGAL.sub("", visible_name(text))
