"""The bare driver of bench/deep_bench.py: the floor that `trialrun run` is compared with.

    python bench/deep_bare_driver.py SUITE_DIR [--sync]

It does what a replay harness cannot avoid for the deep case and nothing else: load the one
cassette into a dict keyed by (tool, args), start the agent, send ``task_start``, answer every
``tool_call`` from the dict, read ``final_output``. No deadlines, no checks, no events, no
artifacts. By default it runs on asyncio subprocess pipes, the architecture trialrun uses (one
event loop driving many agents); ``--sync`` uses plain blocking pipes, the absolute floor.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

Answers = dict[tuple[str, str], Any]


def load(suite: Path) -> tuple[Answers, dict[str, Any], list[str]]:
    (case_file,) = (suite / "cases").glob("*.yaml")
    case_id = case_file.stem
    answers: Answers = {}
    with open(suite / "cassettes" / f"{case_id}.jsonl", encoding="utf-8") as cassette:
        for line in cassette:
            entry = json.loads(line)
            answers[entry["tool"], json.dumps(entry["args"], sort_keys=True)] = entry["result"]
    calls = len(answers)
    start = {"type": "task_start", "task_id": case_id, "input": {"calls": calls, "prefix": case_id}}
    return answers, start, [sys.executable, "agent.py"]


def answer(answers: Answers, line: bytes) -> bytes | None:
    message = json.loads(line)
    if message["type"] == "final_output":
        return None
    result = answers[message["name"], json.dumps(message["args"], sort_keys=True)]
    reply = {"type": "tool_result", "call_id": message["call_id"], "ok": True, "result": result}
    return (json.dumps(reply) + "\n").encode()


async def drive_async(suite: Path) -> None:
    answers, start, argv = load(suite)
    agent = await asyncio.create_subprocess_exec(
        *argv, cwd=suite, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert agent.stdin is not None and agent.stdout is not None
    agent.stdin.write((json.dumps(start) + "\n").encode())
    while (reply := answer(answers, await agent.stdout.readuntil(b"\n"))) is not None:
        agent.stdin.write(reply)
        await agent.stdin.drain()
    agent.stdin.close()
    await agent.wait()


def drive_sync(suite: Path) -> None:
    answers, start, argv = load(suite)
    agent = subprocess.Popen(argv, cwd=suite, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert agent.stdin is not None and agent.stdout is not None
    agent.stdin.write((json.dumps(start) + "\n").encode())
    agent.stdin.flush()
    for line in agent.stdout:
        reply = answer(answers, line)
        if reply is None:
            break
        agent.stdin.write(reply)
        agent.stdin.flush()
    agent.stdin.close()
    agent.wait()


if __name__ == "__main__":
    suite_dir = Path(sys.argv[1])
    if "--sync" in sys.argv[2:]:
        drive_sync(suite_dir)
    else:
        asyncio.run(drive_async(suite_dir))
