"""Replay benchmark: trialrun against a bare driver and RunLedger 0.2.3, side by side in one run.

Generates RunLedger-format suites under bench/.work/ and runs every tool on the same suites with
the same agent interpreter:
  * wide: 200 cases x 3 tool calls (agent start-up dominates), once per synthetic agent:
      - plain: answers at once,
      - heavy: first spends 300 ms of CPU (measured as process time, as SDK imports spend it),
        then reads its task_start and behaves as the plain one;
    rows: the bare driver (bench/bare_driver.py) with -j 1 and -j 2, RunLedger, `trialrun run`
    with -j 1 and -j 2, and `trialrun run -j 1` on a copy of the suite with `prestart: false`
    (skipped with a note when this trialrun refuses the key). The rows alternate, their order
    rotating on every repeat. Every tool's agents run in sessions of their own (RunLedger's
    through `setsid`, see peer_wrapper): the kernel's autogroup scheduler gives each session a
    share of CPU, so on a loaded machine a tool whose agents share one session would lose.
  * deep: 1 case making 5,000 distinct tool calls over a 5,000-entry cassette (matching dominates).
RunLedger is installed into a throwaway venv under bench/.work/. The machines are shared and
noisy: only the ratios of medians measured in the same run mean anything, so the wide part prints
ratios with issue 17's acceptance bound beside them and no verdict.

    python bench/replay_bench.py [--repeat 3] [--quick] [--cases 200] [--trialrun PATH]
                                 [--skip-deep] [--skip-peer-deep]
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import subprocess
import sys
import time
import venv
from dataclasses import dataclass
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
WORK = BENCH / ".work"
PEER_VENV = WORK / "runledger-venv"
PEER_SPEC = "runledger==0.2.3"
BARE_DRIVER = BENCH / "bare_driver.py"

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

# CPU, not sleep: a pre-started agent overlaps the running case only as far as there is a free
# core, which is what SDK imports meet too.
HEAVY_PRELUDE = """\
import hashlib, time
_t0 = time.process_time()
_block = b"import openai, langchain " * 64
while time.process_time() - _t0 < 0.3:
    for _ in range(200):
        _block = hashlib.sha256(_block).digest() * 50
