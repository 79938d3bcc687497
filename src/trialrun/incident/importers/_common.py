"""What every importer shares: decoding captured text, timestamps, ordering and ``missing``.

Every source is read into ``RawCall`` records in source order; ``build_incident`` orders them
by start time (ties keep source order), numbers them, and lists each capture gap in
``missing`` so that an import never looks complete when it is not.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from trialrun.errors import ConfigError
from trialrun.incident.model import Incident, IncidentCall

__all__ = [
    "RawCall",
    "build_incident",
    "decode_text",
    "document_list",
    "first_root",
    "io_gaps",
    "iso_from_datetime",
    "moment_from_epoch",
    "parse_iso",
    "require",
]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass
class RawCall:
    name: str
    args: dict[str, Any] | None
    ok: bool | None
    result: Any = None
    error: str | None = None
    started: datetime | None = None
    ended: datetime | None = None


def build_incident(
    *,
    source_format: str,
    source_file: str,
    input_value: Any,
    final_output: Any,
    calls: list[RawCall],
    missing: list[str] | None = None,
) -> Incident:
    """Order, number and check ``calls``; ``missing`` holds the gaps found outside calls
    (by default an input or a final output that is None: ``io_gaps``)."""
    # A call without a start time keeps its place after the timed call before it.
    ordered = sorted(
        enumerate(calls),
        key=lambda pair: (pair[1].started or _previous_start(calls, pair[0]), pair[0]),
    )
    gaps = io_gaps(input_value, final_output) if missing is None else list(missing)
    normalized: list[IncidentCall] = []
    for index, (_, raw) in enumerate(ordered):
        if raw.args is None:
            gaps.append(f"calls[{index}].args ({raw.name})")
        if raw.ok is None:
            gaps.append(f"calls[{index}].result ({raw.name})")
        normalized.append(
            IncidentCall(
                index=index,
                name=raw.name,
                args=raw.args,
                ok=raw.ok,
                result=raw.result if raw.ok else None,
                error=raw.error if raw.ok is False else None,
                started_at=iso_from_datetime(raw.started) if raw.started else None,
                duration_ms=_duration_ms(raw.started, raw.ended),
            )
        )
    return Incident(
        source_format=source_format,
        source_file=source_file,
        input=input_value,
        final_output=final_output,
        calls=normalized,
        missing=gaps,
    )


def io_gaps(input_value: Any, final_output: Any) -> list[str]:
    """``missing`` entries for an input or a final output the source did not capture."""
    named = (("input", input_value), ("final_output", final_output))
    return [name for name, value in named if value is None]


def document_list(records: list[Any], *keys: str) -> list[Any]:
    """The items of a source: one JSON document that is a list or holds one under ``keys``
    (the first that does), else ``records`` themselves (one item a line)."""
    if len(records) == 1:
        only = records[0]
        if isinstance(only, list):
            return list(only)
        if isinstance(only, dict):
            for key in keys:
                if isinstance(only.get(key), list):
                    return list(only[key])
    return records


def _previous_start(calls: list[RawCall], position: int) -> datetime:
    for earlier in reversed(calls[:position]):
        if earlier.started is not None:
            return earlier.started
    return _EPOCH


def _duration_ms(started: datetime | None, ended: datetime | None) -> float | None:
    if started is None or ended is None:
        return None
    delta = ended - started
    micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    return micros / 1000


def iso_from_datetime(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_iso(text: Any) -> datetime | None:
    """An ISO 8601 timestamp (``Z``, offset or naive = UTC); None when absent or unreadable."""
    if not isinstance(text, str) or not text:
        return None
    # Nanosecond fractions do not fit datetime; microseconds are plenty for ordering.
    trimmed = re.sub(r"(\.\d{6})\d+", r"\1", text.strip()).replace("Z", "+00:00")
    try:
        moment = datetime.fromisoformat(trimmed)
        # In UTC now: year 1 at +14:00 has no UTC form, and would fail where it is written.
        return moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)
    except (ValueError, OverflowError):
        return None


def moment_from_epoch(seconds: float) -> datetime | None:
    """The moment ``seconds`` after 1970 UTC; None for NaN or beyond the years 1 to 9999."""
    try:
        return datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, ValueError, OSError):  # which one depends on how far, and the platform
        return None


def first_root(nodes: list[dict[str, Any]], id_key: str, parent_key: str) -> dict[str, Any] | None:
    """The first of ``nodes`` whose parent is none of them (a span tree's root).

    An id that is a JSON array or object names nothing: it cannot even be looked up in a set.
    """
    ids = {node.get(id_key) for node in nodes if not isinstance(node.get(id_key), list | dict)}
    for node in nodes:
        parent = node.get(parent_key)
        if isinstance(parent, list | dict) or parent not in ids:
            return node
    return None


def decode_text(value: Any) -> Any:
    """A captured value that may be JSON text or a Python repr of a dict/list, decoded.

    Only objects and arrays are decoded: a tool returning the text ``"42"`` keeps its string.
    """
    if not isinstance(value, str):
        return value
    stripped = value.strip()
    if not stripped or stripped[0] not in "[{":
        return value
    try:
        return json.loads(stripped)
    except (ValueError, RecursionError):
        pass
    try:
        # OpenAI Agents SDK and old LangChain tracers store ``str(dict)``.
        decoded = ast.literal_eval(stripped)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return value
    try:
        # Tuples, sets and bytes are not JSON; a round trip keeps only what JSON can hold.
        return json.loads(json.dumps(decoded))
    except (TypeError, ValueError):
        return value


def require(condition: bool, message: str, source_file: str) -> None:
    if not condition:
        raise ConfigError(message, file=source_file)
