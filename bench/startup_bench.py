"""Start-up benchmark: this checkout's tree against a base revision, side by side in one run.

Exports ``src/`` of --base (default a9854f9, main before issue 17's start-up work; 13324a0 is main
before issue 16's layer move) with ``git archive`` under bench/.work/startup/, and runs this
interpreter in fresh subprocesses with ``PYTHONPATH=<tree>/src``, so each tree's code is imported
(the editable install is a plain .pth path entry, which PYTHONPATH precedes; each tree's
``trialrun.__file__`` is checked and printed). The two trees alternate, the order flipping every
round; one discarded round first compiles the bytecode (into bench/.work/startup/pycache, written
even where PYTHONDONTWRITEBYTECODE is set, as users' installs have theirs). Measured, median of
--repeat rounds:
  * ``python -c pass``: the interpreter's own start-up, the floor under every command (the same
    for both trees: its ratio shows how far noise alone moves a ratio);
  * ``trialrun --help`` and ``trialrun --version``: process wall time, through a copy of the
    console script pip writes (``from trialrun.cli import main``), which is what users run;
    and each less the floor of the same round (what trialrun itself costs);
  * ``import trialrun.cli.run_cmd``: the import alone, timed inside the child (modules counted);
  * ``python -m trialrun run <suite> --mode replay --no-baseline --out <tmp>`` on a one-case suite
    with a trivial agent: until the first agent starts (its command is a shell line that stamps the
    clock, then execs the agent), how many modules are loaded at that moment, and the whole
    process. Modules moved between the trees, so the
    run's start-up is taken through the command, which loads whatever each tree needs.
The machines are noisy: only the ratios measured side by side in one run mean anything, and
``--base HEAD`` (the same code on both sides) shows how far from 1.00 noise alone moves them.

    python bench/startup_bench.py [--base REV] [--repeat 20]
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
WORK = BENCH / ".work" / "startup"
DEFAULT_BASE = "a9854f9"

WHERE = "import trialrun; print(trialrun.__file__)"
IMPORT_RUN_CMD = """\
import sys, time
before = len(sys.modules)
t0 = time.perf_counter()
import trialrun.cli.run_cmd
print(time.perf_counter() - t0, len(sys.modules) - before)
"""
# What pip writes as the ``trialrun`` console script (see .venv/bin/trialrun).
CONSOLE_SCRIPT = """\
import sys
from trialrun.cli import main
if __name__ == '__main__':
    sys.argv[0] = sys.argv[0].removesuffix('.exe')
    sys.exit(main())
"""
# ``python -m trialrun`` that also writes how many modules are loaded when the first agent is
# spawned (its command runs start.sh): a count the machine's load does not blur.
RUN_PROBE = """\
import runpy, subprocess, sys
def note_first_agent():
    if not hasattr(note_first_agent, "done"):
        note_first_agent.done = True
        with open({count!r}, "w") as out:
            out.write(str(len(sys.modules)))
spawn = subprocess.Popen.__init__
def counting(self, args, *rest, **options):
    if "start.sh" in str(args):
        note_first_agent()
    spawn(self, args, *rest, **options)
subprocess.Popen.__init__ = counting
try:  # a sealed agent is started by the run's spawner process, not by Popen here
    from trialrun.conversation.spawner import SealSpawner
except ImportError:
    pass
else:
    sealed_spawn = SealSpawner.spawn
    def counting_sealed(self, *args, **options):
        note_first_agent()
        return sealed_spawn(self, *args, **options)
    SealSpawner.spawn = counting_sealed
sys.argv[0] = "trialrun"
runpy.run_module("trialrun", run_name="__main__", alter_sys=True)
"""
# The agent's command: stamp the wall clock in nanoseconds, then become the agent. A shell and
# `date` start in a millisecond or two, far less than a second Python would.
STAMP_SCRIPT = 'date +%s%N > "{stamp}"\nexec "{python}" "{agent}"\n'


def export_tree(rev: str, target: Path) -> Path:
    """``src/`` of ``rev`` under ``target``, read from git without touching any worktree."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", rev, "src"],
        capture_output=True,
        check=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(target, filter="data")
    return target / "src"


def write_suite(root: Path) -> tuple[Path, Path]:
    """A one-case replay suite whose agent stamps its start; the suite and the stamp file."""
    sys.path.insert(0, str(BENCH))
    from replay_bench import write_suite as write_replay_suite

    suite = write_replay_suite(root, "one", cases=1, calls=1)
    stamp = root / "agent-started"
    (suite / "start.sh").write_text(
        STAMP_SCRIPT.format(stamp=stamp, python=sys.executable, agent=suite / "agent.py")
    )
    config = suite / "suite.yaml"
    lines = config.read_text().splitlines(keepends=True)
    lines = [
        'agent_command: ["/bin/sh", "start.sh"]\n' if line.startswith("agent_command:") else line
        for line in lines
    ]
    config.write_text("".join(lines))
    return suite, stamp


