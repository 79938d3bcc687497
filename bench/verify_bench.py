"""Receipt verification benchmark: speed against plain parsing, and memory against file size.

Writes a receipt of N events (60% tool_call, 30% file_change with ~2 KB diffs, 10% usage, plus
run_start/run_end) with the real ``ReceiptWriter``, then:

* times ``verify_receipt`` against a loop that only ``json.loads`` every line (best of
  ``--repeat``, alternating so both see the same machine noise) and prints the ratio (target:
  at most 2.5);
* measures memory twice, for a small receipt and the full one: the tracemalloc peak during
  verification, and the maximum RSS of a fresh child process that only verifies. Constant memory
  means both numbers stay flat while the file grows ten times.

    python bench/verify_bench.py [--events 100000] [--small 10000] [--repeat 3] [--keep]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from trialrun.receipt.verify import verify_receipt
from trialrun.receipt.writer import ReceiptWriter

TARGET_RATIO = 2.5
DIFF_LINES = 30  # ~2 KB of unified diff per file_change


def write_receipt(path: Path, events: int) -> None:
    """A realistic receipt of ``events`` events, written by the real writer with a fixed clock."""
    ticks = iter(range(10**9))

    def clock() -> float:
        return 1_767_225_600.0 + next(ticks) * 0.013

    with ReceiptWriter(path, clock=clock) as writer:
        writer.emit(
            "run_start",
            {
                "goal": "benchmark receipt",
                "verifyCommand": "pytest -q",
                "repoHead": "3f2a9c1e5b7d4a6f8e0c2b4d6f8a0c2e4b6d8f0a",
                "branch": "main",
                "tool": {"name": "trialrun", "version": "bench"},
            },
        )
        for seq in range(1, events - 1):
            kind, data = _event(seq)
            writer.emit(kind, data)
        writer.close(
            {
                "stopReason": "verified",
                "verified": True,
                "totals": {"attempts": 1, "totalTokens": 0, "costUsd": 0, "filesChanged": 0},
            }
        )


def _event(seq: int) -> tuple[str, dict[str, object]]:
    slot = seq % 10
    if slot < 6:
        return "tool_call", {
            "attempt": 1 + seq // 1000,
            "name": ("read_file", "run_tests", "apply_patch")[seq % 3],
            "argsSummary": f'path="src/module_{seq % 97}.py" line={seq % 400} mode="read"',
            "redacted": False,
            "durationMs": (seq * 7) % 900 + 0.25,
            "ok": seq % 17 != 0,
        }
    if slot < 9:
        diff = _diff(seq)
        return "file_change", {
            "path": f"src/package/module_{seq}.py",
            "status": "modified",
            "beforeSha256": hashlib.sha256(f"before {seq}".encode()).hexdigest(),
            "afterSha256": hashlib.sha256(f"after {seq}".encode()).hexdigest(),
            "diffSha256": hashlib.sha256(diff.encode()).hexdigest(),
            "diff": diff,
        }
    return "usage", {
        "attempt": 1 + seq // 1000,
        "inputTokens": 1200 + seq % 500,
        "outputTokens": 300 + seq % 70,
        "cacheReadTokens": seq % 1000,
        "cacheWriteTokens": 0,
        "totalTokens": 1500 + seq % 570,
        "costUsd": round(0.0003 * (1 + seq % 50), 6),
        "model": "bench-model",
    }


def _diff(seq: int) -> str:
    lines = [f"--- a/src/package/module_{seq}.py", f"+++ b/src/package/module_{seq}.py"]
    lines.append(f"@@ -{seq % 300},{DIFF_LINES // 2} +{seq % 300},{DIFF_LINES // 2} @@")
    for n in range(DIFF_LINES // 2):
        lines.append(f'-    value_{n} = compute("{seq}", {n}, tolerance=0.{n:03d})  # old')
        lines.append(f'+    value_{n} = compute("{seq}", {n}, tolerance=0.{n:03d}, fast=True)')
    return "\n".join(lines) + "\n"


def time_verify(path: Path) -> float:
    start = time.perf_counter()
    result = verify_receipt(path)
    elapsed = time.perf_counter() - start
    if not result.ok:
        raise SystemExit(f"benchmark receipt does not verify: {result.message}")
    return elapsed


def time_parse_only(path: Path) -> float:
    start = time.perf_counter()
    loads = json.loads
    with open(path, "rb") as stream:
        for line in stream:
            loads(line)
    return time.perf_counter() - start


def tracemalloc_peak(path: Path) -> int:
    tracemalloc.start()
    try:
        verify_receipt(path)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def child_max_rss_kib(path: Path) -> tuple[int, int]:
    """Max RSS (KiB, Linux) of a fresh interpreter after importing the verifier, then verifying."""
    code = (
        "import resource, sys\n"
        "from trialrun.receipt.verify import verify_receipt\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "assert verify_receipt(sys.argv[1]).ok\n"
        "print(before, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(path)], check=True, capture_output=True, text=True
    )
    before, after = out.stdout.split()
    return int(before), int(after)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the receipts (printed paths)")
    args = parser.parse_args(argv)

    directory = Path(tempfile.mkdtemp(prefix="verify-bench-"))
    big, small = directory / "big.jsonl", directory / "small.jsonl"
    start = time.perf_counter()
    write_receipt(big, args.events)
    write_receipt(small, args.small)
    size_mb = big.stat().st_size / 1e6
    print(f"wrote {args.events} events ({size_mb:.1f} MB) in {time.perf_counter() - start:.1f} s")

    verify_times, parse_times = [], []
    for _ in range(args.repeat):
        parse_times.append(time_parse_only(big))
        verify_times.append(time_verify(big))
    best_verify, best_parse = min(verify_times), min(parse_times)
    ratio = best_verify / best_parse
    print(f"json.loads every line : {best_parse:6.2f} s  ({args.events / best_parse:,.0f} ev/s)")
    print(f"verify_receipt        : {best_verify:6.2f} s  ({args.events / best_verify:,.0f} ev/s)")
    verdict = "OK" if ratio <= TARGET_RATIO else "OVER TARGET"
    print(f"ratio                 : {ratio:6.2f}  (target <= {TARGET_RATIO}: {verdict})")

    for label, path in ((f"{args.small} events", small), (f"{args.events} events", big)):
        peak = tracemalloc_peak(path) / 1024
        before, after = child_max_rss_kib(path)
        print(
            f"memory, {label:>14}: tracemalloc peak {peak:6.0f} KiB; child max RSS "
            f"{before} KiB after import, {after} KiB after verifying"
        )

    if args.keep:
        print(f"receipts kept in {directory}")
    else:
        big.unlink()
        small.unlink()
        directory.rmdir()
    return 0 if ratio <= TARGET_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
