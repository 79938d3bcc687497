"""The JSONL agent protocol for the refund agents: read runner messages, write agent messages."""

from __future__ import annotations

import json
import sys
from typing import Any

_next_call = 0


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def receive() -> dict[str, Any]:
    line = sys.stdin.readline()
    if not line:
        sys.exit("refund agent: stdin closed while waiting for a message")
    message: dict[str, Any] = json.loads(line)
    return message


def task_input() -> Any:
    return receive()["input"]


def call_tool(name: str, args: dict[str, Any]) -> dict[str, Any]:
    """Send a tool_call and return its tool_result message."""
    global _next_call
    _next_call += 1
    send({"type": "tool_call", "name": name, "call_id": f"c{_next_call}", "args": args})
    return receive()


def final(output: dict[str, Any]) -> None:
    send({"type": "final_output", "output": output})
