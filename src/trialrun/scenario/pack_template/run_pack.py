"""Run this pack with the standard library alone: ``python3 run_pack.py [--agent N] [--out DIR]``.

Writes DIR/summary.json (default: ./scenario_out) and exits 1 when a business rule is violated.
``trialrun scenario verify`` does the same and adds report.html.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent


def load_world() -> ModuleType:
    # Loaded by path: isolated mode (-I) leaves the script's folder off sys.path.
    spec = importlib.util.spec_from_file_location("scenario_world", HERE / "scenario_world.py")
    if spec is None or spec.loader is None:
        raise SystemExit(f"error: cannot load {HERE / 'scenario_world.py'}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["scenario_world"] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agent", default="naive", help="agent named in pack.yaml")
    parser.add_argument("--out", default="scenario_out", help="directory for summary.json")
    options = parser.parse_args()
    world = load_world()
    try:
        summary = world.run_pack(HERE, options.agent, sys.executable)
    except world.PackError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out = Path(options.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    for entry in summary["scenarios"]:
        print(f"{entry['status'].upper():7} {entry['id']}")
        for violation in entry["violations"]:
            effect = violation["effect"]
            print(f"        {violation['rule']}: {violation['message']} (effect {effect['id']})")
        if entry["error"]:
            print(f"        {entry['error']}")
    print(f"{summary['passed']}/{len(summary['scenarios'])} passed; wrote {out / 'summary.json'}")
    return 0 if summary["failed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
