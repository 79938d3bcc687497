"""JSON numbers as trialrun reads them: finite.

JSON has no infinity, yet ``1e400`` is valid JSON that Python reads as ``inf``: JSON cannot
write it back (run.jsonl would hold ``Infinity``, an agent would be sent it) and canonical JSON
(the receipt) refuses it. Every reader of JSON from outside passes ``finite_float`` as
``parse_float``, beside refusing the ``NaN`` and ``Infinity`` literals (``refuse_constant``);
``FINITE_JSON`` is a decoder that does both, and ``loads_finite`` reads text with it as
``json.loads`` would.
"""

from __future__ import annotations

import json
import math
from typing import Any, NoReturn

__all__ = ["FINITE_JSON", "finite_float", "loads_finite", "refuse_constant"]


def finite_float(text: str) -> float:
    """``float(text)``; ValueError when that is infinite."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is beyond the range of a JSON number")
    return value


def refuse_constant(name: str) -> NoReturn:
    """``parse_constant`` for JSON from outside: ``NaN``, ``Infinity`` and ``-Infinity`` are
    Python's words, not JSON's; a recording or a message holding them would break matching."""
    raise ValueError(f"{name} is not valid JSON")


FINITE_JSON = json.JSONDecoder(parse_constant=refuse_constant, parse_float=finite_float)
"""The decoder of JSON from outside, built once: ``json.loads`` with options builds a new one
for every call, which costs as much as reading a short line."""


def loads_finite(text: str) -> Any:
    """``json.loads(text, parse_constant=refuse_constant, parse_float=finite_float)``, with the
    one decoder: the same value, or the same error (a byte-order mark included)."""
    if text.startswith("\ufeff"):
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    return FINITE_JSON.decode(text)
