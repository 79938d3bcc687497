"""Why a request does not match a recording: the first place two requests differ.

A replay miss (of the HTTP recorder and of the model gateway) and a lenient drift warning all
explain themselves against a recording: its line in the cassette and the first differing place,
with short previews of both sides. JSON is walked: object keys in ``KEY_ORDER`` first (what a
person reads first in a model request: model, system, messages...), then sorted; list items by
index (``messages[3].content``).
"""

from __future__ import annotations

from typing import Any

from trialrun.base import canonjson
from trialrun.base.quoting import shortened

_PREVIEW = 80
_ABSENT = object()
_READ_FIRST = "model system systemInstruction instructions messages contents input tools"
KEY_ORDER = {name: rank for rank, name in enumerate(_READ_FIRST.split(" "))}
Difference = tuple[str, Any, Any]
"""Where two requests differ, the recorded part and the requested part."""


def miss_message(subject: str, *, used_identical: int, nearest: str) -> str:
    """``cassette mismatch: <subject>[; N identical recording(s) were already used...]; <nearest>``

    ``nearest`` is ``describe(...)`` of the nearest recording, or why there is none."""
    parts = [f"cassette mismatch: {subject}"]
    if used_identical:
        parts.append(f"{used_identical} identical recording(s) were already used by earlier calls")
    parts.append(nearest)
    return "; ".join(parts)


def describe(
    line: int, found: Difference | None, *, used: bool, label: str = "nearest recording"
) -> str:
    """``nearest recording: line 7; first difference at messages[2].content: recorded ...``"""
    state = " (already used)" if used else ""
    if found is None:
        return f"{label}: line {line}{state} has the same request"
    where, old, new = found
    return (
        f"{label}: line {line}{state}; first difference at {where}: "
        f"recorded {_preview(old)}, requested {_preview(new)}"
    )


def first_difference(recorded: Any, requested: Any, where: str = "") -> Difference | None:
    """The first place two JSON values differ: ``(path, recorded part, requested part)``.

    A part one side lacks is returned as the ``_ABSENT`` marker (shown as ``(absent)``).
    """
    if isinstance(recorded, dict) and isinstance(requested, dict):
        keys = sorted(set(recorded) | set(requested), key=lambda k: (KEY_ORDER.get(k, 99), k))
        for key in keys:
            here = f"{where}.{key}" if where else key
            found = first_difference(recorded.get(key, _ABSENT), requested.get(key, _ABSENT), here)
            if found is not None:
                return found
        return None
    if isinstance(recorded, list) and isinstance(requested, list):
        for index, (old, new) in enumerate(zip(recorded, requested, strict=False)):
            found = first_difference(old, new, f"{where}[{index}]")
            if found is not None:
                return found
        if len(recorded) == len(requested):
            return None
        index = min(len(recorded), len(requested))
        return (
            f"{where}[{index}]",
            recorded[index] if index < len(recorded) else _ABSENT,
            requested[index] if index < len(requested) else _ABSENT,
        )
    if recorded is _ABSENT or requested is _ABSENT or canonical(recorded) != canonical(requested):
        return (where or "the request body", recorded, requested)
    return None


def canonical(value: Any) -> str:
    try:
        return canonjson.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


def _preview(value: Any) -> str:
    if value is _ABSENT:
        return "(absent)"
    return shortened(canonical(value), _PREVIEW)
