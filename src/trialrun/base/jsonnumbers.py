"""JSON numbers as trialrun reads them: finite.

JSON has no infinity, yet ``1e400`` is valid JSON that Python reads as ``inf``: JSON cannot
write it back (run.jsonl would hold ``Infinity``, an agent would be sent it) and canonical JSON
(the receipt) refuses it. Every reader of JSON from outside passes ``finite_float`` as
``parse_float``, beside refusing the ``NaN`` and ``Infinity`` literals.
"""

from __future__ import annotations

import math

__all__ = ["finite_float"]


def finite_float(text: str) -> float:
    """``float(text)``; ValueError when that is infinite."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is beyond the range of a JSON number")
    return value
