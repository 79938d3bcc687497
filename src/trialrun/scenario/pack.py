"""Writing the shipped pack into a folder, loading a pack and running it with one agent."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

from trialrun.base.fsutil import make_output_dir
from trialrun.base.quoting import excerpt
from trialrun.base.suggest import did_you_mean
from trialrun.config.yamlload import LoadedYaml, PathElement, load_yaml_file
from trialrun.errors import ConfigError
from trialrun.scenario import world

TEMPLATE_DIR = Path(__file__).resolve().parent / "pack_template"
# The template is a package only so trialrun can import its world module; the pack needs neither.
_NOT_COPIED = {"__init__.py", "__pycache__"}


def init_pack(dest: Path, *, force: bool = False) -> list[Path]:
    """Copy the support-agent pack into ``dest``; existing files are kept unless ``force``.

    Returns the files written.
    """
    make_output_dir(dest)
    written: list[Path] = []
    for source in sorted(TEMPLATE_DIR.rglob("*")):
        relative = source.relative_to(TEMPLATE_DIR)
        if source.is_dir() or _NOT_COPIED & set(relative.parts) or source.suffix == ".pyc":
            continue
        target = dest / relative
        if target.exists() and not force:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        written.append(target)
    return written


def load_pack(pack_dir: Path) -> dict[str, Any]:
    """Read and validate ``pack_dir/pack.yaml`` (YAML or JSON); raises ``ConfigError``."""
    path = pack_dir / "pack.yaml"
    if not path.is_file():
        raise ConfigError(
            "expected a pack.yaml here (create one with `trialrun scenario init`)", file=path
        )
    # The line-aware loader reports unreadable, binary, empty and non-mapping files by line.
    doc = load_yaml_file(path)
    _refuse_unknown_keys(doc)
    _check_pack_values(doc)
    try:
        pack = world.validate_pack(doc.data, path)
    except world.PackError as exc:
        raise ConfigError(str(exc)) from exc
    for scenario in pack["scenarios"]:
        check_scenario(load_yaml_file(pack_dir / scenario))
    return pack


_PACK_KEYS = ("name", "description", "agents", "scenarios")
_AGENT_KEYS = ("command",)


def _refuse_unknown_keys(doc: LoadedYaml) -> None:
    """A misspelled key would otherwise be ignored (the template's validator only reads)."""
    places: list[tuple[list[PathElement], dict[str, Any], tuple[str, ...]]] = [
        ([], doc.data, _PACK_KEYS)
    ]
    agents = doc.data.get("agents")
    if isinstance(agents, dict):
        places += [
            (["agents", name], agent, _AGENT_KEYS)
            for name, agent in agents.items()
            if isinstance(agent, dict)
        ]
    for where, mapping, allowed in places:
        _refuse_unknown(doc, where, mapping, allowed)


def _refuse_unknown(
    doc: LoadedYaml,
    where: list[PathElement],
    mapping: dict[str, Any],
    allowed: tuple[str, ...],
    inside: str = "",
) -> None:
    for key in mapping:
        if key not in allowed:
            hint = did_you_mean(str(key), allowed)
            place = f" in {inside}" if inside else ""
            raise doc.error(
                f"unknown key '{excerpt(str(key))}'{place}{hint}", [*where, key], str(key)
            )


def _check_pack_values(doc: LoadedYaml) -> None:
    """The world's ``validate_pack`` checks the same without lines; here each is at its line."""
    for key in ("agents", "scenarios"):
        if key not in doc.data:
            raise doc.error(f"missing required key '{key}' in pack.yaml", [], key)
    agents = doc.data.get("agents")
    if not isinstance(agents, dict) or not agents:
        expected = "agents: expected a mapping of agent names to {command: [...]}"
        raise doc.error(f"{expected}, found {_kind(agents)}", ["agents"], "agents")
    for name, agent in agents.items():
        if not isinstance(name, str) or not name or not all(c.isalnum() or c in "-_" for c in name):
            raise doc.error(
                f"agent name {_shown(name)}: expected letters, digits, '-' or '_'", ["agents", name]
            )
        command = agent.get("command") if isinstance(agent, dict) else None
        if not isinstance(command, list) or not all(isinstance(c, str) for c in command):
            raise doc.error(
                f"agents.{excerpt(name)}.command: expected a list of strings, "
                f"found {_kind(command)}",
                ["agents", name, "command"],
                "command",
            )
    scenarios = doc.data.get("scenarios")
    if not isinstance(scenarios, list):
        expected = "scenarios: expected a list of scenario file paths"
        raise doc.error(f"{expected}, found {_kind(scenarios)}", ["scenarios"], "scenarios")
    for index, scenario in enumerate(scenarios):
        if not isinstance(scenario, str) or not scenario:
            raise doc.error(
                f"scenarios[{index}]: expected a scenario file path, found {_kind(scenario)}",
                ["scenarios", index],
                "scenarios",
            )


_SCENARIO_KEYS = ("id", "description", "orders", "task", "faults")
_REQUIRED_SCENARIO_KEYS = ("id", "orders", "task")
_FAULT_KEYS = ("tool", "call", "kind", "delay_ms")


def check_scenario(doc: LoadedYaml) -> None:
    """Refuse a scenario file the world would misread, at the line at fault.

    The world's own ``load_scenario`` runs with the standard library alone (a pack runs without
    trialrun) and keeps no lines; it would ignore a misspelled key ("fualts": no faults, a
    scenario that tests nothing) or crash on a value of the wrong type.
    """
    data = doc.data
    _refuse_unknown(doc, [], data, _SCENARIO_KEYS)
    for key in _REQUIRED_SCENARIO_KEYS:
        if key not in data:
            raise doc.error(f"missing required key '{key}' in the scenario", [], key)
    if not isinstance(data["id"], str) or not data["id"]:
        raise doc.error(
            f"id: expected a non-empty string, found {_shown(data['id'])}", ["id"], "id"
        )
    _check_orders(doc, data["orders"])
    faults = data.get("faults", [])
    if not isinstance(faults, list):
        raise doc.error(f"faults: expected a list, found {_kind(faults)}", ["faults"], "faults")
    for index, fault in enumerate(faults):
        _check_fault(doc, fault, ["faults", index])


def _check_orders(doc: LoadedYaml, orders: Any) -> None:
    if not isinstance(orders, dict):
        raise doc.error(
            f"orders: expected a mapping of order ids to orders, found {_kind(orders)}",
            ["orders"],
            "orders",
        )
    for order_id, order in orders.items():
        total = order.get("total") if isinstance(order, dict) else None
        if not isinstance(total, int | float) or isinstance(total, bool):
            raise doc.error(
                f"orders.{excerpt(str(order_id))}: expected a mapping with a numeric 'total'",
                ["orders", order_id],
                "orders",
            )


def _check_fault(doc: LoadedYaml, fault: Any, at: list[PathElement]) -> None:
    where = f"faults[{at[-1]}]"
    if not isinstance(fault, dict):
        raise doc.error(f"{where}: expected a mapping, found {_kind(fault)}", at)
    _refuse_unknown(doc, at, fault, _FAULT_KEYS, where)
    for key, choices in (("tool", world.TOOLS), ("kind", world.FAULT_KINDS)):
        value = fault.get(key)
        if value not in choices:
            raise doc.error(
                f"{where}.{key}: expected one of {', '.join(choices)}, found {_shown(value)}"
                f"{did_you_mean(value, choices) if isinstance(value, str) else ''}",
                [*at, key],
                key,
            )
    for key, least in (("call", 1), ("delay_ms", 0)):
        value = fault.get(key, least)
        if not isinstance(value, int) or isinstance(value, bool) or value < least:
            raise doc.error(
                f"{where}.{key}: expected an integer >= {least}, found {_shown(value)}",
                [*at, key],
                key,
            )


def _kind(value: Any) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, dict):
        return "a mapping" if value else "an empty mapping"
    if isinstance(value, list):
        return "a list"
    return _shown(value)


def _shown(value: Any) -> str:
    """A value from the file, as a message quotes it: short, secrets redacted."""
    return excerpt(repr(value))


def verify_pack(pack_dir: Path, agent: str) -> dict[str, Any]:
    """Run every scenario of the pack with ``agent``; returns the summary (see ``report``)."""
    pack = load_pack(pack_dir)
    try:
        return world.run_loaded_pack(pack, pack_dir, agent, sys.executable)
    except world.PackError as exc:
        raise ConfigError(str(exc)) from exc
