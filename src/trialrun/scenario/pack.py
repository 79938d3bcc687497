"""Writing the shipped pack into a folder, loading a pack and running it with one agent."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

from trialrun.config.yamlload import LoadedYaml, PathElement, load_yaml_file
from trialrun.errors import ConfigError
from trialrun.fsutil import make_output_dir
from trialrun.scenario import world
from trialrun.suggest import did_you_mean

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
    try:
        return world.validate_pack(doc.data, path)
    except world.PackError as exc:
        raise ConfigError(str(exc)) from exc


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
        for key in mapping:
            if key not in allowed:
                hint = did_you_mean(str(key), allowed)
                raise doc.error(f"unknown key '{key}'{hint}", [*where, key], str(key))


def verify_pack(pack_dir: Path, agent: str) -> dict[str, Any]:
    """Run every scenario of the pack with ``agent``; returns the summary (see ``report``)."""
    pack = load_pack(pack_dir)
    try:
        return world.run_loaded_pack(pack, pack_dir, agent, sys.executable)
    except world.PackError as exc:
        raise ConfigError(str(exc)) from exc
