"""Langfuse trace exports: a trace with ``observations``, or the observations API page.

Tool calls are ``type == "TOOL"`` observations; the ``SPAN``s older SDKs used for tools are not
guessed at, since a span name alone does not say it was a tool call. ``input`` /
``output`` hold any JSON or its text; a failed tool has ``level == "ERROR"`` and
``statusMessage``. The trace's ``input`` / ``output`` (else the root observation's) are the
incident's input and final output.
"""

from __future__ import annotations

from typing import Any

from trialrun.incident.importers._common import (
    RawCall,
    build_incident,
    decode_text,
    document_list,
    first_root,
    parse_iso,
)
from trialrun.incident.importers.api import Importer
from trialrun.incident.model import Incident

__all__ = ["IMPORTER", "detect", "to_incident"]

_OBSERVATION_TYPES = frozenset(
    {"SPAN", "GENERATION", "EVENT", "AGENT", "TOOL", "CHAIN", "RETRIEVER", "EVALUATOR"}
    | {"EMBEDDING", "GUARDRAIL"}
)


def detect(records: list[Any]) -> bool:
    observations = document_list(records, "observations", "data")
    return bool(observations) and all(
        isinstance(o, dict)
        and isinstance(o.get("type"), str)
        and o["type"] in _OBSERVATION_TYPES
        and "traceId" in o
        for o in observations
    )


def to_incident(records: list[Any], source_file: str) -> Incident:
    observations = [
        o for o in document_list(records, "observations", "data") if isinstance(o, dict)
    ]
    trace = records[0] if len(records) == 1 and isinstance(records[0], dict) else {}
    root = first_root(observations, "id", "parentObservationId") or {}
    input_value = decode_text(trace.get("input", root.get("input")))
    final_output = decode_text(trace.get("output", root.get("output")))
    calls = [_call(o) for o in observations if o.get("type") == "TOOL"]
    return build_incident(
        source_format="langfuse",
        source_file=source_file,
        input_value=input_value,
        final_output=final_output,
        calls=calls,
    )


def _call(observation: dict[str, Any]) -> RawCall:
    args = decode_text(observation.get("input"))
    failed = observation.get("level") == "ERROR"
    output = observation.get("output")
    ok: bool | None = False if failed else (None if output is None else True)
    return RawCall(
        name=str(observation.get("name") or "<unnamed>"),
        args=args if isinstance(args, dict) else None,
        ok=ok,
        result=decode_text(output),
        error=str(observation.get("statusMessage") or "error") if failed else None,
        started=parse_iso(observation.get("startTime")),
        ended=parse_iso(observation.get("endTime")),
    )


IMPORTER = Importer("langfuse", detect, to_incident)
