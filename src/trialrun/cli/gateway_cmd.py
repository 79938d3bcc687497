"""``trialrun gateway``: serve the model gateway until SIGINT or SIGTERM.

The first line on stdout is the gateway's base URL (flushed at once, so a script can read it
and start its agents with ``OPENAI_BASE_URL=<url>/run/<run-id>/openai/v1`` and
``ANTHROPIC_BASE_URL=<url>/run/<run-id>/anthropic``). Each run id gets the cassette
``DIR/<run-id>.jsonl``, opened on the run's first request; at SIGINT or SIGTERM every open run
is closed cleanly (in record mode its cassette is written) and a summary goes to stderr.

Exit codes: 0 after SIGTERM; 1 when a replayed request found no recording (a cassette
mismatch) or its run's cassette was missing or corrupt; 2 for invalid input (rules or prices
file, ``--upstream``, ``--listen``, a missing cassette directory in replay, a port in use);
130 after SIGINT.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, cast

import click

from trialrun.cli import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK
from trialrun.cli.pathparam import PathParam

if TYPE_CHECKING:
    from trialrun.gateway import Mode, ModelCall


@click.command()
@click.option(
    "--cassette-dir",
    required=True,
    type=PathParam(file_okay=False, path_type=Path),
    help="Directory of the cassettes, one DIR/<run-id>.jsonl per run.",
)
@click.option(
    "--mode",
    required=True,
    type=click.Choice(["record", "replay", "live"]),
    help="record: forward and write cassettes; replay: answer from them; live: forward only.",
)
@click.option(
    "--listen",
    default="127.0.0.1:0",
    show_default=True,
    metavar="HOST:PORT",
    help="Address to serve on (port 0: any free port).",
)
@click.option(
    "--upstream",
    "upstreams",
    multiple=True,
    metavar="PROVIDER=URL",
    help="Where a provider's calls go in record and live mode (openai=URL, anthropic=URL).",
)
@click.option(
    "--rules",
    type=PathParam(dir_okay=False, path_type=Path),
    help="Extra normalization rules (YAML/JSON: strip_keys, strip_paths, replace_text...).",
)
@click.option(
    "--no-default-rules",
    is_flag=True,
    help="Match on the request as sent (after --rules), without the default volatile-text rules.",
)
@click.option(
    "--workdir",
    type=PathParam(file_okay=False, path_type=Path),
    help="The agents' working directory, replaced by <workdir> in message text.",
)
@click.option(
    "--prices",
    type=PathParam(dir_okay=False, path_type=Path),
    help="Price table (YAML/JSON: {model: {input_per_mtok, output_per_mtok}}) for call costs.",
)
@click.option(
    "--lenient",
    is_flag=True,
    help="On a replay miss, serve the endpoint's next unused recording with a drift warning.",
)
@click.option("-q", "--quiet", is_flag=True, help="Log only warnings, not every model call.")
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
) -> int:
    """Record and replay model calls for agents pointed at this server."""
    from trialrun.cli.addresses import parse_host_port
    from trialrun.errors import CassetteError, ConfigError
    from trialrun.gateway import Gateway
    from trialrun.gateway.normalize import load_rules
    from trialrun.gateway.usage import load_prices

    host, port = parse_host_port(listen, "--listen")
    run_mode = cast("Mode", mode)
    if mode == "replay" and not cassette_dir.is_dir():
        raise CassetteError("cassette directory not found (replay needs recorded cassettes)",
                            file=cassette_dir)  # fmt: skip
    if mode == "record":
        _writable_directory(cassette_dir)
    gw = Gateway(
        upstreams=_parse_upstreams(upstreams),
        normalization=load_rules(rules) if rules is not None else None,
        prices=load_prices(prices) if prices is not None else None,
        lenient=lenient,
        default_rules=not no_default_rules,
        auto_open=lambda run_id: (cassette_dir / f"{run_id}.jsonl", run_mode),
        workdir=workdir,
    )
    log_handler = _log_to_stderr(logging.WARNING if quiet else logging.INFO)
    stop = threading.Event()
    signals: list[int] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        signals.append(signum)
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            gw.start(host, port)
        except OSError as exc:
            raise ConfigError(f"cannot listen on {listen}: {exc.strerror or exc}") from None
        click.echo(gw.url)
        sys.stdout.flush()
        while not stop.wait(0.5):
            pass
    finally:
        try:
            closed = gw.close_all(clean=True)
        finally:
            gw.stop()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            logging.getLogger("trialrun.gateway").removeHandler(log_handler)
    unserved = gw.unserved()
    mismatches = _summarize(closed, cassette_dir, mode, len(unserved))
    # A run whose cassette is missing or corrupt could not replay at all: a failure too.
    unreadable = sum(1 for request in unserved if request.reason.startswith("cannot replay"))
    if signals and signals[0] == signal.SIGINT:
        return EXIT_INTERRUPTED
    return EXIT_FAILED if mismatches or unreadable else EXIT_OK


def _writable_directory(directory: Path) -> None:
    """Record mode writes a cassette at each run's end: find out now that it cannot."""
    import os

    from trialrun.base.fsutil import make_output_dir
    from trialrun.errors import ConfigError

    make_output_dir(directory)
    if not os.access(directory, os.W_OK | os.X_OK):
        raise ConfigError("cannot write to the cassette directory: permission denied",
                          file=directory)  # fmt: skip


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


def _log_to_stderr(level: int) -> logging.Handler:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("gateway: %(message)s"))
    logger = logging.getLogger("trialrun.gateway")
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False
    return handler


def _summarize(
    closed: dict[str, list[ModelCall]], cassette_dir: Path, mode: str, unserved: int
) -> int:
    """Print what each run did to stderr; returns how many replayed calls missed."""
    mismatches = 0
    for run_id, calls in sorted(closed.items()):
        failed = [call for call in calls if call.error]
        missed = sum(1 for call in failed if (call.error or "").startswith("cassette mismatch"))
        mismatches += missed
        line = f"run {run_id}: {len(calls)} model call(s), {len(failed)} failed"
        if missed:
            line += f" ({missed} cassette mismatch(es))"
        if mode == "record":
            line += f"; cassette written to {cassette_dir / (run_id + '.jsonl')}"
        click.echo(line, err=True)
    if unserved:
        click.echo(f"{unserved} request(s) were not served (unknown path, provider or run)",
                   err=True)  # fmt: skip
    return mismatches
