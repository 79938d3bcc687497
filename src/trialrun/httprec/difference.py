"""Why a request does not match a recording: the first place two requests differ.

A replay miss (of the HTTP recorder and of the model gateway) and a lenient drift warning all
explain themselves against a recording: its line in the cassette and the first differing place,
with short previews of both sides. JSON is walked: object keys in ``KEY_ORDER`` first (what a
person reads first in a model request: model, system, messages..., and a tool's ``name`` before
its description, so reordered tools read as such), then sorted; list items by index
(``messages[3].content``). Previews of a long value are cut around the first character where the
two sides differ, so they never read the same.
"""

from __future__ import annotations

from typing import Any

from trialrun.base import canonjson
from trialrun.base.redact import redact, redact_text
from trialrun.base.words import counted, inflected

_PREVIEW = 80
_ABSENT = object()
_READ_FIRST = "model system systemInstruction instructions messages contents input tools name"
KEY_ORDER = {name: rank for rank, name in enumerate(_READ_FIRST.split(" "))}
Difference = tuple[str, Any, Any]
"""Where two requests differ, the recorded part and the requested part."""


def miss_message(subject: str, *, used_identical: int, nearest: str) -> str:
    """``cassette mismatch: <subject>[; N identical recording(s) were already used...]; <nearest>``

    ``nearest`` is ``describe(...)`` of the nearest recording, or why there is none."""
    parts = [f"cassette mismatch: {subject}"]
    if used_identical:
        parts.append(
            f"{counted(used_identical, 'identical recording')} "
            f"{inflected(used_identical, 'was', 'were')} already used by "
            f"{inflected(used_identical, 'an earlier call', 'earlier calls')}"
        )
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
    shown_old, shown_new = _previews(old, new)
    return (
        f"{label}: line {line}{state}; first difference at {where}: "
        f"recorded {shown_old}, requested {shown_new}"
    )


def describe_redacted(
    line: int, recorded: Any, requested: Any, *, used: bool, where: str = ""
) -> str:
    """``describe`` of the first place two JSON values differ, shown from their redacted forms:
    a secret that differs is named by its place, never shown."""
    found = first_difference(recorded, requested, where)
    shown = first_difference(redact(recorded), redact(requested), where)
    if found is not None and (shown is None or shown[0] != found[0]):
        state = " (already used)" if used else ""
        return (
            f"nearest recording: line {line}{state}; first difference at {found[0]} "
            "(a redacted value)"
        )
    return describe(line, shown, used=used)


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


def _previews(old: Any, new: Any) -> tuple[str, str]:
    """Both sides, redacted (before any cut: a cut secret is no longer recognised), each cut to
    about ``_PREVIEW`` characters around the first character where they differ."""
    old_text = "(absent)" if old is _ABSENT else redact_text(canonical(old))
    new_text = "(absent)" if new is _ABSENT else redact_text(canonical(new))
    pairs = enumerate(zip(old_text, new_text, strict=False))
    at = next((i for i, (a, b) in pairs if a != b), min(len(old_text), len(new_text)))
    return _window(old_text, at), _window(new_text, at)


def _window(text: str, at: int) -> str:
    """At most ``_PREVIEW`` characters of ``text`` centred on index ``at``, with ``...`` where
    text was left out (a difference in the first half of the limit shows the start)."""
    if len(text) <= _PREVIEW:
        return text
    start = max(0, min(at - _PREVIEW // 2, len(text) - _PREVIEW))
    end = start + _PREVIEW
    return ("..." if start else "") + text[start:end] + ("..." if end < len(text) else "")
