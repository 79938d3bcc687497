"""How deeply JSON data nests, and the most trialrun takes from an agent.

Every walk over an agent's data (redaction, canonical JSON, cassette matching, the report, JSON
Schema checks) recurses, and Python's stack ends at about 1,000 frames: an agent's arguments
nested 500 levels deep used to end the whole run in a traceback. Data deeper than
``MAX_NESTING`` is refused where it comes in, as the agent's fault, so nothing after can fail on
it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["MAX_NESTING", "nests_deeper_than", "too_deep", "unreadable_json"]

MAX_NESTING = 100
"""Objects and arrays inside one another; the outermost counts as the first level."""


def nests_deeper_than(
    value: Any, limit: int = MAX_NESTING, *, text: str | bytes | None = None
) -> bool:
    """Whether ``value`` (JSON data) nests more than ``limit`` levels deep.

    ``text``, the JSON it was parsed from, lets most data skip the walk: it cannot nest deeper
    than it has opening brackets.
    """
    if text is not None and len(text) <= limit:
        return False  # fewer characters than the levels allowed
    if isinstance(text, bytes):
        if text.count(b"[") + text.count(b"{") <= limit:
            return False
    elif text is not None and text.count("[") + text.count("{") <= limit:
        return False
    pending: list[tuple[Any, int]] = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        children: Iterable[Any]
        if type(item) is dict:
            children = item.values()
        elif type(item) is list:
            children = item
        else:
            continue
        if depth > limit:
            return True
        pending.extend((child, depth + 1) for child in children if type(child) in (dict, list))
    return False


def too_deep(what: str) -> str:
    """The message for data from a file or a peer that nests past ``MAX_NESTING``."""
    return (
        f"{what} nests objects and arrays more than {MAX_NESTING} levels deep; "
        f"trialrun reads at most {MAX_NESTING}"
    )


def unreadable_json(error: ValueError | RecursionError) -> str:
    """What ``json.loads`` refused, in words: besides bad syntax (``JSONDecodeError``, which
    callers word with its line and column) a number of more than 4,300 digits, or nesting past
    Python's stack."""
    if isinstance(error, RecursionError):
        return "objects and arrays nested too deeply to read"
    return str(error)
