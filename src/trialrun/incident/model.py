"""The normalized incident every trace format imports to, and its ``incident.json`` file.

Decisions:

* ``args is None`` means the source did not capture the arguments and ``ok is None`` means it
  did not capture the outcome; both make the incident inconclusive, as does anything listed in
  ``missing`` (``"input"``, ``"calls[2].result (issue_refund)"``, ...). Absent evidence must
  never read as a pass.
* ``write_incident`` redacts once more on the way out: the importers redact already, and
  redaction is idempotent, so a hand-built incident cannot leak a secret either.
* ``source_file`` is the export's file name only: an incident is made to be shared, and the
  directory it was imported from (a home directory, a server's path) is not the user's to share.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trialrun.base.fsutil import read_problem, write_json
from trialrun.base.quoting import excerpt
from trialrun.base.redact import redact
from trialrun.base.suggest import did_you_mean
from trialrun.errors import ConfigError

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = [
    "SCHEMA_VERSION",
    "FieldError",
    "Incident",
    "IncidentCall",
    "is_inconclusive",
    "load_incident",
    "source_name",
    "write_incident",
]

SCHEMA_VERSION = 1

Where = tuple[str | int, ...]
"""The place of a value in the document: keys and list positions from the top."""

_INCIDENT_KEYS = (
    "schema_version",
    "source_format",
    "source_file",
    "input",
    "final_output",
    "calls",
    "missing",
    "violations",
)
_CALL_KEYS = ("index", "name", "args", "ok", "result", "error", "started_at", "duration_ms")


@dataclass
class IncidentCall:
    index: int
    name: str
    args: dict[str, Any] | None
    ok: bool | None
    result: Any = None
    error: str | None = None
    started_at: str | None = None
    duration_ms: float | None = None

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Any, where: Where) -> IncidentCall:
        raw = _object(data, where, _CALL_KEYS)
        index = _required(raw, "index", where)
        name = _required(raw, "name", where)
        args = raw.get("args")
        ok = raw.get("ok")
        error = raw.get("error")
        started_at = raw.get("started_at")
        duration_ms = raw.get("duration_ms")
        if not isinstance(index, int) or isinstance(index, bool):
            raise _invalid((*where, "index"), "an integer", index)
        if not isinstance(name, str) or not name:
            raise _invalid((*where, "name"), "a non-empty string", name)
        if args is not None and not isinstance(args, dict):
            raise _invalid((*where, "args"), "an object or null", args)
        if ok is not None and not isinstance(ok, bool):
            raise _invalid((*where, "ok"), "true, false or null", ok)
        if error is not None and not isinstance(error, str):
            raise _invalid((*where, "error"), "a string or null", error)
        if started_at is not None and not isinstance(started_at, str):
            raise _invalid((*where, "started_at"), "a string or null", started_at)
        if duration_ms is not None and (
            not isinstance(duration_ms, int | float) or isinstance(duration_ms, bool)
        ):
            raise _invalid((*where, "duration_ms"), "a number or null", duration_ms)
        return cls(
            index=index,
            name=name,
            args=args,
            ok=ok,
            result=raw.get("result"),
            error=error,
            started_at=started_at,
            duration_ms=float(duration_ms) if duration_ms is not None else None,
        )


@dataclass
class Incident:
    source_format: str
    source_file: str
    input: Any
    final_output: Any
    calls: list[IncidentCall]
    missing: list[str]
    violations: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "source_format": self.source_format,
            "source_file": self.source_file,
            "input": self.input,
            "final_output": self.final_output,
            "calls": [call.to_json() for call in self.calls],
            "missing": list(self.missing),
            "violations": [dict(v) for v in self.violations],
        }

    @classmethod
    def from_json(cls, data: Any) -> Incident:
        """Parse an ``incident.json`` document; ``FieldError`` (with ``key`` and ``where``)
        when invalid."""
        raw = _object(data, (), _INCIDENT_KEYS)
        version = _required(raw, "schema_version", ())
        if version != SCHEMA_VERSION:
            raise _invalid(("schema_version",), str(SCHEMA_VERSION), version)
        for key in ("source_format", "source_file"):
            if not isinstance(_required(raw, key, ()), str):
                raise _invalid((key,), "a string", raw.get(key))
        calls = _required(raw, "calls", ())
        if not isinstance(calls, list):
            raise _invalid(("calls",), "a list", calls)
        missing = raw.get("missing", [])
        if not isinstance(missing, list) or not all(isinstance(m, str) for m in missing):
            raise _invalid(("missing",), "a list of strings", missing)
        violations = raw.get("violations", [])
        if not isinstance(violations, list) or not all(isinstance(v, dict) for v in violations):
            raise _invalid(("violations",), "a list of objects", violations)
        return cls(
            source_format=raw["source_format"],
            source_file=raw["source_file"],
            input=raw.get("input"),
            final_output=raw.get("final_output"),
            calls=[IncidentCall.from_json(c, ("calls", i)) for i, c in enumerate(calls)],
            missing=list(missing),
            violations=[dict(v) for v in violations],
        )


def is_inconclusive(incident: Incident) -> bool:
    """True when the evidence is incomplete: uncaptured arguments or results, or ``missing``."""
    if incident.missing:
        return True
    return any(call.args is None or call.ok is None for call in incident.calls)


def capture_gaps(incident: Incident) -> list[str]:
    """Every reason the incident cannot be trusted as complete evidence."""
    gaps = list(incident.missing)
    for call in incident.calls:
        if call.args is None:
            gaps.append(f"call {call.index} ({call.name}): arguments not captured")
        if call.ok is None:
            gaps.append(f"call {call.index} ({call.name}): result not captured")
    return gaps


def load_incident(path: str | Path) -> Incident:
    """Read ``incident.json``; ``ConfigError`` naming the file, and the line when one applies."""
    from trialrun.config.yamlload import parse_json

    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read incident file: {read_problem(exc)}", file=path) from None
    if not text.strip():  # about the file as a whole: the parser would blame line 1
        raise ConfigError("the incident file is empty; expected a JSON object", file=path)
    # The file is often written by hand: every problem is shown at its line.
    document = parse_json(text, file=str(path))
    try:
        return Incident.from_json(document.data)
    except FieldError as exc:
        raise document.error(exc.message, exc.where, exc.key) from None


def write_incident(path: str | Path, incident: Incident) -> None:
    """Write ``incident.json`` atomically (sorted keys, indent 2), redacted, naming its source
    by file name only."""
    document = incident.to_json()
    document["source_file"] = source_name(incident.source_file)
    write_json(path, redact(document))


def source_name(source_file: str) -> str:
    """The file name in ``source_file``, a path written on any platform."""
    return re.split(r"[\\/]", source_file)[-1]


class FieldError(ConfigError):
    """A value of the document is invalid; ``where`` is its place, for the line."""

    def __init__(self, message: str, where: Where) -> None:
        super().__init__(message, key=_dotted(where))
        self.where = where


def _object(data: Any, where: Where, allowed: Iterable[str]) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise _invalid(where, "an object", data)
    # A misspelled key would otherwise read as a missing one ("calls: found null").
    known = tuple(allowed)
    for key in data:
        if key not in known:
            inside = _dotted(where) or "the incident"
            raise FieldError(
                f"unknown key '{excerpt(str(key))}' in {inside}{did_you_mean(str(key), known)}",
                (*where, key),
            )
    return data


def _required(raw: dict[str, Any], key: str, where: Where) -> Any:
    if key not in raw:
        inside = _dotted(where) or "the incident"
        raise FieldError(f"missing required key '{key}' in {inside}", where)
    return raw[key]


def _invalid(where: Where, expected: str, found: Any) -> FieldError:
    # An incident is a production trace: what it holds may be a secret, and of any length.
    shown = excerpt(json.dumps(found, default=repr), 80)
    return FieldError(f"{_dotted(where) or 'incident'}: expected {expected}, found {shown}", where)


def _dotted(where: Where) -> str:
    """``("calls", 2, "name")`` as ``calls[2].name``."""
    text = ""
    for element in where:
        text += f"[{element}]" if isinstance(element, int) else f".{element}"
    return text.lstrip(".")
