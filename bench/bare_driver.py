"""The floor a replay harness is measured against: start each agent, feed it, read it, nothing else.

    python bench/bare_driver.py MANIFEST.json [-j N]

The manifest (written by replay_bench.py beside each generated suite) names the agent command, its
working directory and, per case, the task input and the cassette file. For each case the driver
reads the cassette into a dict keyed by (tool, canonical arguments), starts the agent in a
session of its own (as trialrun does), sends
``task_start``, answers each ``tool_call`` from the dict and stops at ``final_output``. No checks,
no events, no artifacts. ``-j N`` runs N cases at a time on threads (the work is waiting on pipes).
Exits 1 if an agent ends without a final output or asks for a call the cassette does not hold,
so a broken suite cannot pass for a fast one. Standard library only: its start-up is the floor too.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

Answers = dict[tuple[str, str], dict[str, Any]]


def canonical(args: Any) -> str:
    return json.dumps(args, sort_keys=True, separators=(",", ":"))


def load_answers(cassette: str) -> Answers:
    with open(cassette, encoding="utf-8") as f:
        entries = [json.loads(line) for line in f if line.strip()]
    return {(e["tool"], canonical(e["args"])): e for e in entries}


def send(stdin: Any, message: dict[str, Any]) -> None:
    stdin.write(json.dumps(message, separators=(",", ":")) + "\n")
    stdin.flush()


def run_case(command: list[str], cwd: str, case: dict[str, Any]) -> bool:
    answers = load_answers(case["cassette"])
    # A session of its own, as trialrun gives its agents (to stop them by process group): with
    # the kernel's autogroup scheduler on, each session is scheduled as its own group, so on a
    # loaded machine the floor must not get less CPU than the harness it is compared with.
    proc = subprocess.Popen(
        command,
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    finished = False
    try:
        send(proc.stdin, {"type": "task_start", "task_id": case["id"], "input": case["input"]})
        for line in proc.stdout:
            message = json.loads(line)
            if message["type"] == "final_output":
                finished = True
                break
            entry = answers[(message["name"], canonical(message["args"]))]
            reply = {
                "type": "tool_result",
                "call_id": message["call_id"],
                "ok": entry.get("ok", True),
                "result": entry.get("result"),
                "error": entry.get("error"),
            }
            send(proc.stdin, reply)
    except (KeyError, BrokenPipeError):
        finished = False
    finally:
        proc.stdin.close()
        proc.wait()
    return finished


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("manifest")
    parser.add_argument("-j", "--jobs", type=int, default=1)
    args = parser.parse_args()
    with open(args.manifest, encoding="utf-8") as f:
        manifest = json.load(f)
    command, cwd, cases = manifest["command"], manifest["cwd"], manifest["cases"]
    if args.jobs <= 1:
        finished = [run_case(command, cwd, case) for case in cases]
    else:
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            finished = list(pool.map(lambda case: run_case(command, cwd, case), cases))
    failed = [case["id"] for case, ok in zip(cases, finished, strict=True) if not ok]
    if failed:
        print(f"bare driver: {len(failed)} case(s) ended without a final output: {failed[:5]}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
