"""Numbers an agent reports about itself (tokens, turns, cost, time): what any reader accepts.

They reach sums, means, printed reports and receipts. A receipt's canonical JSON has no form for
an infinity, which two costs of 1e308 add up to, and its other readers (JavaScript) hold
integers exactly only up to 2**53 - 1; a report rounds with a fixed number of digits. So one
report of a count is an integer from 0 to 2**53 - 1 (a JSON number without a fraction: ``3.0``
is 3), of a cost a number of US dollars from 0 to 1e9, of a duration a number of milliseconds
from 0 to 1e12 (31 years): sums over any run stay finite. The agent protocol refuses a message
that breaks them (``conversation.protocol``); readers of transcripts and files an agent wrote in
another format take such a number as not reported.
"""

from __future__ import annotations

import math

__all__ = ["MAX_COST_USD", "MAX_COUNT", "MAX_DURATION_MS", "as_cost_usd", "as_count", "as_ms"]

MAX_COUNT = 2**53 - 1
MAX_COST_USD = 1e9
MAX_DURATION_MS = 1e12


def as_count(value: object) -> int | None:
    """``value`` as a count, or None when it is not one (see the module docstring)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value if 0 <= value <= MAX_COUNT else None
    if isinstance(value, float) and value.is_integer() and 0 <= value <= MAX_COUNT:
        return int(value)
    return None


def as_cost_usd(value: object) -> float | None:
    """``value`` as one report's cost in US dollars, or None when it is not one."""
    return _bounded(value, MAX_COST_USD)


def as_ms(value: object) -> float | None:
    """``value`` as one report's duration in milliseconds, or None when it is not one."""
    return _bounded(value, MAX_DURATION_MS)


def _bounded(value: object, limit: float) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, int) and not 0 <= value <= limit:  # before float(): 10**400 overflows
        return None
    number = float(value)
    return abs(number) if math.isfinite(number) and 0 <= number <= limit else None  # -0.0 is 0
