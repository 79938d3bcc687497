"""Record and replay MCP servers at the JSON-RPC level (``trialrun mcp-proxy``).

The proxy is stdlib only: it never imports the ``mcp`` package, so it runs beside any client and
any server, of either protocol era. What the runner needs is here:

* ``proxy_command(...)`` builds the argv that launches the stdio proxy in front of a server;
* ``read_events(path)`` reads the per-call events the proxy appends while it runs;
* ``load_cassette(path)`` validates a cassette (``CassetteError`` names file and line);
  ``read_cassette(path)`` collects every problem instead of stopping at the first.

The file format and the replay rules are documented in docs/mcp.md.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from trialrun.mcp_proxy.cassette import (
    CallRecord,
    ExchangeRecord,
    McpCassette,
    load_cassette,
    read_cassette,
)
from trialrun.mcp_proxy.events import read_events

__all__ = [
    "CallRecord",
    "ExchangeRecord",
    "McpCassette",
    "load_cassette",
    "proxy_command",
    "read_cassette",
    "read_events",
]

Mode = Literal["record", "replay", "update"]
"""``update``: record, but a ``tools/call`` an unused old recording matches is answered from it
(its line copied), the rest reaches the server and is recorded (``mcp_proxy.update``)."""


def proxy_command(
    server_command: Sequence[str],
    *,
    cassette: str | Path,
    mode: Mode,
    name: str,
    events: str | Path | None = None,
    python: str | None = None,
    update_from: str | Path | None = None,
    keep_unused: bool = False,
) -> list[str]:
    """The argv that runs ``server_command`` behind the stdio proxy.

    ``[python, "-m", "trialrun", "mcp-proxy", "--cassette", C, "--mode", M, "--name", N,
    "--events", E, "--", *server_command]``; ``python`` defaults to ``sys.executable``. In
    replay the server command is kept (it documents the cassette) but never started. Update
    mode reads the old recordings from ``update_from`` (default: the cassette itself) and keeps
    the unused ones with ``keep_unused``.
    """
    if mode not in ("record", "replay", "update"):
        raise ValueError(f"mode must be 'record', 'replay' or 'update', found {mode!r}")
    if mode != "replay" and not server_command:
        raise ValueError(f"{mode} mode needs the MCP server command")
    if mode != "update" and (update_from is not None or keep_unused):
        raise ValueError("update_from and keep_unused go with mode 'update'")
    argv = [python or sys.executable, "-m", "trialrun", "mcp-proxy"]
    argv += ["--cassette", str(cassette), "--mode", mode, "--name", name]
    if events is not None:
        argv += ["--events", str(events)]
    if update_from is not None:
        argv += ["--update-from", str(update_from)]
    if keep_unused:
        argv.append("--keep-unused")
    return [*argv, "--", *server_command]
