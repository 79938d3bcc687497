"""Why a request does not match a recording: the first place two requests differ.

A replay miss and a lenient drift warning both explain themselves against a recording: its line
in the cassette and the first differing place, visited model, system, instructions, messages,
input, tools first (``messages[3].content``), with short previews of both sides. ``similarity``
ranks the recordings to pick the nearest one: the longest equal conversation prefix first.
"""

from __future__ import annotations

from typing import Any

from trialrun.base import canonjson
from trialrun.base.quoting import shortened

_PREVIEW = 80
_ABSENT = object()
_KEY_ORDER = {
    name: rank
    for rank, name in enumerate(
        (
            "model",
            "system",
            "systemInstruction",
            "instructions",
            "messages",
            "contents",
            "input",
            "tools",
        )
    )
}


def describe_drift(
    line: int, recorded: Any, requested: Any, *, used: bool, label: str = "nearest recording"
) -> str:
    """``nearest recording: line 7; first difference at messages[2].content: recorded ...``"""
    state = " (already used)" if used else ""
    found = first_difference(recorded, requested)
    if found is None:
        return f"{label}: line {line}{state} has the same request"
    where, old, new = found
    return (
        f"{label}: line {line}{state}; first difference at {where}: "
        f"recorded {_preview(old)}, requested {_preview(new)}"
    )


def first_difference(recorded: Any, requested: Any, where: str = "") -> tuple[str, Any, Any] | None:
    """The first place two JSON values differ: ``(path, recorded part, requested part)``.

    Object keys are visited in ``_KEY_ORDER`` first, then sorted; list items by index. A part
    one side lacks is returned as the ``_ABSENT`` marker (shown as ``(absent)``).
    """
    if isinstance(recorded, dict) and isinstance(requested, dict):
        keys = sorted(set(recorded) | set(requested), key=lambda k: (_KEY_ORDER.get(k, 99), k))
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
    if recorded is _ABSENT or requested is _ABSENT or _canonical(recorded) != _canonical(requested):
        return (where or "the request body", recorded, requested)
    return None


def similarity(recorded: Any, requested: Any) -> tuple[int, int]:
    """(equal leading conversation items, equal top-level fields): larger is nearer."""
    prefix = 0
    for old, new in zip(_conversation(recorded), _conversation(requested), strict=False):
        if _canonical(old) != _canonical(new):
            break
        prefix += 1
    same = 0
    if isinstance(recorded, dict) and isinstance(requested, dict):
        same = sum(
            1
            for k in recorded.keys() & requested.keys()
            if _canonical(recorded[k]) == _canonical(requested[k])
        )
    return prefix, same


def summarize_request(request: Any) -> str:
    """``model 'gpt-4o', 3 message(s), streamed``."""
    if request == "":
        return "no body"
    if not isinstance(request, dict):
        return "body is not a JSON object"
    parts = [f"model {request['model']!r}" if isinstance(request.get("model"), str) else "no model"]
    conversation = _conversation(request)
    if conversation:
        parts.append(f"{len(conversation)} message(s)")
    if request.get("stream") is True:
        parts.append("streamed")
    return ", ".join(parts)


def _conversation(request: Any) -> list[Any]:
    if isinstance(request, dict):
        for name in ("messages", "contents", "input"):
            items = request.get(name)
            if isinstance(items, list):
                return items
    return []


def _canonical(value: Any) -> str:
    try:
        return canonjson.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


def _preview(value: Any) -> str:
    if value is _ABSENT:
        return "(absent)"
    return shortened(_canonical(value), _PREVIEW)