"""

AGENTS = {"plain": AGENT, "heavy": HEAVY_PRELUDE + AGENT}


@dataclass(frozen=True)
class Tools:
    trialrun: Path
    peer: Path
    out: Path


# --- suites -------------------------------------------------------------------------------------


def write_suite(
    root: Path,
    name: str,
    cases: int,
    calls: int,
    agent: str = AGENT,
    extra_yaml: str = "",
    wrapper: tuple[str, ...] = (),
) -> Path:
    suite = root / name
    if suite.exists():
        shutil.rmtree(suite)
    (suite / "cases").mkdir(parents=True)
    (suite / "cassettes").mkdir()
    (suite / "agent.py").write_text(agent)
    command = [sys.executable, "agent.py"]
    (suite / "suite.yaml").write_text(
        f"suite_name: {name}\n"
        f"agent_command: {json.dumps([*wrapper, *command])}\n"
        "mode: replay\ncases_path: cases\ntool_registry: [lookup]\n"
        "assertions:\n  - type: required_fields\n    fields: [answer, calls]\n"
        "  - type: must_call\n    tools: [lookup]\n" + extra_yaml
    )
    manifest_cases = []
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
        cassette = suite / "cassettes" / f"{prefix}.jsonl"
        cassette.write_text("\n".join(entries) + "\n")
        manifest_cases.append(
            {"id": prefix, "input": {"calls": calls, "prefix": prefix}, "cassette": str(cassette)}
        )
    # What bench/bare_driver.py reads instead of the YAML: the floor imports no YAML parser.
    manifest = {"command": command, "cwd": str(suite), "cases": manifest_cases}
    (suite / "bare.json").write_text(json.dumps(manifest))
    return suite


# --- tools and commands -------------------------------------------------------------------------


def find_trialrun(given: str | None) -> Path:
    candidates = [Path(given)] if given else []
    candidates += [Path(sys.executable).with_name("trialrun"), ROOT / ".venv" / "bin" / "trialrun"]
    for exe in candidates:
        if exe.exists():
            return exe
    on_path = shutil.which("trialrun")
    if on_path and not given:
        return Path(on_path)
    raise SystemExit(
        f"error: no trialrun executable found (tried {', '.join(map(str, candidates))}); "
        "run `make .venv/.installed` or pass --trialrun PATH"
    )


def ensure_peer() -> Path:
    exe = PEER_VENV / "bin" / "runledger"
    if not exe.exists():
        venv.create(PEER_VENV, with_pip=True)
        subprocess.run(
            [str(PEER_VENV / "bin" / "python"), "-m", "pip", "install", "-q", PEER_SPEC], check=True
        )
    return exe


def peer_cmd(tools: Tools, suite: Path) -> list[str]:
    return [
        str(tools.peer),
        "run",
        str(suite),
        "--mode",
        "replay",
        "--output-dir",
        str(tools.out / "peer"),
    ]


def our_cmd(tools: Tools, suite: Path, jobs: int) -> list[str]:
    return [
        str(tools.trialrun),
        "run",
        str(suite),
        "--mode",
        "replay",
        "--no-baseline",
        "--out",
        str(tools.out / "ours"),
        "-j",
        str(jobs),
    ]


def bare_cmd(suite: Path, jobs: int) -> list[str]:
    return [sys.executable, str(BARE_DRIVER), str(suite / "bare.json"), "-j", str(jobs)]


def measure(argv: list[str], cwd: Path) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + sys of the whole process tree) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(
            f"{argv[0]} failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
        )
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


def timed(argv: list[str], cwd: Path) -> float:
    return measure(argv, cwd)[0]


# --- wide: 200 cases x 3 calls, plain and heavy agent -------------------------------------------

# (agent, numerator row, denominator row) -> issue 17's acceptance bound, where it sets one.
WIDE_RATIOS: list[tuple[str, str, str]] = [
    ("trialrun -j1 / bare -j1", "ours-j1", "bare-j1"),
    ("trialrun -j1 / RunLedger", "ours-j1", "peer"),
    ("trialrun -j2 / RunLedger", "ours-j2", "peer"),
    ("trialrun -j2 / bare -j2", "ours-j2", "bare-j2"),
    ("prestart off / prestart on (-j1)", "ours-j1-noprestart", "ours-j1"),
]
WIDE_BOUNDS: dict[tuple[str, str, str], float] = {
    ("heavy", "ours-j1", "bare-j1"): 0.6,
    ("heavy", "ours-j1", "peer"): 0.6,
    ("heavy", "ours-j2", "peer"): 0.55,
    ("plain", "ours-j1", "bare-j1"): 0.8,
}
ROW_LABELS = {
    "bare-j1": "bare driver -j1",
    "bare-j2": "bare driver -j2",
    "peer": "RunLedger 0.2.3",
    "ours-j1": "trialrun -j1",
    "ours-j2": "trialrun -j2",
    "ours-j1-noprestart": "trialrun -j1 prestart: false",
}


def prestart_refused(tools: Tools, suite: Path) -> str | None:
    """The error line when this trialrun rejects `prestart: false` (exit 2), else None."""
    proc = subprocess.run(
        our_cmd(tools, suite, 1), cwd=WORK, capture_output=True, text=True, check=False
    )
    if proc.returncode == 2:
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        return lines[-1] if lines else "exit 2"
    if proc.returncode != 0:
        raise SystemExit(f"trialrun failed on {suite} ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return None


def peer_wrapper() -> tuple[str, ...]:
    """`setsid` before RunLedger's agent command when the kernel schedules sessions as groups.

    trialrun and the bare driver start each agent in a session of its own; RunLedger does not, so
    with autogroup on, its agents would share one scheduling group on a loaded machine (with
    -j 2 as well) and lose CPU to the others. util-linux `setsid` only calls setsid() and execs
    when its caller is not a group leader, which RunLedger's child is not: about 1 ms per case.
    """
    try:
        autogroup = Path("/proc/sys/kernel/sched_autogroup_enabled").read_text().strip() == "1"
    except OSError:
        autogroup = False
    setsid = shutil.which("setsid")
    return (setsid,) if autogroup and setsid else ()


def wide_rows(
    tools: Tools, suite: Path, peer_suite: Path, no_prestart: Path | None
) -> dict[str, list[str]]:
    rows = {
        "bare-j1": bare_cmd(suite, 1),
        "bare-j2": bare_cmd(suite, 2),
        "peer": peer_cmd(tools, peer_suite),
        "ours-j1": our_cmd(tools, suite, 1),
        "ours-j2": our_cmd(tools, suite, 2),
    }
    if no_prestart is not None:
        rows["ours-j1-noprestart"] = our_cmd(tools, no_prestart, 1)
    return rows


def run_rows(
    rows: dict[str, list[str]], repeat: int, out: Path
) -> dict[str, list[tuple[float, float]]]:
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in rows}
    names = list(rows)
    for r in range(repeat):
        # Rotate the order so no row always runs right after the same neighbour.
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            shutil.rmtree(out, ignore_errors=True)
            wall, cpu = measure(rows[name], WORK)
            samples[name].append((wall, cpu))
            print(f"  {name:<20} wall {wall:7.2f}s  cpu {cpu:7.2f}s", flush=True)
    return samples


def ratio_line(agent: str, label: str, num: str, den: str, walls: dict[str, list[float]]) -> str:
    bound = WIDE_BOUNDS.get((agent, num, den))
    beside = f"(issue 17 bound: ≤ {bound}x)" if bound is not None else "(no issue 17 bound)"
    ratio = statistics.median(walls[num]) / statistics.median(walls[den])
    line = f"  {label:<34} {ratio:5.2f}x  {beside}"
    if len(walls[num]) > 1:
        # Each round runs every row once, close together in time: when the machine's load drifts
        # between rounds, the ratios within a round show it better than the medians do.
        rounds = " ".join(f"{a / b:.2f}" for a, b in zip(walls[num], walls[den], strict=True))
        line += f"  per round: {rounds}"
    return line


def print_wide(
    agent: str, cases: int, samples: dict[str, list[tuple[float, float]]], note: str | None
) -> None:
    # CPU (user + sys of the process tree) moves less with the other load on a shared machine;
    # pre-starting lowers wall time, not CPU time, so the ratios stay on wall time.
    walls = {name: [wall for wall, _ in v] for name, v in samples.items()}
    print(f"\nwide, {agent} agent: {cases} cases x 3 calls, medians")
    for name, label in ROW_LABELS.items():
        if name in samples:
            wall = statistics.median(walls[name])
            cpu = statistics.median(c for _, c in samples[name])
            print(f"  {label:<34} wall {wall:7.2f}s  cpu {cpu:7.2f}s")
    for label, num, den in WIDE_RATIOS:
        if num in samples and den in samples:
            print(ratio_line(agent, label, num, den, walls))
    if note is not None:
        print(f"  prestart off / prestart on: not measured, this trialrun refuses the key: {note}")


def wide_benchmark(tools: Tools, cases: int, repeat: int) -> None:
    for agent, source in AGENTS.items():
        suite = write_suite(WORK, f"wide-{agent}", cases=cases, calls=3, agent=source)
        off = write_suite(
            WORK,
            f"wide-{agent}-noprestart",
            cases=cases,
            calls=3,
            agent=source,
            extra_yaml="prestart: false\n",
        )
        wrapper = peer_wrapper()
        peer_suite = write_suite(
            WORK, f"wide-{agent}-peer", cases=cases, calls=3, agent=source, wrapper=wrapper
        )
        note = prestart_refused(tools, off)
        print(
            f"wide, {agent} agent: {repeat} round(s); RunLedger's agent command starts with "
            f"{list(wrapper)}",
            flush=True,
        )
        rows = wide_rows(tools, suite, peer_suite, None if note else off)
        samples = run_rows(rows, repeat, tools.out)
        print_wide(agent, cases, samples, note)


# --- deep: 1 case x 5,000 calls over a 5,000-entry cassette -------------------------------------


def deep_benchmark(tools: Tools, repeat: int, skip_peer: bool) -> None:
    deep = write_suite(WORK, "deep", cases=1, calls=5000)
    samples: dict[str, list[float]] = {"peer-deep": [], "ours-deep": []}
    for _ in range(repeat):
        samples["ours-deep"].append(timed(our_cmd(tools, deep, 1), WORK))
    if not skip_peer:
        samples["peer-deep"].append(timed(peer_cmd(tools, deep), WORK))

    med = {k: statistics.median(v) for k, v in samples.items() if v}
    # The bare-driver ratio of this case (issue 17) is bench/deep_bench.py's; here, the peer's.
    deep_line = f"\n5,000 calls / 5,000 entries  trialrun {med['ours-deep']:.2f}s"
    if "peer-deep" in med:
        deep_line += (
            f"  runledger {med['peer-deep']:.2f}s (ratio {med['ours-deep'] / med['peer-deep']:.3f})"
        )
    print(deep_line)


# --- main ---------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cases", type=int, help="cases of the wide suites (default 200)")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: 20 wide cases (unless --cases), 1 round, no peer deep",
    )
    parser.add_argument("--trialrun", help="the trialrun executable (default: this venv's)")
    parser.add_argument("--skip-deep", action="store_true")
    parser.add_argument("--skip-peer-deep", action="store_true", help="the peer needs ~1 min there")
    args = parser.parse_args()
    if args.quick:
        args.repeat, args.skip_peer_deep = 1, True
    if args.cases is None:
        args.cases = 20 if args.quick else 200

    WORK.mkdir(exist_ok=True)
    tools = Tools(trialrun=find_trialrun(args.trialrun), peer=ensure_peer(), out=WORK / "out")
    print(f"trialrun: {tools.trialrun}\nagent interpreter: {sys.executable}", flush=True)
    wide_benchmark(tools, args.cases, args.repeat)
    if not args.skip_deep:
        deep_benchmark(tools, args.repeat, args.skip_peer_deep)


if __name__ == "__main__":
    main()
