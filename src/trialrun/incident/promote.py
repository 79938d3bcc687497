"""Turn an incident into a replayable regression case: a case file plus its cassette.

``trialrun incident promote incident.json --to cases/NAME.json`` names the case file. The suite
loader reads only ``.yaml``/``.yml`` case files, so a ``.json`` target is written under the same
stem with ``.yaml`` (JSON is valid YAML; the content stays JSON). The cassette goes next to the
``cases`` directory, in ``cassettes/NAME.jsonl``, and the case refers to it suite-relatively.

An inconclusive incident is refused: a cassette without the recorded arguments or results
would replay something production never saw, and the case would pass or fail for no reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trialrun.config.paths import display_path
from trialrun.errors import ConfigError
from trialrun.fsutil import atomic_write_text, dumps_json
from trialrun.incident.model import Incident, IncidentCall

CASE_SUFFIXES = (".yaml", ".yml")


def promote(incident: Incident, to: Path) -> tuple[Path, Path]:
    """Write the case file and its cassette for ``incident``; return (case path, cassette path).

    ``to`` is the case file wanted (``cases/NAME.json``, ``cases/NAME.yaml`` ...). Raises
    ``ConfigError`` when the incident is inconclusive or its input is not a JSON object.
    """
    refuse_if_unreplayable(incident)
    case_path = case_file_for(Path(to))
    name = case_path.stem
    suite_dir = case_path.parent.parent if case_path.parent.name == "cases" else case_path.parent
    cassette_path = suite_dir / "cassettes" / f"{name}.jsonl"
    case = {
        "id": name,
        "description": (
            f"promoted from incident {incident.source_file} ({incident.source_format})"
        ),
        "input": incident.input,
        "cassette": f"cassettes/{name}.jsonl",
    }
    cassette_path.parent.mkdir(parents=True, exist_ok=True)
    case_path.parent.mkdir(parents=True, exist_ok=True)
    # Cassette first: a case file that exists always has its cassette.
    atomic_write_text(cassette_path, cassette_text(incident.calls))
    atomic_write_text(case_path, dumps_json(case, sort_keys=False) + "\n")
    return case_path, cassette_path


def case_file_for(to: Path) -> Path:
    """The case file the suite loader will read for the requested target ``to``."""
    if to.suffix in CASE_SUFFIXES:
        return to
    if to.suffix == ".json":
        return to.with_suffix(".yaml")
    return to.with_name(to.name + ".yaml")


def cassette_text(calls: list[IncidentCall]) -> str:
    """One JSON object per call, in call order: tool, args, ok, result, error."""
    lines = [dumps_json(cassette_entry(call), indent=None, sort_keys=False) for call in calls]
    return "".join(line + "\n" for line in lines)


def cassette_entry(call: IncidentCall) -> dict[str, Any]:
    entry: dict[str, Any] = {"tool": call.name, "args": call.args, "ok": call.ok}
    if call.ok:
        entry["result"] = call.result
    else:
        entry["error"] = call.error if call.error is not None else "tool call failed"
        if call.result is not None:
            entry["result"] = call.result
    return entry


def refuse_if_unreplayable(incident: Incident) -> None:
    """Raise ``ConfigError`` naming every gap that stops ``incident`` from being a case."""
    problems = [f"missing capture: {item}" for item in incident.missing]
    for call in incident.calls:
        where = f"call {call.index} ({call.name})"
        if call.args is None:
            problems.append(f"{where}: arguments were not captured")
        if call.ok is None:
            problems.append(f"{where}: the result was not captured")
    if not isinstance(incident.input, dict):
        found = type(incident.input).__name__ if incident.input is not None else "nothing"
        problems.append(f"the input must be a JSON object to become a case input, found {found}")
    if problems:
        source = display_path(incident.source_file) if incident.source_file else "an unknown file"
        raise ConfigError(
            f"cannot promote the incident imported from {source}: " + "; ".join(problems)
        )
