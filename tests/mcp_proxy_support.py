"""Helpers shared by the MCP proxy tests: the real test server, a real client, a raw pipe.

The client is the MCP SDK's own ``mcp.Client`` (v2), driven in-process with ``anyio.run``; the
proxy and the server are real processes. ``RawProxy`` speaks newline-delimited JSON-RPC to a
proxy process directly, for what no SDK client would send.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from paths import MCP_SERVERS_DIR
from trialrun.mcp_proxy import proxy_command

DOCS_SERVER = MCP_SERVERS_DIR / "docs_server.py"
SERVER_COMMAND = [sys.executable, str(DOCS_SERVER)]
ABSENT_SERVER = [str(MCP_SERVERS_DIR / "no-such-server")]
MODERN = "2026-07-28"
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
}

# One scripted agent session: ("list",) lists tools, ("call", tool, args[, meta]) calls one.
Step = tuple[Any, ...]
STANDARD_STEPS: list[Step] = [
    ("list",),
    ("call", "search_docs", {"q": "reset password"}),
    ("call", "slow_index", {"n": 3}),
    ("call", "create_issue", {"title": "login broken"}),
    ("call", "lookup_user", {"user_id": "u-404"}),
    ("call", "stamp", {}),
    ("call", "stamp", {}),
]


def stdio_params(
    cassette: Path,
    mode: str,
    *,
    events: Path | None = None,
    server: Sequence[str] = SERVER_COMMAND,
    name: str = "docs",
    env: dict[str, str] | None = None,
) -> Any:
    from mcp import StdioServerParameters

    argv = proxy_command(server, cassette=cassette, mode=mode, name=name, events=events)  # type: ignore[arg-type]
    return StdioServerParameters(command=argv[0], args=argv[1:], env=env)


async def scripted_agent(client: Any, steps: Sequence[Step]) -> list[Any]:
    """Run the steps; the transcript is what the agent saw, as plain JSON."""
    from mcp import MCPError

    transcript: list[Any] = []
    for step in steps:
        if step[0] == "list":
            listing = await client.list_tools()
            transcript.append(["list", [tool.name for tool in listing.tools]])
            continue
        _, tool, args, *rest = step
        progress: list[Any] = []

        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            progress.append([done, total, message])  # noqa: B023 - consumed before the next step

        try:
            result = await client.call_tool(
                tool, args, progress_callback=on_progress, meta=rest[0] if rest else None
            )
            seen: Any = result.model_dump(mode="json", by_alias=True, exclude_none=True)
        except MCPError as exc:
            seen = {"rpc_error": {"code": exc.error.code, "message": exc.error.message}}
        transcript.append(["call", tool, seen, progress])
    return transcript


def run_agent(server: Any, steps: Sequence[Step], *, mode: str = "auto") -> list[Any]:
    """Connect a real ``mcp.Client`` (stdio parameters or a URL), run the steps, disconnect."""
    import anyio
    from mcp import Client

    async def session() -> list[Any]:
        async with Client(server, mode=mode) as client:
            return [["era", client.protocol_version], *await scripted_agent(client, steps)]

    return anyio.run(session)


def events_sequence(path: Path) -> list[tuple[str, Any, bool]]:
    from trialrun.mcp_proxy import read_events

    return [(e["tool"], e["args"], e["ok"]) for e in read_events(path)]


class RawProxy:
    """A proxy process spoken to line by line; replies are collected by a reader thread."""

    def __init__(self, argv: Sequence[str], *, env: dict[str, str] | None = None) -> None:
        self.process = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, **(env or {})},
        )
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def send(self, message: Any) -> None:
        assert self.process.stdin is not None
        data = message if isinstance(message, bytes) else json.dumps(message).encode()
        self.process.stdin.write(data + b"\n")
        self.process.stdin.flush()

    def recv(self, timeout: float = 15.0) -> Any:
        line = self._lines.get(timeout=timeout)
        if line is None:
            raise EOFError("the proxy closed its stdout")
        return json.loads(line)

    def recv_until_response(self, request_id: Any, timeout: float = 15.0) -> list[Any]:
        """Every message up to and including the response to ``request_id``."""
        received = []
        while True:
            message = self.recv(timeout)
            received.append(message)
            if message.get("id") == request_id and "method" not in message:
                return received

    def close(self, timeout: float = 15.0) -> tuple[int, str]:
        """EOF on stdin; the exit code and stderr."""
        assert self.process.stdin is not None and self.process.stderr is not None
        self.process.stdin.close()
        code = self.process.wait(timeout)
        return code, self.process.stderr.read().decode()


def call(request_id: Any, tool: str, args: Any, **meta: Any) -> dict[str, Any]:
    """A 2026-07-28 tools/call request as a raw JSON-RPC message."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": tool, "arguments": args, "_meta": {**MODERN_META, **meta}},
    }
