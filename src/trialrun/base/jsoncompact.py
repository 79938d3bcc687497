"""The stdlib's C JSON encoder for compact text, built once instead of once per value.

``json.dumps`` with options, and ``JSONEncoder.encode``, build a new C encoder for every value,
which costs about as much as encoding a small one: a replayed tool call's answer or a run.jsonl
event. The encoder made here writes exactly what ``json.JSONEncoder(ensure_ascii=...,
separators=(",", ":"), default=...).encode`` writes, as a list of pieces to join.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from json.encoder import (  # type: ignore[attr-defined]
    c_make_encoder,
    encode_basestring,
    encode_basestring_ascii,
)
from typing import Any

__all__ = ["CompactEncoder", "compact_encoder"]

CompactEncoder = Callable[[Any, int], list[str]]
"""Called as ``encode(value, 0)``; ``"".join`` the pieces it returns."""


def compact_encoder(
    *, ensure_ascii: bool, default: Callable[[Any], Any] | None = None
) -> CompactEncoder:
    """A compact encoder with these options.

    Its circular-reference markers may keep entries after an encode failed (and a later value
    could then be taken for a cycle): use a new encoder after any failure.
    """
    if default is None:
        default = json.JSONEncoder().default  # raises TypeError, as json.dumps does
    if c_make_encoder is None:  # an interpreter without the _json accelerator
        encoder = json.JSONEncoder(
            ensure_ascii=ensure_ascii, separators=(",", ":"), default=default
        )
        return lambda value, _level: [encoder.encode(value)]
    quote = encode_basestring_ascii if ensure_ascii else encode_basestring
    encode: CompactEncoder = c_make_encoder({}, default, quote, None, ":", ",", False, False, True)
    return encode
