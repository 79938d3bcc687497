"""One receipt line parsed, and its event's hash recomputed, with one serialization.

``verify.verify_receipt`` reads each line through an ``EventHasher``: its parser refuses a key
held twice in any object (``base.signedjson.unique_keys``: the hash is recomputed from the parse,
so a dropped duplicate would pass as signed) and NaN and Infinity; each event is hashed by
``envelope.event_hash``, the writer's own serialization.
"""

from __future__ import annotations

import json
import re
from typing import Any

from trialrun.base.jsonnumbers import refuse_constant
from trialrun.base.signedjson import unique_keys
from trialrun.receipt.envelope import event_hash

__all__ = ["EventHasher", "order_may_matter"]

# Key order can only matter when some character is >= U+E000 (raw, or as a \u escape).
_HIGH_CHAR = re.compile("[\ue000-\U0010ffff]")
_HIGH_ESCAPE = re.compile(rb"\\u[dDeEfF]")


class EventHasher:
    """Parses lines and recomputes event hashes: each event through ``envelope.event_hash``,
    in both key orders when the order can matter; the chain must then hold together under one
    order from start to end.
    """

    __slots__ = ("codepoint_ok", "parse", "utf16_ok")

    def __init__(self) -> None:
        self.utf16_ok = True
        self.codepoint_ok = True
        decoder = json.JSONDecoder(object_pairs_hook=unique_keys, parse_constant=refuse_constant)
        raw_decode, decode = decoder.raw_decode, decoder.decode

        def parse(text: str) -> Any:
            # decode() adds two regex passes for the whitespace around the value; every line
            # ends in a newline, which the strip below skips for less.
            try:
                value, end = raw_decode(text)
            except json.JSONDecodeError:  # leading whitespace, or not JSON: let decode() judge
                return decode(text)
            if end != len(text) and text[end:].strip(" \t\r\n"):
                raise ValueError(f"extra data after the JSON value at character {end}")
            return value

        self.parse = parse

    def matches(self, event: dict[str, Any], stored_hash: str, raw: bytes, text: str) -> bool:
        """Whether ``event`` (without hash and signature) hashes to ``stored_hash``."""
        if not order_may_matter(raw, text):
            return event_hash(event) == stored_hash
        self.utf16_ok = self.utf16_ok and event_hash(event) == stored_hash
        self.codepoint_ok = self.codepoint_ok and event_hash(event, codepoint=True) == stored_hash
        return self.utf16_ok or self.codepoint_ok


def order_may_matter(raw: bytes, text: str) -> bool:
    """Whether UTF-16 and code-point key order could sort some object of this line differently."""
    if raw.isascii():
        return b"\\u" in raw and _HIGH_ESCAPE.search(raw) is not None
    return _HIGH_CHAR.search(text) is not None or _HIGH_ESCAPE.search(raw) is not None
