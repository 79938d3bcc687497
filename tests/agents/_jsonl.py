"""Shared by the fake agents: read runner messages from stdin, write protocol lines to stdout.

Lines are written with ``ensure_ascii=False`` on purpose: non-ASCII text then really travels as
UTF-8 bytes, which is what the locale-independence tests need to see.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def send_raw(data: bytes) -> None:
    sys.stdout.flush()
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


def receive() -> dict[str, Any]:
    line = sys.stdin.readline()
    if not line:
        sys.exit("fake agent: stdin closed while waiting for a message")
    message: dict[str, Any] = json.loads(line)
    return message


def task_input() -> Any:
    """Wait for task_start and return its input."""
    return receive()["input"]


def call_tool(name: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    send({"type": "tool_call", "name": name, "call_id": call_id, "args": args})
    return receive()


def final(output: dict[str, Any]) -> None:
    send({"type": "final_output", "output": output})


def hang() -> None:
    import time

    while True:
        time.sleep(3600)
