"""Replay benchmark: trialrun against RunLedger 0.2.3, side by side in one process tree.

Generates two RunLedger-format suites under bench/.work/:
  * wide:  200 cases x 3 tool calls each (agent spawn dominates),
  * deep:  1 case making 5,000 distinct tool calls over a 5,000-entry cassette (matching dominates),
installs runledger==0.2.3 into a throwaway venv, runs both tools on the same suites with the same
agent interpreter, alternating runs, and prints medians and ratios. The machines are noisy, so
only ratios measured in the same run mean anything.

    python bench/replay_bench.py [--repeat 3] [--skip-peer-deep]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
import venv
from pathlib import Path

WORK = Path(__file__).resolve().parent / ".work"
PEER_VENV = WORK / "runledger-venv"
PEER_SPEC = "runledger==0.2.3"

AGENT = """\
import json, sys
def send(m):
    sys.stdout.write(json.dumps(m) + "\\n"); sys.stdout.flush()
lines = iter(sys.stdin)
start = json.loads(next(lines))
calls, prefix = start["input"]["calls"], start["input"]["prefix"]
for i in range(calls):
    args = {"q": f"{prefix}-{i}"}
    send({"type": "tool_call", "name": "lookup", "call_id": f"c{i}", "args": args})
    json.loads(next(lines))
send({"type": "final_output", "output": {"answer": prefix, "calls": calls}})
"""


def write_suite(root: Path, name: str, cases: int, calls: int) -> Path:
    suite = root / name
    if suite.exists():
        shutil.rmtree(suite)
    (suite / "cases").mkdir(parents=True)
    (suite / "cassettes").mkdir()
    (suite / "agent.py").write_text(AGENT)
    (suite / "suite.yaml").write_text(
        f"suite_name: {name}\n"
        f"agent_command: [{json.dumps(sys.executable)}, agent.py]\n"
        "mode: replay\ncases_path: cases\ntool_registry: [lookup]\n"
        "assertions:\n  - type: required_fields\n    fields: [answer, calls]\n"
        "  - type: must_call\n    tools: [lookup]\n"
    )
    for c in range(cases):
        prefix = f"case{c:04d}"
        (suite / "cases" / f"{prefix}.yaml").write_text(
            f"id: {prefix}\ninput:\n  calls: {calls}\n  prefix: {prefix}\n"
            f"cassette: cassettes/{prefix}.jsonl\n"
        )
        entries = (
            json.dumps(
                {
                    "tool": "lookup",
                    "args": {"q": f"{prefix}-{i}"},
                    "ok": True,
                    "result": {"hit": i, "text": "lorem ipsum " * 4},
                }
            )
            for i in range(calls)
        )
        (suite / "cassettes" / f"{prefix}.jsonl").write_text("\n".join(entries) + "\n")
    return suite


def ensure_peer() -> Path:
    exe = PEER_VENV / "bin" / "runledger"
    if not exe.exists():
        venv.create(PEER_VENV, with_pip=True)
        subprocess.run(
            [str(PEER_VENV / "bin" / "python"), "-m", "pip", "install", "-q", PEER_SPEC], check=True
        )
    return exe


def timed(argv: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(
            f"{argv[0]} failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
        )
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip-peer-deep", action="store_true", help="the peer needs ~1 min there")
    args = parser.parse_args()

    WORK.mkdir(exist_ok=True)
    peer = ensure_peer()
    ours = Path(sys.executable).with_name("trialrun")
    wide = write_suite(WORK, "wide", cases=200, calls=3)
    deep = write_suite(WORK, "deep", cases=1, calls=5000)
    out = WORK / "out"

    def peer_cmd(suite: Path) -> list[str]:
        return [str(peer), "run", str(suite), "--mode", "replay", "--output-dir", str(out / "peer")]

    def our_cmd(suite: Path, jobs: int) -> list[str]:
        return [
            str(ours),
            "run",
            str(suite),
            "--mode",
            "replay",
            "--no-baseline",
            "--out",
            str(out / "ours"),
            "-j",
            str(jobs),
        ]

    samples: dict[str, list[float]] = {
        k: [] for k in ("peer", "ours-j1", "ours-j2", "peer-deep", "ours-deep")
    }
    for _ in range(args.repeat):
        samples["peer"].append(timed(peer_cmd(wide), WORK))
        samples["ours-j1"].append(timed(our_cmd(wide, 1), WORK))
        samples["ours-j2"].append(timed(our_cmd(wide, 2), WORK))
        samples["ours-deep"].append(timed(our_cmd(deep, 1), WORK))
    if not args.skip_peer_deep:
        samples["peer-deep"].append(timed(peer_cmd(deep), WORK))

    med = {k: statistics.median(v) for k, v in samples.items() if v}
    print(
        f"200 cases x 3 calls  runledger {med['peer']:.2f}s  trialrun -j1 {med['ours-j1']:.2f}s "
        f"(ratio {med['ours-j1'] / med['peer']:.2f}, target <= 1.0)  "
        f"trialrun -j2 {med['ours-j2']:.2f}s "
        f"(ratio {med['ours-j2'] / med['peer']:.2f}, target <= 0.6)"
    )
    deep_line = f"5,000 calls / 5,000 entries  trialrun {med['ours-deep']:.2f}s (target < 3 s)"
    if "peer-deep" in med:
        deep_line += (
            f"  runledger {med['peer-deep']:.2f}s (ratio {med['ours-deep'] / med['peer-deep']:.3f})"
        )
    print(deep_line)


if __name__ == "__main__":
    main()
