"""Writing the shipped pack into a folder, loading a pack and running it with one agent."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import yaml

from trialrun.errors import ConfigError
from trialrun.scenario import world

TEMPLATE_DIR = Path(__file__).resolve().parent / "pack_template"
# The template is a package only so trialrun can import its world module; the pack needs neither.
_NOT_COPIED = {"__init__.py", "__pycache__"}


def init_pack(dest: Path, *, force: bool = False) -> list[Path]:
    """Copy the support-agent pack into ``dest``; existing files are kept unless ``force``.

    Returns the files written.
    """
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
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        return world.validate_pack(data, path)
    except yaml.YAMLError as exc:
        raise ConfigError(f"invalid YAML: {exc}", file=path) from exc
    except world.PackError as exc:
        raise ConfigError(str(exc)) from exc


def verify_pack(pack_dir: Path, agent: str) -> dict[str, Any]:
    """Run every scenario of the pack with ``agent``; returns the summary (see ``report``)."""
    pack = load_pack(pack_dir)
    try:
        return world.run_loaded_pack(pack, pack_dir, agent, sys.executable)
    except world.PackError as exc:
        raise ConfigError(str(exc)) from exc
