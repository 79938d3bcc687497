"""What a model request is, for a miss: its nearest recording and a one-line summary.

``similarity`` ranks the recordings of an endpoint to pick the nearest one: the longest equal
conversation prefix first. Where the two then differ is ``httprec.difference``.
"""

from __future__ import annotations

from typing import Any

from trialrun.httprec.difference import canonical


def similarity(recorded: Any, requested: Any) -> tuple[int, int]:
    """(equal leading conversation items, equal top-level fields): larger is nearer."""
    prefix = 0
    for old, new in zip(_conversation(recorded), _conversation(requested), strict=False):
        if canonical(old) != canonical(new):
            break
        prefix += 1
    same = 0
    if isinstance(recorded, dict) and isinstance(requested, dict):
        same = sum(
            1
            for k in recorded.keys() & requested.keys()
            if canonical(recorded[k]) == canonical(requested[k])
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
