"""``trialrun gateway``: serve the model gateway until SIGINT or SIGTERM.

The first line on stdout is the gateway's base URL (flushed at once, so a script can read it
and start its agents with ``OPENAI_BASE_URL=<url>/run/<run-id>/openai/v1`` and
``ANTHROPIC_BASE_URL=<url>/run/<run-id>/anthropic``). Each run id gets the cassette
``DIR/<run-id>.jsonl``, opened on the run's first request; at SIGINT or SIGTERM every open run
is closed cleanly (in record mode its cassette is written) and a summary goes to stderr.
With ``--token`` (or ``TRIALRUN_GATEWAY_TOKEN``) only requests under ``<url>/key/<token>`` are
served; the printed URL never holds the token. A ``--listen`` address other machines can reach
is served with a warning on stderr.

Exit codes: 0 after SIGTERM; 1 when a replayed request found no recording (a cassette
mismatch) or its run's cassette was missing or corrupt; 2 for invalid input (rules or prices
file, ``--upstream``, ``--listen``, a missing cassette directory in replay, a port in use);
130 after SIGINT.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, cast

import click

from trialrun.cli import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK
from trialrun.cli.serve_options import (
    address_option,
    directory_option,
    file_option,
    mode_option,
    token_option,
    warn_if_exposed,
)

if TYPE_CHECKING:
    from trialrun.gateway import Mode


@click.command(short_help="Serve the model gateway: record and replay OpenAI and Anthropic calls.")
@directory_option(
    "--cassette-dir", "Directory of the cassettes, one DIR/<run-id>.jsonl per run.", required=True
)
@mode_option(
    ("record", "replay", "live"),
    "record: forward and write cassettes; replay: answer from them; live: forward only.",
)
@address_option(
    "--listen", "listen", "Address to serve on (port 0: any free port).", default="127.0.0.1:0"
)
@click.option(
    "--upstream",
    "upstreams",
    multiple=True,
    metavar="PROVIDER=URL",
    help=(
        "Where a provider's calls go in record and live mode (openai, anthropic, azure, gemini, "
        "bedrock; azure=URL is required to record Azure)."
    ),
)
@file_option(
    "--rules", "Extra normalization rules (YAML/JSON: strip_keys, strip_paths, replace_text...)."
)
@click.option(
    "--no-default-rules",
    is_flag=True,
    help="Match on the request as sent (after --rules), without the default volatile-text rules.",
)
@directory_option(
    "--workdir", "The agents' working directory, replaced by <workdir> in message text."
)
@file_option(
    "--prices",
    "Price table (YAML/JSON: {model: {input_per_mtok, output_per_mtok}}) for call costs.",
)
@click.option(
    "--lenient",
    is_flag=True,
    help="On a replay miss, serve the endpoint's next unused recording with a drift warning.",
)
@click.option("-q", "--quiet", is_flag=True, help="Log only warnings, not every model call.")
@token_option("TRIALRUN_GATEWAY_TOKEN")
def gateway(
    cassette_dir: Path,
    mode: str,
    listen: str,
    upstreams: tuple[str, ...],
    rules: Path | None,
    no_default_rules: bool,
    workdir: Path | None,
    prices: Path | None,
    lenient: bool,
    quiet: bool,
    token: str | None,
) -> int:
    """Record and replay model calls for agents pointed at this server."""
    from trialrun.cli.addresses import parse_host_port
    from trialrun.gateway.standalone import GatewaySettings, serve_until_signal

    host, port = parse_host_port(listen, "--listen")
    settings = GatewaySettings(
        cassette_dir, cast("Mode", mode), listen, host, port, _parse_upstreams(upstreams),
        rules, not no_default_rules, workdir, prices, lenient, quiet, token or None,
    )  # fmt: skip
    warn_if_exposed(host, "trialrun gateway", settings.token)
    served = serve_until_signal(settings, on_ready=_print_url)
    lines, mismatches = served.summary(settings)
    for line in lines:
        click.echo(line, err=True)
    if served.interrupted:
        return EXIT_INTERRUPTED
    return EXIT_FAILED if mismatches or served.unreadable() else EXIT_OK


def _print_url(url: str) -> None:
    """The first line on stdout, flushed at once: a script waits for it to start its agents."""
    click.echo(url)
    sys.stdout.flush()


def _parse_upstreams(values: tuple[str, ...]) -> dict[str, str]:
    from trialrun.gateway.routes import PROVIDERS

    upstreams: dict[str, str] = {}
    for value in values:
        provider, sep, url = value.partition("=")
        if not sep or provider not in PROVIDERS or not url:
            raise click.BadParameter(
                f"expected PROVIDER=URL with PROVIDER one of {', '.join(PROVIDERS)}; "
                f"found {value!r}",
                param_hint="--upstream",
            )
        upstreams[provider] = url
    return upstreams
