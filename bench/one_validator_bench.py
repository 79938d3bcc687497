"""One validation system (issue 29): pydantic models against ``config.spec`` records, two trees.

Compares the source of a git revision (``--before``, exported with ``git archive`` into
bench/.work/) with the working tree, in fresh child processes that alternate between the two:
  * start-up: importing what loads a file and loading it, for the files of ``trialrun run``
    (a suite), ``trialrun compare`` (compare.yaml, a case, a session, triggers) and
    ``trialrun verify`` (a plan and its suite); CPU and wall seconds, median of --repeat runs,
    and whether pydantic was imported;
  * messages: the same broken files loaded by both trees, printed side by side, with how many
    name a line and how many offer a did-you-mean.
The machines are noisy: only the ratios printed side by side in one run mean anything.

    python bench/one_validator_bench.py [--before REV] [--repeat 15]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
WORK = BENCH / ".work" / "one_validator"
# The last commit whose compare and plan files were pydantic models.
DEFAULT_BEFORE = "c5375ee"

LOADERS = {
    "run": "from trialrun.config import load_suite as load",
    "compare": "from trialrun.compare.config import load_eval_assets as load",
    "verify": "from trialrun.commands.verify_plan import load_plan as load",
}
TIMED = """\
import json, sys, time
w0, c0 = time.perf_counter(), time.process_time()
{loader}
load(sys.argv[1])
w1, c1 = time.perf_counter(), time.process_time()
print(json.dumps({{"wall": w1 - w0, "cpu": c1 - c0, "pydantic": "pydantic" in sys.modules}}))
"""
MESSAGES = """\
import json, sys
from trialrun.errors import ConfigError, ConfigErrors
{loader}
try:
    load(sys.argv[1])
    found = []
except ConfigErrors as exc:
    found = [str(e) for e in exc.errors]
except ConfigError as exc:
    found = [str(exc)]
except Exception as exc:
    found = [f"crash: {{type(exc).__name__}}: {{exc}}"]
