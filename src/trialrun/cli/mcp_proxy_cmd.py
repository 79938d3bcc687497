"""``trialrun mcp-proxy``: record or replay an MCP server, over stdio or streamable HTTP.

stdio: ``trialrun mcp-proxy --cassette FILE --mode record|replay|update [--name N]
[--events FILE] [--update-from FILE] [--keep-unused] -- SERVER CMD...``; the proxy is itself a
stdio MCP server (stdout carries protocol only). HTTP: ``trialrun mcp-proxy --http HOST:PORT
--cassette-dir DIR --mode record|replay|update [--events-dir DIR] [--token TEXT] [--keep-unused]
-- SERVER CMD...``; the base URL is the first line on stdout (with ``--token`` or
``TRIALRUN_MCP_PROXY_TOKEN``, clients use ``<url>/key/<token>/run/<id>/mcp``; the printed URL
never holds the token).

Exit codes: 0 the session ended (EOF, SIGTERM, SIGINT), 1 the recorded server died mid-session
or a request went unanswered (stdio: the cassette is then not written), 2 invalid input (a
missing or corrupt cassette, a server command that cannot start). Start-up is kept light:
nothing but the stdlib proxy modules is imported on this path.
"""

from __future__ import annotations

import math
from pathlib import Path

import click

from trialrun.cli.serve_options import (
    address_option,
    directory_option,
    file_option,
    mode_option,
    token_option,
    warn_if_exposed,
)


def _finite(value: float | None) -> float | None:
    # FloatRange lets nan and inf through: neither is a number of seconds to wait.
    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"expected a finite number of seconds, found {value}")
    return value


@click.command(
    "mcp-proxy",
    short_help="Record or replay an MCP server (stdio or streamable HTTP).",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@mode_option(
    ("record", "replay", "update"),
    "record: forward to the live server and write the cassette; replay: answer from it; "
    "update: answer each tools/call an unused recording matches from it, forward the rest, "
    "and write the updated cassette.",
)
@file_option("--cassette", "stdio: the cassette file (JSONL).")
@click.option("--name", help="Server name in events and the cassette header.")
@file_option("--events", "stdio: append one JSON line per tools/call to this file.")
@address_option("--http", "http_address", "Serve streamable HTTP.")
@directory_option("--cassette-dir", "HTTP: one cassette per run, DIR/<run-id>.jsonl.")
@directory_option("--events-dir", "HTTP: one events file per run, DIR/<run-id>.jsonl.")
@token_option("TRIALRUN_MCP_PROXY_TOKEN")
@file_option(
    "--update-from",
    "stdio update: the old cassette to answer from [the --cassette file, replaced at the end].",
)
@click.option(
    "--keep-unused",
    is_flag=True,
    help="update: keep the old tools/call recordings no call used, after the others.",
)
@click.option(
    "--answer-timeout",
    type=click.FloatRange(min=0),
    callback=lambda ctx, param, value: _finite(value),
    default=None,
    metavar="SECONDS",
    help="stdio record: after the input ends, how long the server gets to answer every request "
    "already sent [30]; a request still unanswered then fails the session and the cassette is "
    "not written.",
)
@click.argument("server_command", nargs=-1, type=click.UNPROCESSED)
def mcp_proxy(
    mode: str,
    cassette: Path | None,
    name: str | None,
    events: Path | None,
    http_address: str | None,
    cassette_dir: Path | None,
    events_dir: Path | None,
    token: str | None,
    answer_timeout: float | None,
    update_from: Path | None,
    keep_unused: bool,
    server_command: tuple[str, ...],
) -> int:
    """Record or replay the MCP server started by SERVER_COMMAND (given after --)."""
    if mode != "replay" and not server_command:
        raise click.UsageError(f"{mode} mode needs the MCP server command after '--'")
    if mode != "update" and (update_from is not None or keep_unused):
        raise click.UsageError("--update-from and --keep-unused go with --mode update")
    if http_address is None:
        if cassette is None:
            raise click.UsageError("stdio mode needs --cassette FILE (or use --http HOST:PORT)")
        if cassette_dir is not None or events_dir is not None or token is not None:
            raise click.UsageError("--cassette-dir, --events-dir and --token go with --http")
        from trialrun.mcp_proxy.stdio import ANSWER_TIMEOUT_SECONDS, run_stdio_proxy

        return run_stdio_proxy(
            mode=mode,
            cassette=cassette,
            server_command=server_command,
            name=name or cassette.stem,
            events=events,
            answer_timeout=ANSWER_TIMEOUT_SECONDS if answer_timeout is None else answer_timeout,
            update_from=update_from,
            keep_unused=keep_unused,
        )
    if answer_timeout is not None or update_from is not None:
        raise click.UsageError("--answer-timeout and --update-from go with stdio (--cassette)")
    from trialrun.cli.addresses import parse_host_port

    host, port = parse_host_port(http_address, "--http")
    if cassette_dir is None:
        raise click.UsageError("--http needs --cassette-dir DIR (one cassette per run)")
    if cassette is not None or events is not None:
        raise click.UsageError("--cassette and --events are for stdio; use --cassette-dir")
    from trialrun.mcp_proxy.http import McpHttpProxy, serve_http

    warn_if_exposed(host, "trialrun mcp-proxy", token or None)
    proxy = McpHttpProxy(
        mode=mode,
        cassette_dir=cassette_dir,
        server_command=server_command,
        name=name or "mcp",
        events_dir=events_dir,
        token=token or None,
        keep_unused=keep_unused,
    )
    return serve_http(host, port, proxy)
