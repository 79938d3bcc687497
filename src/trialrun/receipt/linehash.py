"""One receipt line parsed, and its event's hash recomputed, with one serialization.

``verify.verify_receipt`` reads each line through an ``EventHasher``: its parser refuses a key
held twice in any object (``base.signedjson.unique_keys``: the hash is recomputed from the parse,
so a dropped duplicate would pass as signed), NaN and Infinity, and watches the numbers it reads,
so that most events hash through the stdlib encoder (``sorted_compact``) and the rest through
``envelope.event_hash``.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

from trialrun.base.jsonnumbers import refuse_constant
from trialrun.base.signedjson import unique_keys
from trialrun.receipt.envelope import event_hash

__all__ = ["EventHasher", "order_may_matter", "sorted_compact"]

# Key order can only matter when some character is >= U+E000 (raw, or as a \u escape).
_HIGH_CHAR = re.compile("[\ue000-\U0010ffff]")
_HIGH_ESCAPE = re.compile(rb"\\u[dDeEfF]")


class EventHasher:
    """Parses lines and recomputes event hashes, serializing each event once.

    The fast path hashes the stdlib encoder's sorted compact text. That text is canonical
    exactly when canonjson's own fast path would take it: the line is ASCII without any \\u
    escape (so every key is ASCII, where UTF-16 and code-point order agree, and no string holds a
    lone surrogate) and every number is an int of at most 15 digits or a non-integral float with
    1e-4 <= |x| < 1e16. The numbers are watched while parsing, so no second walk over the event
    is needed. Any other line goes through ``envelope.event_hash``, in both key orders when the
    order can matter; the chain must then hold together under one order from start to end.
    """

    __slots__ = ("codepoint_ok", "parse", "plain_numbers", "utf16_ok")

    def __init__(self) -> None:
        self.plain_numbers = True
        self.utf16_ok = True
        self.codepoint_ok = True

        def parse_float(text: str) -> float:
            value = float(text)
            if value.is_integer() or not 1e-4 <= abs(value) < 1e16:
                self.plain_numbers = False
            return value

        def parse_int(text: str) -> int:
            if len(text) > 15:
                self.plain_numbers = False
            return int(text)

        decoder = json.JSONDecoder(
            object_pairs_hook=unique_keys,
            parse_float=parse_float,
            parse_int=parse_int,
            parse_constant=refuse_constant,
        )
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
        """Slow path: whether ``event`` (without hash and signature) hashes to ``stored_hash``."""
        self.plain_numbers = True
        if not order_may_matter(raw, text):
            return event_hash(event) == stored_hash
        self.utf16_ok = self.utf16_ok and event_hash(event) == stored_hash
        self.codepoint_ok = self.codepoint_ok and event_hash(event, codepoint=True) == stored_hash
        return self.utf16_ok or self.codepoint_ok


sorted_compact: Final = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), sort_keys=True, allow_nan=False, check_circular=False
).encode
"""``json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)``, the encoder
built once (json.dumps with options builds one per call); NaN refused. Parsed JSON holds no
cycle, so there is no circular check."""


def order_may_matter(raw: bytes, text: str) -> bool:
    """Whether UTF-16 and code-point key order could sort some object of this line differently."""
    if raw.isascii():
        return b"\\u" in raw and _HIGH_ESCAPE.search(raw) is not None
    return _HIGH_CHAR.search(text) is not None or _HIGH_ESCAPE.search(raw) is not None
