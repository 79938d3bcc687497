"""CPU of the deep case's phases after its conversation: redaction, run.jsonl, receipt.

    python bench/deep_post_phases.py [--repeat 9] [--phase all|redact|runlog|receipt]

Runs the deep suite of ``bench/deep_bench.py`` once in this process to capture the case's
``AgentRun`` as the conversation left it (10,002 events, not redacted yet), then replays on a
copy of it, ``--repeat`` times, what ``trialrun run`` does next and prints the median process CPU
of each phase:

* redact: the runner's ``_judge`` (redaction of every event, then the checks);
* runlog: ``RunDirectory.write_case_events`` (encode and write run.jsonl);
* receipt: ``SuiteReceipt.record_case`` (5,000 tool_call events, hashed, chained and written).

The caches a fresh process starts without (redaction of short strings, key names, timestamps)
are cleared before each repetition. For instruction counts run one repetition of one phase under
``valgrind --tool=callgrind`` and compare the totals with and without ``--phase none``.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from replay_bench import WORK, write_suite  # noqa: E402


def capture(calls: int) -> tuple[Any, Any]:
    """The deep case and its raw ``AgentRun``, from one in-process ``trialrun run``."""
    from trialrun.cli import run_cli
    from trialrun.running import runner

    captured: list[tuple[Any, Any]] = []
    judge = runner._judge

    def keep(case: Any, run: Any, mode: Any, backend: Any) -> Any:
        captured.append((case, copy.deepcopy(run)))
        return judge(case, run, mode, backend)

    runner._judge = keep
    WORK.mkdir(exist_ok=True)
    suite = write_suite(WORK, "deep", cases=1, calls=calls)
    with tempfile.TemporaryDirectory() as out:
        argv = ["run", str(suite), "--mode", "replay", "--no-baseline", "--out", out]
        code = run_cli(argv)
    runner._judge = judge
    if code != 0 or len(captured) != 1:
        raise SystemExit(f"the deep run failed (exit {code})")
    return captured[0]


def clear_caches() -> None:
    from trialrun.base import redact
    from trialrun.receipt import envelope

    redact._redact_short_text.cache_clear()
    redact.is_sensitive_key.cache_clear()
    for cache in ("_CLEAN_TEXTS", "_CLEAN_KEYS"):  # trialrun after session 7
        getattr(redact, cache, set()).clear()
    envelope._utc_second.cache_clear()


def one_pass(case: Any, raw_run: Any, phases: set[str], out: Path) -> dict[str, float]:
    from trialrun.artifacts.rundir import RunDirectory
    from trialrun.receipt.suite_run import SuiteReceipt
    from trialrun.running import runner

    run = copy.deepcopy(raw_run)
    run_dir = RunDirectory(out, "deep", f"r{time.monotonic_ns()}")
    receipt = SuiteReceipt(
        run_dir.path / "receipt.jsonl", suite_name="deep", command_line="bench", repository=out
    )
    # _judge's cassette description needs a backend; skip it, it is not this phase's cost.
    describe = runner._describe_cassette
    runner._describe_cassette = lambda *args: None
    clear_caches()
    spent: dict[str, float] = {}
    try:
        start = time.process_time()
        result = runner._judge(case, run, "replay", None)  # type: ignore[arg-type]
        spent["redact"] = time.process_time() - start
        if "runlog" in phases or "receipt" in phases:
            start = time.process_time()
            trace_sha256 = run_dir.write_case_events(result)
            spent["runlog"] = time.process_time() - start
        if "receipt" in phases:
            start = time.process_time()
            receipt.record_case(result, write_trace=lambda: trace_sha256)
            spent["receipt"] = time.process_time() - start
    finally:
        runner._describe_cassette = describe
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--phase", default="all", choices=["all", "redact", "runlog", "receipt"])
    args = parser.parse_args()
    phases = {"redact", "runlog", "receipt"} if args.phase == "all" else {args.phase}
    if "receipt" in phases:
        phases.add("runlog")  # the receipt needs run.jsonl's hash
    case, raw_run = capture(args.calls)
    samples: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as out:
        for _ in range(args.repeat):
            for name, seconds in one_pass(case, raw_run, phases, Path(out)).items():
                samples.setdefault(name, []).append(seconds)
    print(f"{len(raw_run.events)} events, median CPU of {args.repeat} repetitions:")
    total = 0.0
    for name, values in samples.items():
        total += statistics.median(values)
        print(f"  {name:8s} {statistics.median(values) * 1000:7.1f} ms")
    print(f"  {'total':8s} {total * 1000:7.1f} ms")


if __name__ == "__main__":
    main()
