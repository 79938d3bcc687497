"""Turn an incident into a replayable regression case: a case file plus its cassette.

``trialrun incident promote incident.json --to cases/NAME.json`` writes exactly the case file
named: JSON for ``.json``, YAML for ``.yaml`` and ``.yml``, the three kinds the suite loader
reads. Any other name is refused (the suite would never load it). The cassette goes next to the
``cases`` directory, in ``cassettes/NAME.jsonl``, and the case refers to it suite-relatively.

An inconclusive incident is refused: a cassette without the recorded arguments or results
would replay something production never saw, and the case would pass or fail for no reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trialrun.base.fsutil import atomic_write_text, dumps_json
from trialrun.config.paths import display_path
from trialrun.errors import ConfigError
from trialrun.incident.model import Incident, IncidentCall, source_name

CASE_SUFFIXES = (".yaml", ".yml", ".json")


def promote(incident: Incident, to: Path) -> tuple[Path, Path]:
    """Write the case file ``to`` and its cassette for ``incident``; return both paths.

    Raises ``ConfigError`` when ``to`` is not a case file name the suite loader reads, or when
    the incident is inconclusive or its input is not a JSON object.
    """
    case_path = Path(to)
    check_case_file_name(case_path)
    refuse_if_unreplayable(incident)
    name = case_path.stem
    suite_dir = case_path.parent.parent if case_path.parent.name == "cases" else case_path.parent
    cassette_path = suite_dir / "cassettes" / f"{name}.jsonl"
    case = {
        "id": name,
        "description": (
            f"promoted from incident {source_name(incident.source_file)} ({incident.source_format})"
        ),
        "input": incident.input,
        "cassette": f"cassettes/{name}.jsonl",
    }
    cassette_path.parent.mkdir(parents=True, exist_ok=True)
    case_path.parent.mkdir(parents=True, exist_ok=True)
    # Cassette first: a case file that exists always has its cassette.
    atomic_write_text(cassette_path, cassette_text(incident.calls))
    atomic_write_text(case_path, case_text(case, case_path.suffix))
    return case_path, cassette_path


def check_case_file_name(to: Path) -> None:
    """``ConfigError`` unless the suite loader reads a case file named ``to``."""
    if to.suffix not in CASE_SUFFIXES:
        raise ConfigError(
            f"--to {display_path(to)}: expected a case file ending in "
            f"{', '.join(CASE_SUFFIXES)} (the kinds a suite loads), found "
            f"{repr(to.suffix) if to.suffix else 'no extension'}"
        )


def case_text(case: dict[str, Any], suffix: str) -> str:
    """The case as JSON for ``.json``, else as YAML.

    Not JSON in a ``.yaml`` file: YAML 1.1 reads JSON's ``1e-05`` as a string.
    """
    if suffix == ".json":
        return dumps_json(case, sort_keys=False) + "\n"
    import yaml

    text: str = yaml.safe_dump(case, sort_keys=False, allow_unicode=True, width=100)
    return text


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
        source = source_name(incident.source_file) or "an unknown file"
        raise ConfigError(
            f"cannot promote the incident imported from {source}: " + "; ".join(problems)
        )
