"""A small real MCP server (mcp 2.x MCPServer) that the proxy tests record through.

Tools: ``search_docs`` (plain result), ``slow_index`` (reports progress), ``create_issue``
(raises: a tool-level error), ``lookup_user`` (a JSON-RPC error), ``big_result`` (a result of
several MB), ``stamp`` (a counter, so repeated identical calls get different answers),
``crash_server`` (the process exits mid-call). Also a resource and a prompt.

Run ``python docs_server.py`` (stdio). ``DOCS_SERVER_LOG`` names a file that gets one line per
tool call, so a test can count the calls that really reached the server; ``DOCS_SERVER_PID``
names a file that gets the server's process id.
"""

from __future__ import annotations

import os

from mcp import MCPError
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("real-docs", version="1.0.0", instructions="Search the product docs.")
_counter = {"stamp": 0}


def _log(line: str) -> None:
    path = os.environ.get("DOCS_SERVER_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")


@server.tool()
def search_docs(q: str, limit: int = 3) -> dict[str, object]:
    """Search the docs."""
    _log(f"search_docs {q}")
    hits = [f"{q} - article {i}" for i in range(1, limit + 1)]
    return {"query": q, "hits": hits}


@server.tool()
async def slow_index(n: int, ctx: Context) -> str:
    """Index n documents, reporting progress."""
    _log(f"slow_index {n}")
    for i in range(n):
        await ctx.report_progress(i + 1, n, f"step {i + 1}")
    return f"indexed {n}"


@server.tool()
def create_issue(title: str) -> str:
    """Always fails, like a tracker that is down."""
    _log(f"create_issue {title}")
    raise ToolError(f"tracker unavailable for {title!r}")


@server.tool()
def lookup_user(user_id: str) -> str:
    """A protocol-level failure: unknown users are a JSON-RPC error, not a tool result."""
    _log(f"lookup_user {user_id}")
    raise MCPError(-32602, f"no such user: {user_id}", {"user_id": user_id})


@server.tool()
def big_result(mb: int) -> str:
    """A result of ``mb`` megabytes."""
    _log(f"big_result {mb}")
    return "x" * (mb * 1024 * 1024)


@server.tool()
def stamp() -> int:
    """A counter: each call answers one more than the last."""
    _counter["stamp"] += 1
    _log(f"stamp {_counter['stamp']}")
    return _counter["stamp"]


@server.tool()
def crash_server() -> str:
    """The server dies mid-call, as a buggy server would."""
    _log("crash_server")
    os._exit(3)


@server.resource("docs://readme")
def readme() -> str:
    """The readme."""
    return "Welcome to the docs."


@server.prompt()
def summarize(topic: str) -> str:
    """Summarize a topic."""
    return f"Summarize {topic}."


if __name__ == "__main__":
    if os.environ.get("DOCS_SERVER_PID"):
        with open(os.environ["DOCS_SERVER_PID"], "w", encoding="utf-8") as handle:
            handle.write(str(os.getpid()))
    server.run()
