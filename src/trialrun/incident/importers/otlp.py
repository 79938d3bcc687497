"""OpenTelemetry OTLP/JSON traces with the GenAI (and MCP / OpenInference) conventions.

Accepts the Collector ``file`` exporter's JSON lines (hex ids, integer enums, int64 as decimal
strings) and protobuf ``MessageToJson`` output (base64 ids, enum names), one or many
``ExportTraceServiceRequest`` documents.

Tool spans are ``gen_ai.operation.name == "execute_tool"``, ``mcp.method.name ==
"tools/call"`` or OpenInference ``TOOL`` spans. A tool span inside another tool span (an MCP
server span under its client span, both under a framework span) is the same call seen twice,
so only the outermost one is kept. Input and final output come from the ``invoke_agent`` span's
``gen_ai.input.messages`` / ``gen_ai.output.messages`` (or OpenInference ``input.value`` /
``output.value``) on a root span.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from trialrun.incident.importers._common import (
    RawCall,
    build_incident,
    decode_text,
    moment_from_epoch,
)
from trialrun.incident.importers.api import Importer
from trialrun.incident.model import Incident

__all__ = ["IMPORTER", "detect", "to_incident"]

_HEX_ID = re.compile(r"^[0-9a-fA-F]{16}$|^[0-9a-fA-F]{32}$")


@dataclass
class _Span:
    span_id: str
    parent_id: str
    name: str
    attributes: dict[str, Any]
    status_error: bool
    status_message: str
    events: list[dict[str, Any]]
    started: datetime | None
    ended: datetime | None


def detect(records: list[Any]) -> bool:
    return bool(records) and all(isinstance(r, dict) and "resourceSpans" in r for r in records)


def to_incident(records: list[Any], source_file: str) -> Incident:
    spans = [_span(raw) for raw in _raw_spans(records)]
    tool_ids = {s.span_id for s in spans if _is_tool(s)}
    calls: list[RawCall] = []
    for span in spans:
        if span.span_id in tool_ids and span.parent_id not in tool_ids:
            calls.append(_call(span))
    span_ids = {s.span_id for s in spans}
    roots = [s for s in spans if not s.parent_id or s.parent_id not in span_ids]
    agents = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "invoke_agent"]
    carriers = agents + roots
    input_value = _first(carriers, ("gen_ai.input.messages", "input.value"), "user")
    final_output = _first(carriers, ("gen_ai.output.messages", "output.value"), "assistant")
    return build_incident(
        source_format="otlp",
        source_file=source_file,
        input_value=input_value,
        final_output=final_output,
        calls=calls,
    )


def _raw_spans(records: list[Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for record in records:
        for resource in _list(record.get("resourceSpans")):
            for scope in _list(_dict(resource).get("scopeSpans")):
                found.extend(s for s in _list(_dict(scope).get("spans")) if isinstance(s, dict))
    return found


def _span(raw: dict[str, Any]) -> _Span:
    status = _dict(raw.get("status"))
    code = status.get("code")
    return _Span(
        span_id=_normal_id(raw.get("spanId")),
        parent_id=_normal_id(raw.get("parentSpanId")),
        name=str(raw.get("name") or ""),
        attributes=_attributes(raw.get("attributes")),
        status_error=code in (2, "2", "STATUS_CODE_ERROR"),
        status_message=str(status.get("message") or ""),
        events=[
            {"name": e.get("name"), **_attributes(e.get("attributes"))}
            for e in _list(raw.get("events"))
            if isinstance(e, dict)
        ],
        started=_nanos(raw.get("startTimeUnixNano")),
        ended=_nanos(raw.get("endTimeUnixNano")),
    )


def _is_tool(span: _Span) -> bool:
    attrs = span.attributes
    return (
        attrs.get("gen_ai.operation.name") == "execute_tool"
        or attrs.get("mcp.method.name") == "tools/call"
        or attrs.get("openinference.span.kind") == "TOOL"
    )


def _call(span: _Span) -> RawCall:
    attrs = span.attributes
    name = attrs.get("gen_ai.tool.name") or attrs.get("tool.name") or _name_from_span(span.name)
    raw_args = _first_attr(attrs, ("gen_ai.tool.call.arguments", "tool.parameters", "input.value"))
    args = decode_text(raw_args)
    raw_result = _first_attr(attrs, ("gen_ai.tool.call.result", "output.value"))
    error = _error_message(span)
    if error is not None:
        ok: bool | None = False
    else:
        ok = None if raw_result is None else True
    return RawCall(
        name=str(name),
        args=args if isinstance(args, dict) else None,
        ok=ok,
        result=decode_text(raw_result),
        error=error,
        started=span.started,
        ended=span.ended,
    )


def _name_from_span(span_name: str) -> str:
    # ``execute_tool issue_refund`` / ``MCP send tools/call issue_refund`` / ``tools/call x``
    return span_name.rsplit(" ", 1)[-1] if span_name else "<unnamed>"


def _error_message(span: _Span) -> str | None:
    exception = next((e for e in span.events if e.get("name") == "exception"), None)
    if not span.status_error and exception is None and "error.type" not in span.attributes:
        return None
    if span.status_message:
        return span.status_message
    if exception is not None and exception.get("exception.message"):
        return str(exception["exception.message"])
    return str(span.attributes.get("error.type") or "error")


def _first(spans: list[_Span], keys: tuple[str, ...], role: str) -> Any:
    for span in spans:
        raw = _first_attr(span.attributes, keys)
        if raw is not None:
            return _message_content(decode_text(raw), role)
    return None


def _message_content(value: Any, role: str) -> Any:
    """The last ``role`` message's text (decoded), when ``value`` is a GenAI message list."""
    if not isinstance(value, list) or not all(isinstance(m, dict) and "role" in m for m in value):
        return value
    for message in reversed(value):
        if message.get("role") != role:
            continue
        texts = [
            str(part.get("content", ""))
            for part in _list(message.get("parts"))
            if isinstance(part, dict) and part.get("type") == "text"
        ]
        if texts:
            return decode_text("".join(texts))
    return None


