"""Sharded compare benchmark: one shard against three shards run at once, on this machine.

Writes a scripted subject under bench/.work/compare-shard/ whose agent sleeps 0.5 s per arm and
prints a short stream-json transcript (6 cases x k=1 x 3 arms: 18 arm runs, 6 units), then times,
alternating and repeated:

  * one:   `trialrun compare SUBJECT --shard 1/1` (every unit in one process, -j 1);
  * three: `--shard 1/3`, `2/3` and `3/3` started together (-j 1 each), until the last ends;

and prints the medians and their ratio (three / one; ideally 1/3 plus start-up, expected at most
0.45). Each round also merges the three shards and checks that the verdict equals the single
shard's. The machine is shared, so only the ratio, measured side by side, means anything.
Bytecode is cached under bench/.work (as in a user's install) even where the environment sets
PYTHONDONTWRITEBYTECODE.

    python bench/compare_shard_bench.py [--repeat 3] [--cases 6] [--sleep 0.5]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORK = Path(__file__).resolve().parent / ".work" / "compare-shard"

AGENT = """\
import json, os, pathlib, sys, time
task, sandbox = sys.argv[1], pathlib.Path(sys.argv[2])
time.sleep(float(os.environ.get("BENCH_ARM_SLEEP", "0.5")))
staged = (sandbox / ".claude" / "skills" / "bench" / "SKILL.md").is_file()
text = "done: " + ("with the skill" if staged else "without it")
for event in (
    {"type": "system", "subtype": "init", "skills": []},
    {"type": "assistant", "message": {"content": [{"type": "text", "text": text}]}},
    {"type": "result", "subtype": "success", "num_turns": 1, "duration_ms": 500,
     "total_cost_usd": 0.0, "result": "done"},
):
    print(json.dumps(event))
"""


def write_subject(cases: int) -> Path:
    subject = WORK / "subject"
    if subject.exists():
        shutil.rmtree(subject)
    (subject / "evals" / "cases").mkdir(parents=True)
    (subject / "evals" / "incumbent").mkdir()
    (subject / "SKILL.md").write_text("candidate\n")
    (subject / "evals" / "incumbent" / "SKILL.md").write_text("incumbent\n")
    (subject / "evals" / "agent.py").write_text(AGENT)
    (subject / "evals" / "compare.yaml").write_text(
        "name: bench\n"
        "agent:\n"
        f'  command: [{json.dumps(sys.executable)}, "{{evals}}/agent.py", "{{task}}", '
        '"{sandbox}"]\n'
        "  stage: .claude/skills/{name}\n"
        "  transcript: stream-json\n"
        "arms:\n  incumbent:\n    path: incumbent\n"
        "k: 1\nseed: 1\n"
    )
    for index in range(cases):
        (subject / "evals" / "cases" / f"case{index:02d}.yaml").write_text(
            f"task: case {index}\nchecks:\n  - transcript_mentions: skill\n"
        )
    return subject


def trialrun(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "trialrun", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def wait_all(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        _, err = process.communicate()
        if process.returncode != 0:
            raise SystemExit(f"trialrun failed ({process.returncode}): {err.decode()[-500:]}")


def timed_shards(subject: Path, count: int, out: Path) -> float:
    if out.exists():
        shutil.rmtree(out)
    start = time.perf_counter()
    wait_all(
        [
            trialrun("compare", str(subject), "--shard", f"{i}/{count}", "--out", str(out))
            for i in range(1, count + 1)
        ]
    )
    return time.perf_counter() - start


def merged_verdict(out: Path) -> str:
    shards = [str(path) for path in sorted(out.iterdir())]
    done = subprocess.run(
        [sys.executable, "-m", "trialrun", "compare", "merge", *shards, "--json", "--no-commit"],
        capture_output=True,
        check=True,
    )
    receipt = json.loads(done.stdout)
    return f"{receipt['verdict']} {receipt['scored_rows']}/{receipt['expected_rows']}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cases", type=int, default=6)
    parser.add_argument("--sleep", type=float, default=0.5)
    options = parser.parse_args()
    subject = write_subject(options.cases)
    os.environ["BENCH_ARM_SLEEP"] = str(options.sleep)
    # Bytecode is cached, as in any user's install, even where PYTHONDONTWRITEBYTECODE is set:
    # otherwise every shard process would compile trialrun from source first.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = str(WORK / "pycache")
    with tempfile.TemporaryDirectory(prefix="trialrun-bench-home-") as home:
        os.environ["TRIALRUN_HOME"] = home  # merged receipts never reach the user's store
        one, three = [], []
        for _ in range(options.repeat):  # alternate, so drift hits both sides alike
            one.append(timed_shards(subject, 1, WORK / "one"))
            three.append(timed_shards(subject, 3, WORK / "three"))
            verdicts = merged_verdict(WORK / "one"), merged_verdict(WORK / "three")
            if verdicts[0] != verdicts[1]:
                raise SystemExit(f"merged verdicts differ: 1 shard {verdicts[0]}, 3 {verdicts[1]}")
    arms = options.cases * 3
    print(f"{options.cases} cases x k=1 x 3 arms = {arms} arm runs of {options.sleep:g} s each")
    print(
        f"1 shard : median {statistics.median(one):.2f} s  ({', '.join(f'{t:.2f}' for t in one)})"
    )
    print(
        f"3 shards: median {statistics.median(three):.2f} s  "
        f"({', '.join(f'{t:.2f}' for t in three)})"
    )
    ratio = statistics.median(three) / statistics.median(one)
    print(f"ratio 3 shards / 1 shard: {ratio:.2f} (expected <= 0.45); merged verdict {verdicts[0]}")
    # Each shard is a process that imports the engine and spawns its agents: on a machine whose
    # cores are busy those costs queue for CPU and the three shards overlap less.
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"load average (1 min) {load:.1f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
