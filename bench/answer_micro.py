"""Python cost of answering one replayed tool call, without the agent or the pipes.

    python bench/answer_micro.py [--calls 5000] [--repeat 5]

Feeds ``--calls`` tool_call lines of the deep benchmark's shape, one at a time, to the session's
answering loop (``_Session._answer_lent``, what runs on the lent thread) over in-memory pipes
whose writes go nowhere, and prints the best time per message: parsing, the canonical args and
the cassette lookup (its index built at the first one), the two events, the tool call record
and the encoded answer. Compare it
with the blocking bare driver's ~20 us (``bench/deep_bare_driver.py --sync``: json.loads, one
sorted json.dumps for the key, one json.dumps for the answer).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterator

from trialrun.conversation.lines import LineReader
from trialrun.conversation.session import Limits, _Session
from trialrun.tools.cassette import Cassette, ReplayBackend


class MemoryPipes:
    """Stands in for ``pump.LentPipes``: one line comes in per wait, answers vanish."""

    stopping = False

    def __init__(self, lines: list[bytes]) -> None:
        self.reader = LineReader(1 << 26)
        self._lines: Iterator[bytes] = iter(lines)

    def fill(self, timeout_s: float) -> str:
        self.reader.buffer += next(self._lines)
        return "ready"

    def write(self, data: bytes, timeout_s: float) -> str:
        return "sent"


class NoAgent:
    channel = "stdio"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cassette.jsonl"
        path.write_text(
            "".join(
                json.dumps(
                    {
                        "tool": "lookup",
                        "args": {"q": f"case0000-{i}"},
                        "ok": True,
                        "result": {"hit": i, "text": "lorem ipsum " * 4},
                    }
                )
                + "\n"
                for i in range(args.calls)
            )
        )
        cassette = Cassette.load(path)
    lines = [
        json.dumps(
            {
                "type": "tool_call",
                "name": "lookup",
                "call_id": f"c{i}",
                "args": {"q": f"case0000-{i}"},
            }
        ).encode()
        + b"\n"
        for i in range(args.calls)
    ]
    lines.append(b'{"type": "final_output", "output": {}}\n')
    limits = Limits(wall_ms=None, idle_ms=60_000, max_message_bytes=1 << 26, kill_grace_ms=100)
    best = float("inf")
    for _ in range(args.repeat):
        # The first lookup builds the cassette's index (a canonical key per entry): counted too,
        # the deep case pays it.
        session = _Session("case0000", ReplayBackend(cassette.fresh(), None), {"lookup"}, limits)
        session._started = time.monotonic()
        pipes = MemoryPipes(lines)
        started = time.perf_counter()
        session._answer_lent(NoAgent(), pipes)  # type: ignore[arg-type]
        best = min(best, time.perf_counter() - started)
    print(f"{args.calls} calls: best {best / args.calls * 1e6:.1f} us per message")


if __name__ == "__main__":
    main()
