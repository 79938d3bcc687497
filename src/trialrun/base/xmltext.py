"""Text safe for XML 1.0, for every junit-style file trialrun writes (runs, merges, incidents)."""

from __future__ import annotations

import re

_XML_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
XML_DECLARATION = '<?xml version="1.0" encoding="UTF-8"?>\n'


def xml_text(text: str) -> str:
    """``text`` without the characters XML 1.0 forbids."""
    return _XML_ILLEGAL.sub("", text)
