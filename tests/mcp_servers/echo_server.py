"""A stdlib stdio MCP server whose one tool echoes its query, logging every call it receives.

Usage: ``echo_server.py LOG_FILE``. Each ``tools/call`` that reaches the server appends one
line ``<tool> <canonical arguments>`` to LOG_FILE before it is answered, so a test tells
exactly which calls a proxy forwarded. ``initialize`` and ``tools/list`` are answered too;
notifications are read and ignored. The answer to ``search`` is ``found <q>``; ``ECHO_PREFIX``
(environment) replaces ``found``, so a test can make the server answer differently.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

TOOLS = [
    {
        "name": "search",
        "description": "Echo a query.",
        "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}},
    }
]


def answer(method: str, params: dict[str, Any], log: str) -> dict[str, Any]:
    if method == "initialize":
        return {
            "protocolVersion": params.get("protocolVersion", "2025-11-25"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "echo", "version": "1.0"},
        }
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "tools/call":
        arguments = params.get("arguments") or {}
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(f"{params['name']} {json.dumps(arguments, sort_keys=True)}\n")
        prefix = os.environ.get("ECHO_PREFIX", "found")
        text = f"{prefix} {arguments.get('q')}"
        return {"content": [{"type": "text", "text": text}], "isError": False}
    return {}


def main() -> None:
    log = sys.argv[1]
    for line in sys.stdin:
        message = json.loads(line)
        if "id" not in message or "method" not in message:
            continue
        result = answer(message["method"], message.get("params") or {}, log)
        reply = {"jsonrpc": "2.0", "id": message["id"], "result": result}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