def child(src: Path, argv: list[str]) -> tuple[float, str]:
    """Run ``python argv`` on ``src``'s code: wall seconds and stdout."""
    env = {**os.environ, "PYTHONPATH": str(src), "PYTHONPYCACHEPREFIX": str(WORK / "pycache")}
    # Users' installs have their bytecode; an environment that forbids writing it would have
    # every round compile both trees from source and time the compiler instead.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, *argv], capture_output=True, text=True, env=env, cwd=WORK
    )
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(
            f"{argv} on {src} failed ({proc.returncode}):\n"
            f"{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
        )
    return elapsed, proc.stdout


def check_tree(src: Path) -> str:
    where = child(src, ["-c", WHERE])[1].strip()
    if not Path(where).is_relative_to(src):
        raise SystemExit(f"expected trialrun from {src}, found {where}: PYTHONPATH lost")
    return where


Measure = Callable[[Path], dict[str, float]]


def measures(suite: Path, stamp: Path, script: Path) -> dict[str, Measure]:
    def floor(src: Path) -> dict[str, float]:
        return {"floor": child(src, ["-c", "pass"])[0]}

    def help_(src: Path) -> dict[str, float]:
        return {"help": child(src, [str(script), "--help"])[0]}

    def version(src: Path) -> dict[str, float]:
        return {"version": child(src, [str(script), "--version"])[0]}

    def import_(src: Path) -> dict[str, float]:
        seconds, modules = child(src, ["-c", IMPORT_RUN_CMD])[1].split()
        return {"import": float(seconds), "modules": float(modules)}

    def run(src: Path) -> dict[str, float]:
        stamp.unlink(missing_ok=True)
        out = WORK / "out"
        count = WORK / "modules-at-first-agent"
        probe = ["-c", RUN_PROBE.format(count=str(count))]
        argv = [*probe, "run", str(suite), "--mode", "replay", "--no-baseline"]
        launched = time.time_ns()
        wall, _ = child(src, [*argv, "--out", str(out)])
        started = int(stamp.read_text().strip())
        return {
            "first agent": (started - launched) / 1e9,
            "modules at first agent": float(count.read_text()),
            "run": wall,
        }

    return {"floor": floor, "help": help_, "version": version, "import": import_, "run": run}


ROWS = {
    "floor": "python -c pass (the floor)",
    "help": "trialrun --help (process)",
    "help above floor": "  above the floor",
    "version": "trialrun --version (process)",
    "version above floor": "  above the floor",
    "import": "import trialrun.cli.run_cmd",
    "modules": "  modules it loads (count)",
    "first agent": "trialrun run: until 1st agent",
    "modules at first agent": "  modules loaded by then (count)",
    "run": "trialrun run: whole (1 case)",
}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--base", default=DEFAULT_BASE, help="the tree before (a git revision)")
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()

    if WORK.exists():
        shutil.rmtree(WORK)
    WORK.mkdir(parents=True)
    try:
        head = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        trees = {
            f"before {args.base}": export_tree(args.base, WORK / "base"),
            f"after {head}": ROOT / "src",
        }
        for label, src in trees.items():
            print(f"{label}: {check_tree(src)}")
        suite, stamp = write_suite(WORK)
        script = WORK / "trialrun"
        script.write_text(CONSOLE_SCRIPT)
        steps = measures(suite, stamp, script)
        samples: dict[str, dict[str, list[float]]] = {label: {} for label in trees}
        for round_ in range(args.repeat + 1):
            order = list(trees.items())[:: 1 if round_ % 2 else -1]
            for measure in steps.values():
                for label, src in order:
                    result = measure(src)
                    if round_ == 0:
                        continue  # compiles each tree's bytecode; not counted
                    for key, value in result.items():
                        samples[label].setdefault(key, []).append(value)
        for per_tree in samples.values():
            for key in ("help", "version"):
                per_tree[f"{key} above floor"] = [
                    total - floor
                    for total, floor in zip(per_tree[key], per_tree["floor"], strict=True)
                ]
        report(samples, args.repeat, sys.executable)
    finally:
        shutil.rmtree(WORK, ignore_errors=True)


def _cell(key: str, value: float) -> str:
    return f"{value:.0f}" if key.startswith("modules") else f"{value * 1000:.1f}ms"


def report(samples: dict[str, dict[str, list[float]]], repeat: int, python: str) -> None:
    before, after = samples
    med = {label: {k: statistics.median(v) for k, v in s.items()} for label, s in samples.items()}
    print(
        f"median of {repeat} rounds, both trees back to back in fresh processes per round "
        f"({Path(python).name} {sys.version.split()[0]}); ratio = after / before of each round: "
        "median, quartiles; below 1 = after faster"
    )
    print(f"  {'':31}{before:>16}{after:>16}{'ratio':>8}  quartiles")
    for key, title in ROWS.items():
        pairs = [
            new / old for old, new in zip(samples[before][key], samples[after][key], strict=True)
        ]
        low, mid, high = statistics.quantiles(pairs, n=4)
        print(
            f"  {title:31}{_cell(key, med[before][key]):>16}{_cell(key, med[after][key]):>16}"
            f"{mid:8.2f}  {low:.2f}-{high:.2f}"
        )


if __name__ == "__main__":
    main()
