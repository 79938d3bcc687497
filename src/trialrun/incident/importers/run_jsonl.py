"""trialrun's and RunLedger's ``run.jsonl`` event logs (one case per incident).

Both tools write the same events (``task_start``, ``tool_call``, ``tool_result``,
``final_output``, ``case_end``, ...); trialrun's ``case_end`` also carries ``status`` and it
logs ``usage`` events, which is how the two are told apart. A log with several cases yields
its only failing case; anything else is ambiguous and refused.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from trialrun.errors import ConfigError
from trialrun.incident.importers._common import RawCall, build_incident, moment_from_epoch
from trialrun.incident.importers.api import Importer
from trialrun.incident.model import Incident

__all__ = ["IMPORTER", "detect", "to_incident"]

_EVENT_TYPES = frozenset({"task_start", "tool_call", "tool_result", "final_output", "case_end"})


def detect(records: list[Any]) -> bool:
    return (
        bool(records)
        and all(
            isinstance(r, dict) and isinstance(r.get("type"), str) and "case_id" in r
            for r in records
        )
        and any(r["type"] in _EVENT_TYPES for r in records)
    )


def to_incident(records: list[Any], source_file: str) -> Incident:
    events = [r for r in records if isinstance(r, dict)]
    case_events = _one_case(events, source_file)
    trialrun_made = any(
        e["type"] == "usage" or (e["type"] == "case_end" and "status" in e) for e in events
    )
    input_value: Any = None
    final_output: Any = None
    saw_start = False
    calls: list[RawCall] = []
    by_call_id: dict[str, RawCall] = {}
    for event in case_events:
        kind = event["type"]
        if kind == "task_start":
            saw_start = True
            input_value = event.get("input")
        elif kind == "final_output":
            final_output = event.get("output")
        elif kind == "tool_call":
            args = event.get("args")
            call = RawCall(
                name=str(event.get("name") or "<unnamed>"),
                args=args if isinstance(args, dict) else None,
                ok=None,
                started=_moment(event.get("timestamp")),
            )
            calls.append(call)
            by_call_id[str(event.get("call_id"))] = call
        elif kind == "tool_result":
            answered = by_call_id.pop(str(event.get("call_id")), None)
            if answered is None:
                continue
            ok = event.get("ok")
            answered.ok = ok if isinstance(ok, bool) else None
            answered.result = event.get("result")
            error = event.get("error")
            answered.error = str(error) if error is not None else None
            answered.ended = _moment(event.get("timestamp"))
    return build_incident(
        source_format="trialrun-run-jsonl" if trialrun_made else "runledger-run-jsonl",
        source_file=source_file,
        input_value=input_value,
        final_output=final_output,
        calls=calls,
        missing=[] if saw_start else ["input"],
    )


def _one_case(events: list[dict[str, Any]], source_file: str) -> list[dict[str, Any]]:
    case_ids = list(dict.fromkeys(str(e["case_id"]) for e in events))
    if len(case_ids) == 1:
        return events
    failing = [
        str(e["case_id"]) for e in events if e["type"] == "case_end" and e.get("passed") is False
    ]
    if len(failing) != 1:
        raise ConfigError(
            f"expected a run.jsonl with one case or exactly one failing case, found "
            f"{len(case_ids)} cases ({', '.join(case_ids[:5])}) and {len(failing)} failing",
            file=source_file,
        )
    return [e for e in events if str(e["case_id"]) == failing[0]]


def _moment(timestamp: Any) -> datetime | None:
    if not isinstance(timestamp, int | float) or isinstance(timestamp, bool):
        return None
    return moment_from_epoch(timestamp)


IMPORTER = Importer("run-jsonl", detect, to_incident)
