"""A deterministic stand-in judge: ``python -m trialrun.compare.fake_judge --prefer MODE``.

It speaks the judge protocol of ``trialrun.compare.judge`` (reads ``{"task","rubric","a","b"}``
on stdin, prints ``{"winner","reason"}``) without any model, for tests and for users wiring up a
compare run before paying for a real judge. Modes:

* ``longer`` / ``shorter``: the longer (shorter) transcript wins; equal lengths tie. Consistent
  in both orders, so the two asks agree.
* ``A`` / ``B`` / ``tie``: always that answer. ``A`` and ``B`` are pure position bias, so the two
  orderings disagree (a split) unless the transcripts are the same.
* ``garbage``: prints text that is not JSON; ``refuse``: prints a refusal sentence; ``fail``:
  exits 3 with a message on stderr; ``hang``: sleeps ``--hang-seconds`` before answering ``tie``.

``--garbage-first N --state FILE`` prints garbage on the first N invocations that share FILE
(a counter), then follows ``--prefer``: the retry path of a real, occasionally sloppy judge.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

__all__ = ["MODES", "answer_for", "main"]

MODES = ("longer", "shorter", "A", "B", "tie", "garbage", "refuse", "fail", "hang")
GARBAGE = "I think the first one is better, probably."
REFUSAL = "I'm sorry, I can't help with that request."


def answer_for(mode: str, a: str, b: str) -> dict[str, str]:
    """The verdict of a model-free judge in ``mode`` for transcripts ``a`` and ``b``."""
    if mode in ("A", "B", "tie"):
        return {"winner": mode, "reason": f"fake judge always answers {mode}"}
    if mode not in ("longer", "shorter"):
        raise ValueError(f"expected one of longer, shorter, A, B, tie; found {mode!r}")
    if len(a) == len(b):
        return {"winner": "tie", "reason": f"both transcripts have {len(a)} characters"}
    a_wins = (len(a) > len(b)) == (mode == "longer")
    winner = "A" if a_wins else "B"
    return {"winner": winner, "reason": f"{winner} is {mode} ({len(a)} vs {len(b)} characters)"}


def _count_invocation(state: Path) -> int:
    """Increment the counter in ``state``; return how many invocations came before this one.

    Judges are asked concurrently, so the read and the write happen under an exclusive lock:
    without it two invocations can read the same count and both print garbage.
    """
    with open(state, "a+", encoding="utf-8") as counter:
        fcntl.flock(counter, fcntl.LOCK_EX)
        counter.seek(0)
        before = int(counter.read().strip() or "0")
        counter.seek(0)
        counter.truncate()
        counter.write(f"{before + 1}\n")
    return before


def _read_request(stdin_text: str) -> tuple[str, str] | str:
    """``(a, b)`` from the request, or a message saying what was wrong with it."""
    try:
        request = json.loads(stdin_text)
    except ValueError as error:
        return f"expected one JSON object on stdin, found invalid JSON ({error})"
    if not isinstance(request, dict):
        return f"expected a JSON object on stdin, found {type(request).__name__}"
    missing = [key for key in ("task", "rubric", "a", "b") if not isinstance(request.get(key), str)]
    if missing:
        return f"expected string fields task, rubric, a, b; missing or not a string: {missing}"
    return request["a"], request["b"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trialrun.compare.fake_judge")
    parser.add_argument("--prefer", choices=MODES, default="longer")
    parser.add_argument("--garbage-first", type=int, default=0, metavar="N")
    parser.add_argument("--state", type=Path, help="counter file shared by invocations")
    parser.add_argument("--hang-seconds", type=float, default=3600.0)
    options = parser.parse_args(argv)
    if options.garbage_first and options.state is None:
        parser.error("--garbage-first needs --state FILE to count invocations")
    request = _read_request(sys.stdin.read())
    if isinstance(request, str):
        print(f"fake_judge: {request}", file=sys.stderr)
        return 2
    if options.garbage_first and _count_invocation(options.state) < options.garbage_first:
        print(GARBAGE)
        return 0
    mode: str = options.prefer
    if mode == "garbage":
        print(GARBAGE)
        return 0
    if mode == "refuse":
        print(REFUSAL)
        return 0
    if mode == "fail":
        print("fake_judge: simulated failure (--prefer fail)", file=sys.stderr)
        return 3
    if mode == "hang":
        time.sleep(options.hang_seconds)
        mode = "tie"
    print(json.dumps(answer_for(mode, *request)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
