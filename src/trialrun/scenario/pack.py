"""Writing the shipped pack into a folder, loading a pack and running it with one agent."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any, TypeVar

from trialrun.base.fsutil import make_output_dir
from trialrun.base.quoting import excerpt
from trialrun.config.messages import spec_errors
from trialrun.config.models import SERVER_NAME_PATTERN
from trialrun.config.spec import (
    AnyValue,
    Int,
    ListOf,
    MapOf,
    Nested,
    OneOf,
    Record,
    SpecError,
    Str,
    keyed,
    parse,
)
from trialrun.config.yamlload import LoadedYaml, load_yaml_file
from trialrun.errors import ConfigError, ConfigErrors
from trialrun.scenario import world

TEMPLATE_DIR = Path(__file__).resolve().parent / "pack_template"
# The template is a package only so trialrun can import its world module; the pack needs neither.
_NOT_COPIED = {"__init__.py", "__pycache__"}
_R = TypeVar("_R", bound=Record)


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
    _parse(_Pack, doc, "pack.yaml")
    if not doc.data["agents"]:
        raise doc.error("'agents' must name at least one agent, found none", ["agents"], "agents")
    try:
        pack = world.validate_pack(doc.data, path)
    except world.PackError as exc:
        raise ConfigError(str(exc)) from exc
    for scenario in pack["scenarios"]:
        check_scenario(load_yaml_file(pack_dir / scenario))
    return pack


class _Agent(Record):
    command: list[str] = keyed(ListOf(Str()))


class _Pack(Record):
    """pack.yaml; the world's ``validate_pack`` checks the same without lines."""

    name: Any = keyed(AnyValue(), default=None)
    description: Any = keyed(AnyValue(), default=None)
    agents: dict[str, _Agent] = keyed(MapOf(Nested(_Agent), key=Str(SERVER_NAME_PATTERN)))
    scenarios: list[str] = keyed(ListOf(Str(min_length=1)))


class _Fault(Record):
    tool: str = keyed(OneOf(*world.TOOLS))
    call: int = keyed(Int(ge=1), default=1)
    kind: str = keyed(OneOf(*world.FAULT_KINDS))
    delay_ms: int = keyed(Int(ge=0), default=0)


class _Scenario(Record):
    id: str = keyed(Str(min_length=1))
    description: Any = keyed(AnyValue(), default=None)
    orders: dict[str, dict[str, Any]] = keyed(MapOf(MapOf(AnyValue())))
    task: Any = keyed(AnyValue())
    faults: list[_Fault] = keyed(ListOf(Nested(_Fault)), default_factory=list)


def check_scenario(doc: LoadedYaml) -> None:
    """Refuse a scenario file the world would misread, at the line at fault.

    The world's own ``load_scenario`` runs with the standard library alone (a pack runs without
    trialrun) and keeps no lines; it would ignore a misspelled key ("fualts": no faults, a
    scenario that tests nothing) or crash on a value of the wrong type.
    """
    scenario = _parse(_Scenario, doc, "the scenario")
    for order_id, order in scenario.orders.items():
        total = order.get("total")
        if not isinstance(total, int | float) or isinstance(total, bool):
            raise doc.error(
                f"orders.{excerpt(str(order_id))}: expected a mapping with a numeric 'total'",
                ["orders", order_id],
                "orders",
            )


def _parse(record: type[_R], doc: LoadedYaml, what: str) -> _R:
    try:
        return parse(record, doc.data)
    except SpecError as exc:
        raise ConfigErrors(spec_errors(exc, doc, record, what, owner=_entry)) from None


def _entry(loc: tuple[str | int, ...]) -> str | None:
    """A message inside a fault or an agent names it: ``faults[0]``, ``agents.naive``."""
    if len(loc) <= 2 or loc[-1] == "[key]":
        return None
    return f"{loc[0]}[{loc[1]}]" if isinstance(loc[1], int) else f"{loc[0]}.{excerpt(str(loc[1]))}"


def verify_pack(pack_dir: Path, agent: str) -> dict[str, Any]:
    """Run every scenario of the pack with ``agent``; returns the summary (see ``report``)."""
    pack = load_pack(pack_dir)
    try:
        return world.run_loaded_pack(pack, pack_dir, agent, sys.executable)
    except world.PackError as exc:
        raise ConfigError(str(exc)) from exc
