"""A raw stdio JSON-RPC server that answers each tools/call only when its gate lets it.

Usage: gated_server.py GATE_FIFO. Before each answer it reads one byte from GATE_FIFO (a named
pipe the test writes to), so the test decides when an answer exists: a server slow to answer
(a heavy import, a cold cache) without any clock. Other requests are answered at once.
"""

from __future__ import annotations

import json
import sys
from typing import IO, Any


def answer(message: dict[str, Any], gate: IO[bytes]) -> dict[str, Any] | None:
    if message["method"] != "tools/call":
        return {}
    if not gate.read(1):
        return None  # the test closed the gate for good: never answer
    text = f"answer to {message['params']['arguments']}"
    return {"content": [{"type": "text", "text": text}], "isError": False}


def main() -> None:
    # Opening blocks until the test opens the pipe for writing, so it waits for the first call.
    gate: IO[bytes] | None = None
    for line in sys.stdin:
        message = json.loads(line)
        if "id" not in message or "method" not in message:
            continue
        if gate is None and message["method"] == "tools/call":
            gate = open(sys.argv[1], "rb")  # noqa: SIM115 (kept open across calls)
        result = answer(message, gate) if gate is not None else {}
        if result is None:
            return
        reply = {"jsonrpc": "2.0", "id": message["id"], "result": result}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
