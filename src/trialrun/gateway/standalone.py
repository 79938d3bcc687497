"""The gateway as a server of its own (``trialrun gateway``): serve until SIGINT or SIGTERM.

Each run id gets the cassette ``DIR/<run-id>.jsonl``, opened on the run's first request; at the
signal every open run is closed cleanly (in record mode its cassette is written). The caller
prints: the base URL through ``on_ready``, the summary from the returned ``Served``.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from trialrun.base.words import counted, inflected
from trialrun.errors import CassetteError, ConfigError
from trialrun.gateway.runs import Mode, ModelCall
from trialrun.gateway.server import Gateway, UnservedRequest


@dataclass(frozen=True)
class GatewaySettings:
    """What ``trialrun gateway`` was asked to serve, its options parsed."""

    cassette_dir: Path
    mode: Mode
    listen: str  # as given, for the message when the address cannot be bound
    host: str
    port: int
    upstreams: dict[str, str]
    rules: Path | None = None
    default_rules: bool = True
    workdir: Path | None = None
    prices: Path | None = None
    lenient: bool = False
    quiet: bool = False
    token: str | None = None
    """The key every request must present (``/key/<token>/run/...``); None: no key."""


@dataclass(frozen=True)
class Served:
    """What the gateway did until it was stopped."""

    closed: dict[str, list[ModelCall]]
    unserved: list[UnservedRequest]
    interrupted: bool  # stopped by SIGINT (first signal), not SIGTERM

    def summary(self, settings: GatewaySettings) -> tuple[list[str], int]:
        """The stderr lines of each run and the unserved requests; and how many calls missed."""
        lines: list[str] = []
        mismatches = 0
        for run_id, calls in sorted(self.closed.items()):
            failed = [call for call in calls if call.error]
            missed = sum(1 for call in failed if (call.error or "").startswith("cassette mismatch"))
            mismatches += missed
            line = f"run {run_id}: {counted(len(calls), 'model call')}, {len(failed)} failed"
            if missed:
                line += f" ({counted(missed, 'cassette mismatch', 'cassette mismatches')})"
            if settings.prices is not None:
                line += f"; {run_cost(calls)}"
            if settings.mode == "record":
                line += f"; cassette written to {settings.cassette_dir / (run_id + '.jsonl')}"
            lines.append(line)
        if self.unserved:
            unserved = len(self.unserved)
            lines.append(f"{counted(unserved, 'request')} {inflected(unserved, 'was', 'were')} "
                         "not served (unknown path, provider or run)")  # fmt: skip
        return lines, mismatches

    def unreadable(self) -> int:
        """Requests of runs whose cassette is missing or corrupt: they could not replay at all."""
        return sum(1 for request in self.unserved if request.reason.startswith("cannot replay"))


def run_cost(calls: list[ModelCall]) -> str:
    """``cost $0.001234``, and which models the price table lacks (their calls are not in it)."""
    known = [call.cost_usd for call in calls if call.cost_usd is not None]
    unpriced = sorted({call.model or "unknown model" for call in calls
                       if call.cost_usd is None and not call.error})  # fmt: skip
    lacking = f"no price for {', '.join(repr(model) for model in unpriced)}"
    if not known:
        return f"cost unknown ({lacking})" if unpriced else "cost $0.000000"
    total = f"cost ${sum(known):.6f}"
    return f"{total} (without the calls of {lacking})" if unpriced else total


def build_gateway(settings: GatewaySettings) -> Gateway:
    """The gateway, its rules and prices loaded; the cassette directory checked for the mode."""
    from trialrun.gateway.normalize import load_rules
    from trialrun.gateway.usage import load_prices

    cassette_dir, mode = settings.cassette_dir, settings.mode
    if mode == "replay" and not cassette_dir.is_dir():
        raise CassetteError("cassette directory not found (replay needs recorded cassettes)",
                            file=cassette_dir)  # fmt: skip
    if mode == "record":
        _writable_directory(cassette_dir)
    return Gateway(
        upstreams=settings.upstreams,
        normalization=load_rules(settings.rules) if settings.rules is not None else None,
        prices=load_prices(settings.prices) if settings.prices is not None else None,
        lenient=settings.lenient,
        default_rules=settings.default_rules,
        auto_open=lambda run_id: (cassette_dir / f"{run_id}.jsonl", mode),
        workdir=settings.workdir,
        token=settings.token,
    )


def serve_until_signal(settings: GatewaySettings, on_ready: Callable[[str], None]) -> Served:
    """Serve until SIGINT or SIGTERM, then close every open run cleanly and stop."""
    gw = build_gateway(settings)
    log_handler = _log_to_stderr(logging.WARNING if settings.quiet else logging.INFO)
    stop = threading.Event()
    signals: list[int] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        signals.append(signum)
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            gw.start(settings.host, settings.port)
        except OSError as exc:
            raise ConfigError(
                f"cannot listen on {settings.listen}: {exc.strerror or exc}"
            ) from None
        on_ready(gw.url)
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
    return Served(closed, gw.unserved(), interrupted=bool(signals) and signals[0] == signal.SIGINT)


def _writable_directory(directory: Path) -> None:
    """Record mode writes a cassette at each run's end: find out now that it cannot."""
    import os

    from trialrun.base.fsutil import make_output_dir

    make_output_dir(directory)
    if not os.access(directory, os.W_OK | os.X_OK):
        raise ConfigError("cannot write to the cassette directory: permission denied",
                          file=directory)  # fmt: skip


def _log_to_stderr(level: int) -> logging.Handler:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("gateway: %(message)s"))
    logger = logging.getLogger("trialrun.gateway")
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False
    return handler
