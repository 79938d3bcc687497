"""LangSmith run exports: a JSON list of runs, ``{"runs": [...]}``, or one run per line.

Tool calls are ``run_type == "tool"`` runs in ``dotted_order`` (depth-first execution order).
``inputs`` is the arguments dict itself (LangChain v1) or ``{"input": "<JSON or repr>"}``
(older tracers); ``outputs.output`` is a serialized ``ToolMessage`` (``kwargs.content`` /
``kwargs.status``) or a plain value. A failed tool has ``error`` (``"Type('message')"``
followed by a traceback) or a ToolMessage with ``status: "error"``. The root run's inputs and
outputs are the incident's input and final output.
"""

from __future__ import annotations

import re
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

_EXCEPTION_REPR = re.compile(r"^[\w.]+\((['\"])(?P<message>.*)\1\)$", re.DOTALL)


def detect(records: list[Any]) -> bool:
    runs = document_list(records, "runs")
    return bool(runs) and all(isinstance(r, dict) and "run_type" in r for r in runs)


def to_incident(records: list[Any], source_file: str) -> Incident:
    runs = [r for r in document_list(records, "runs") if isinstance(r, dict)]
    runs.sort(key=lambda r: str(r.get("dotted_order") or ""))
    root = first_root(runs, "id", "parent_run_id")
    calls = [_call(r) for r in runs if r.get("run_type") == "tool"]
    input_value = _unwrap(root.get("inputs"), "input") if root else None
    final_output = _unwrap(root.get("outputs"), "output") if root else None
    return build_incident(
        source_format="langsmith",
        source_file=source_file,
        input_value=input_value,
        final_output=final_output,
        calls=calls,
    )


def _unwrap(value: Any, key: str) -> Any:
    if isinstance(value, dict) and set(value) == {key}:
        return decode_text(value[key])
    return value if value else None


def _call(run: dict[str, Any]) -> RawCall:
    inputs = run.get("inputs")
    if isinstance(inputs, dict) and set(inputs) == {"input"} and isinstance(inputs["input"], str):
        args = decode_text(inputs["input"])
    else:
        args = inputs
    ok: bool | None = None
    result: Any = None
    error: str | None = None
    outputs = run.get("outputs")
    output = outputs.get("output") if isinstance(outputs, dict) else None
    if (
        isinstance(output, dict)
        and output.get("lc") == 1
        and isinstance(output.get("kwargs"), dict)
    ):
        message = output["kwargs"]
        if message.get("status") == "error":
            ok, error = False, str(message.get("content"))
        else:
            ok, result = True, decode_text(message.get("content"))
    elif isinstance(outputs, dict) and "output" in outputs:
        ok, result = True, decode_text(output)
    if run.get("error"):
        ok, error = False, _error_message(str(run["error"]))
    return RawCall(
        name=str(run.get("name") or "<unnamed>"),
        args=args if isinstance(args, dict) and args else None,
        ok=ok,
        result=result,
        error=error,
        started=parse_iso(run.get("start_time")),
        ended=parse_iso(run.get("end_time")),
    )


def _error_message(text: str) -> str:
    """``"TimeoutError('gateway timeout')Traceback ..."`` -> ``"gateway timeout"``."""
    head = text.split("Traceback (most recent call last)", 1)[0].strip()
    match = _EXCEPTION_REPR.match(head)
    return match.group("message") if match else head or text.strip()


IMPORTER = Importer("langsmith", detect, to_incident)
