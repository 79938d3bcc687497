"""OpenAI Agents SDK traces exported locally (``span.export()`` per line, from a processor).

Tool calls are ``function`` spans: ``span_data.input`` is the JSON text of the arguments and
``span_data.output`` is ``str(output)``, a Python repr for dicts. A failed tool has
``output: null`` and ``error.data.error`` (the SDK redacts it by default, and then only
``error.message`` is left). The input and final output come from ``generation`` spans, which
carry content only when sensitive-data capture was on; otherwise they are reported missing.
"""

from __future__ import annotations

from typing import Any

from trialrun.incident.importers._common import (
    RawCall,
    build_incident,
    decode_text,
    document_list,
    parse_iso,
)
from trialrun.incident.importers.api import Importer
from trialrun.incident.model import Incident

__all__ = ["IMPORTER", "detect", "to_incident"]


def detect(records: list[Any]) -> bool:
    objects = document_list(records, "data")
    return bool(objects) and all(
        isinstance(r, dict) and r.get("object") in ("trace", "trace.span") for r in objects
    )


def to_incident(records: list[Any], source_file: str) -> Incident:
    spans = [
        r
        for r in document_list(records, "data")
        if isinstance(r, dict) and r.get("object") == "trace.span"
    ]
    calls: list[RawCall] = []
    generations: list[dict[str, Any]] = []
    for span in sorted(spans, key=lambda s: str(s.get("started_at") or "")):
        data = span.get("span_data")
        if not isinstance(data, dict):
            continue
        if data.get("type") == "function":
            calls.append(_call(span, data))
        elif data.get("type") == "generation":
            generations.append(data)
    input_value = next(
        (v for g in generations if (v := _content(g.get("input"), "user")) is not None), None
    )
    final_output = next(
        (
            v
            for g in reversed(generations)
            if (v := _content(g.get("output"), "assistant")) is not None
        ),
        None,
    )
    return build_incident(
        source_format="openai-agents",
        source_file=source_file,
        input_value=input_value,
        final_output=final_output,
        calls=calls,
    )


def _call(span: dict[str, Any], data: dict[str, Any]) -> RawCall:
    args = decode_text(data.get("input"))
    error = span.get("error")
    ok: bool | None
    message: str | None = None
    if isinstance(error, dict):
        ok = False
        details = error.get("data")
        detail = details.get("error") if isinstance(details, dict) else None
        message = str(detail or error.get("message") or "error")
    else:
        ok = None if data.get("output") is None else True
    return RawCall(
        name=str(data.get("name") or "<unnamed>"),
        args=args if isinstance(args, dict) else None,
        ok=ok,
        result=decode_text(data.get("output")),
        error=message,
        started=parse_iso(span.get("started_at")),
        ended=parse_iso(span.get("ended_at")),
    )


def _content(messages: Any, role: str) -> Any:
    """The last ``role`` message's content (decoded) in a generation's input or output."""
    if not isinstance(messages, list):
        return None
    for message in reversed(messages):
        if not isinstance(message, dict) or message.get("role") != role:
            continue
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(
                str(part.get("text", ""))
                for part in content
                if isinstance(part, dict) and "text" in part
            )
        if content:
            return decode_text(content)
    return None


IMPORTER = Importer("openai-agents", detect, to_incident)
