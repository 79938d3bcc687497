"""Dotted paths into JSON data (``calls.*.args.card_number``, ``items.0``), walked one way.

Every feature that names places in JSON by a path walks it here: normalization's
``strip_paths`` and ``replace_paths`` (``trialrun.config.normalize``) and ``trialrun incident
import --redact-path``. A path is a list of segments. ``*`` is every member of an object or
every item of a list; in a list, a segment names an item only when it is an index spelled the
one canonical way (ASCII digits, no leading zero: ``1``, not ``01`` or ``¹``), so two spellings
never name the same item; in an object, a segment is a member's name. A path that names nothing
is no error: a field is often present in some records only.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from trialrun.base.quoting import excerpt

__all__ = ["dotted", "places", "split_path"]

Place = tuple[Any, Any]
"""An object and one of its keys, or a list and one of its indexes: where a value sits."""


def split_path(path: str) -> list[str]:
    """``"a..b.0"`` -> ``["a", "b", "0"]``: empty segments are ignored, as RunLedger does."""
    return [segment for segment in path.split(".") if segment]


def places(node: Any, path: Sequence[str]) -> list[Place]:
    """Every existing place ``path`` names below ``node``, in document order.

    A list, built before the caller changes anything: the places are all at the same depth, so
    setting or deleting one leaves the others where they were.
    """
    if not path:
        return []
    found: list[Place] = []
    _collect(node, path, found)
    return found


def _collect(node: Any, path: Sequence[str], found: list[Place]) -> None:
    head, rest = path[0], path[1:]
    if isinstance(node, dict):
        keys: Iterable[Any] = list(node) if head == "*" else [head] if head in node else []
    elif isinstance(node, list):
        keys = _indexes(node, head)
    else:
        return
    for key in keys:
        if rest:
            _collect(node[key], rest, found)
        else:
            found.append((node, key))


def _indexes(items: list[Any], segment: str) -> Sequence[int]:
    if segment == "*":
        return range(len(items))
    if segment.isascii() and segment.isdigit() and str(int(segment)) == segment:
        index = int(segment)
        return [index] if index < len(items) else []
    return []


def dotted(path: Iterable[object]) -> str:
    """A path for a message: each key excerpted, since a key can be as long as the file."""
    return ".".join(excerpt(str(element)) for element in path)
