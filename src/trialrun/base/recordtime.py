"""When a recording was made: ``recorded_at``, ISO 8601 in UTC to the second.

Every recorder (tool cassette, MCP, model, HTTP) writes it; the staleness checks read it back.
A file written before the field existed has none, and loads all the same.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

__all__ = ["parse_recorded_at", "recorded_at"]


def recorded_at(now: float | None = None) -> str:
    """``2026-12-05T04:14:13Z`` for ``now`` (epoch seconds; default: the clock)."""
    moment = time.time() if now is None else now
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(moment))


def parse_recorded_at(value: object) -> datetime | None:
    """The moment a ``recorded_at`` names (aware, UTC); None when it is absent or no ISO 8601
    date and time with a zone (a recording without a known age is never called stale)."""
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None
    return moment.astimezone(UTC)
