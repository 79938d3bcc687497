"""Example agent that uses an MCP server (needs `pip install mcp`).

It speaks the trialrun JSONL protocol on stdin/stdout and reaches its MCP servers through the
commands trialrun hands it in TRIALRUN_MCP_SERVERS (outside trialrun: the real server). Those
commands start trialrun's MCP proxy, which records the server's answers or replays them.
"""

import asyncio
import json
import os
import sys

from mcp import Client, StdioServerParameters

DEFAULT_SERVERS = {"docs": {"command": sys.executable, "args": ["server/docs_server.py"]}}


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def server_parameters(name):
    """A URL for a streamable-HTTP server (transport: http), stdio parameters otherwise."""
    servers = json.loads(os.environ.get("TRIALRUN_MCP_SERVERS") or "null")
    server = (servers or {"mcpServers": DEFAULT_SERVERS})["mcpServers"][name]
    if "url" in server:
        return server["url"]
    env = {**os.environ, **server.get("env", {})}
    return StdioServerParameters(command=server["command"], args=server["args"], env=env)


async def triage(ticket):
    async with Client(server_parameters("docs")) as docs:
        found = await docs.call_tool("search_docs", {"q": ticket})
    if found.is_error:
        raise RuntimeError(f"search_docs failed: {found.content}")
    hits = json.loads(found.content[0].text)["hits"]
    reply = hits[0]["text"] if hits else "A support engineer will get back to you."
    return {"category": "account" if hits else "other", "reply": reply}


def main():
    task = json.loads(sys.stdin.readline())
    ticket = task["input"].get("ticket", "")
    print(f"searching docs for {ticket!r}", file=sys.stderr)
    send({"type": "final_output", "output": asyncio.run(triage(ticket))})


if __name__ == "__main__":
    main()