print(json.dumps(found))
"""

SUITE = {
    "suite.yaml": "suite_name: s\nagent_command: [python3, agent.py]\nmode: replay\n"
    "cases_path: cases\ntool_registry: [lookup]\nbudgets: {max_tool_calls: 5}\n",
    "cases/a_reset.yaml": "id: a_reset\ninput: {q: 1}\ncassette: a.jsonl\n",
    "a.jsonl": "",
    "agent.py": "",
}
COMPARE = {
    "SKILL.md": "---\nname: s\ndescription: d\n---\n",
    "evals/compare.yaml": "name: s\nagent:\n  command: [run, '{task}']\n  timeout_minutes: 30\n"
    "judge:\n  command: [judge]\nk: 2\n",
    "evals/cases/a.yaml": "task: t\nrequires: git\nchecks: [{file_exists: a}]\nbucket: explicit\n",
    "evals/session.yaml": "task: chores\ncases:\n  - name: one\n    checks: [{file_exists: a}]\n",
    "evals/triggers.yaml": "should_trigger: [deploy, 42]\nshould_not_trigger: [rename]\n",
}
PLAN = (
    "suite: suite\nrepeat: 2\nregressions:\n  - name: r\n    env: {X: '1'}\n"
    "    expect: [{case: a_reset, failure: f}]\nlimits: {max_seconds: 60}\n"
)

# (label, loader, file to replace, its broken text); compare files replace COMPARE's.
BROKEN = [
    ("key typo", "compare", "evals/compare.yaml", "name: s\nagent: {command: [a]}\nsede: 7\n"),
    ("bound", "compare", "evals/compare.yaml", "name: s\nagent: {command: [a]}\nk: 0\n"),
    ("choice", "compare", "evals/compare.yaml",
     "name: s\nagent:\n  command: [a]\n  transcript: stream\n"),
    ("empty list", "compare", "evals/compare.yaml", "name: s\nagent:\n  command: []\n"),
    ("string argv", "compare", "evals/compare.yaml",
     "name: s\nagent: {command: [a]}\njudge:\n  command: judge --fast\n"),
    ("missing", "compare", "evals/compare.yaml", "name: s\nk: 1\n"),
    ("null", "compare", "evals/compare.yaml", "name: s\nagent: {command: [a]}\nseed: null\n"),
    ("version", "compare", "evals/compare.yaml",
     "name: s\nagent: {command: [a]}\narms: {incumbent: {version: 1.5}}\n"),
    ("empty text", "compare", "evals/cases/a.yaml", "task: ''\n"),
    ("max", "compare", "evals/cases/a.yaml", "task: t\ntimeout_minutes: 500\n"),
    ("number", "compare", "evals/cases/a.yaml", "task: t\nrequires: 5\n"),
    ("choice typo", "compare", "evals/cases/a.yaml", "task: t\nbucket: explict\n"),
    ("empty cases", "compare", "evals/session.yaml", "task: t\ncases: []\n"),
    ("mapping", "compare", "evals/triggers.yaml", "should_trigger: {a: 1}\n"),
    ("bound", "verify", "verify.yaml", "suite: suite\nrepeat: 0\n"),
    ("one change", "verify", "verify.yaml",
     "suite: suite\nregressions:\n  - name: r\n    expect: [{case: a_reset, failure: f}]\n"),
    ("two faults", "verify", "verify.yaml",
     "suite: suite\nrepeat: x\nregressions:\n  - name: r\n    env: {X: '1'}\n"
     "    patch: {file: suite.yaml, replace: a, with: b}\n"
     "    expect: [{case: a_reset, failure: f}]\n"),
    ("missing", "verify", "verify.yaml",
     "suite: suite\nregressions:\n  - name: r\n    patch: {file: suite.yaml, replace: a}\n"
     "    expect: [{case: a_reset, failure: f}]\n"),
    ("bound", "verify", "verify.yaml", "suite: suite\nlimits: {max_seconds: -1}\n"),
    ("key typo", "verify", "verify.yaml", "suite: suite\nregresions: []\n"),
]  # fmt: skip


def export_tree(rev: str) -> Path:
    target = WORK / f"src-{rev}"
    if not (target / "trialrun").is_dir():
        target.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile() as archive:
            subprocess.run(["git", "archive", rev, "src"], cwd=ROOT, stdout=archive, check=True)
            archive.seek(0)
            with tarfile.open(fileobj=archive) as tar:
                members = [m for m in tar.getmembers() if m.name.startswith("src/")]
                for member in members:
                    member.name = member.name.removeprefix("src/")
                tar.extractall(target, members=members, filter="data")
    return target


def write_files(root: Path, files: dict[str, str]) -> None:
    for relpath, text in files.items():
        path = root / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def fixtures() -> dict[str, Path]:
    """A valid suite, subject and plan under WORK; the argument each loader is given."""
    write_files(WORK / "suite", SUITE)
    write_files(WORK / "subject", COMPARE)
    (WORK / "verify.yaml").write_text(PLAN, encoding="utf-8")
    return {"run": WORK / "suite", "compare": WORK / "subject", "verify": WORK / "verify.yaml"}


def child(program: str, tree: Path, argument: Path) -> Any:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    proc = subprocess.run(
        [sys.executable, "-c", program, str(argument)],
        capture_output=True,
        text=True,
        env=env,
        cwd=WORK,
    )
    if proc.returncode != 0:
        raise SystemExit(f"child failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout)


def measure(trees: dict[str, Path], repeat: int) -> None:
    arguments = fixtures()
    print(f"start-up: import + load, median of {repeat} (CPU ms / wall ms); ratio now/before")
    for command, loader in LOADERS.items():
        program = TIMED.format(loader=loader)
        samples: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
        for _ in range(repeat):
            for name, tree in trees.items():  # alternating: both trees see the same noise
                samples[name].append(child(program, tree, arguments[command]))
        cells = []
        medians = {}
        for name in trees:
            cpu = statistics.median(s["cpu"] for s in samples[name]) * 1000
            wall = statistics.median(s["wall"] for s in samples[name]) * 1000
            medians[name] = cpu
            pyd = "pydantic" if samples[name][0]["pydantic"] else "no pydantic"
            cells.append(f"{name} {cpu:6.1f} / {wall:6.1f} ({pyd})")
        ratio = medians["now"] / medians["before"]
        print(f"  trialrun {command:8} " + "   ".join(cells) + f"   x{ratio:.2f}")


def messages(trees: dict[str, Path]) -> None:
    print("\nmessages on the same broken files")
    score = {name: [0, 0, 0, 0] for name in trees}
    for label, command, relpath, text in BROKEN:
        fixtures()
        write_files(WORK, {("subject/" if command == "compare" else "") + relpath: text})
        target = {"compare": WORK / "subject", "verify": WORK / "verify.yaml"}[command]
        print(f"- {command} {relpath} ({label})")
        for name, tree in trees.items():
            found = child(MESSAGES.format(loader=LOADERS[command]), tree, target)
            for message in found or ["(accepted)"]:
                shown = message.split(str(WORK) + "/", 1)[-1].replace("subject/evals/", "")
                print(f"    {name:6} {shown}")
            with_line = sum(1 for m in found if m.split(": ", 1)[0].rsplit(":", 1)[-1].isdigit())
            score[name][3] += sum(1 for m in found if m.startswith("crash: "))
            score[name][0] += len(found)
            score[name][1] += with_line
            score[name][2] += sum(1 for m in found if "did you mean" in m)
    for name, (total, lined, hinted, crashed) in score.items():
        print(
            f"{name}: {total} messages, {lined} with a line, {hinted} with a did-you-mean, "
            f"{crashed} tracebacks"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default=DEFAULT_BEFORE)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    trees = {"before": export_tree(args.before), "now": ROOT / "src"}
    measure(trees, args.repeat)
    messages(trees)


if __name__ == "__main__":
    main()