def _first_attr(attrs: dict[str, Any], keys: tuple[str, ...]) -> Any:
    return next((attrs[k] for k in keys if attrs.get(k) is not None), None)


def _attributes(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):  # flat attributes, as console exporters print them
        return dict(raw)
    return {
        str(item.get("key")): _any_value(item.get("value"))
        for item in _list(raw)
        if isinstance(item, dict)
    }


def _any_value(raw: Any) -> Any:
    value = _dict(raw)
    if "stringValue" in value:
        return value["stringValue"]
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "intValue" in value:
        try:
            return int(value["intValue"])  # int64 arrives as a decimal string
        except (TypeError, ValueError):
            return value["intValue"]
    if "doubleValue" in value:
        return value["doubleValue"]
    if "arrayValue" in value:
        return [_any_value(v) for v in _list(_dict(value["arrayValue"]).get("values"))]
    if "kvlistValue" in value:
        return _attributes(_dict(value["kvlistValue"]).get("values"))
    if "bytesValue" in value:
        return value["bytesValue"]
    return None


def _normal_id(raw: Any) -> str:
    """Span ids as lowercase hex, whether the file holds hex (OTLP spec) or base64 (protobuf)."""
    if not isinstance(raw, str) or not raw:
        return ""
    if _HEX_ID.match(raw):
        return raw.lower()
    try:
        return base64.b64decode(raw, validate=True).hex()
    except (binascii.Error, ValueError):
        return raw


def _nanos(raw: Any) -> datetime | None:
    try:
        nanos = int(raw)
    except (TypeError, ValueError, OverflowError):  # OverflowError: a JSON 1e400 reads as inf
        return None
    if nanos <= 0:
        return None
    seconds, rest = divmod(nanos // 1000, 1_000_000)
    moment = moment_from_epoch(seconds)
    return None if moment is None else moment.replace(microsecond=rest)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


IMPORTER = Importer("otlp", detect, to_incident)
