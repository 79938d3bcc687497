"""Agent SDK framing: how the time of one tool call grows with the size of its result.

    python bench/sdk_framing_bench.py [--small-kib 600] [--factor 10] [--repeat 3]

Records, then replays, one tool call whose result is ``--small-kib`` KiB and then ``--factor``
times that, through the SDK's session against the tests' fake runner on a socketpair in this
process, and prints the best time of each and their ratio. Framing that is linear in the bytes
gives a ratio near ``--factor``; one that re-scans the buffer per chunk gives its square. The
target is a ratio of at most four times ``--factor``.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from sdk_agents.fake_runner import FakeRunner
from trialrun.agent import client
from trialrun.agent.channel import Channel
from trialrun.agent.client import Session


def _never_runs() -> Any:
    raise AssertionError("the real tool ran during replay")


def _one_call(runner: FakeRunner, tool: Any, expected: Any) -> tuple[float, list[dict[str, Any]]]:
    """Seconds for one ``dump`` call through a fresh session; what the runner recorded."""
    runner_end, agent_end = socket.socketpair()
    thread, served = runner.start(runner_end, task_input={"q": "x"})
    session = Session.open(Channel(agent_end), mode=runner.mode)
    client._connected = (os.getpid(), session)
    try:
        began = time.perf_counter()
        if session.call_tool("dump", {}, tool) != expected:
            raise SystemExit("the result came back changed")
        took = time.perf_counter() - began
    finally:
        session.close()
        thread.join(60)
    return took, served.recorded


def round_trips(size: int, repeat: int) -> tuple[float, float]:
    """Best seconds to record, then to replay, a result of ``size`` characters."""
    result = {"blob": "x" * size + "é"}
    recorded, replayed = [], []
    for _ in range(repeat):
        took, cassette = _one_call(FakeRunner("record"), lambda: result, result)
        recorded.append(took)
        took, _ = _one_call(FakeRunner("replay", cassette), _never_runs, result)
        replayed.append(took)
    return min(recorded), min(replayed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small-kib", type=int, default=600)
    parser.add_argument("--factor", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    small_size = args.small_kib * 1024
    small = round_trips(small_size, args.repeat)
    big = round_trips(small_size * args.factor, args.repeat)
    for name, index in (("record", 0), ("replay", 1)):
        ratio = big[index] / small[index]
        verdict = "ok" if ratio <= 4 * args.factor else "OVER TARGET"
        print(
            f"{name}: {small[index] * 1000:.1f} ms for {args.small_kib} KiB, "
            f"{big[index] * 1000:.1f} ms for {args.small_kib * args.factor} KiB, "
            f"ratio {ratio:.1f} (target <= {4 * args.factor}) {verdict}"
        )


if __name__ == "__main__":
    main()
