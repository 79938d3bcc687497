"""The model gateway: a local HTTP server that records and replays an agent's model calls.

One ``Gateway`` serves any number of runs at once; the URL path says which run and provider a
request belongs to (``routes``). Per run, the mode decides what happens to a request:

* ``record``: forward it to the provider, pass the answer back chunk by chunk as it arrives (a
  stream is never buffered before the agent sees it), and keep the response for the cassette,
  which is written atomically when the run is closed cleanly (opened with ``update``, a
  request that matches an unused recording of the old cassette is answered from it instead);
* ``replay``: answer from the run's cassette, without network. A miss is an HTTP 400 in the
  provider's error shape whose message starts with ``cassette mismatch`` and names the nearest
  recording; with ``lenient`` the next unused recording of the endpoint is served instead, with a
  drift warning;
* ``live``: forward without recording.

A run opened with a key, and every run of a gateway started with a token, is served only to
requests whose path starts with ``/key/<key>`` (``base.accesskey``); any other gets a 401 that
says nothing about the run. Gateway-made errors (mismatch, path not served, run not open, no
key) carry ``x-should-retry: false``, which the official SDKs obey, and a status no client
retries (400, 401, 404, 405): a deterministic
failure fails once, at once. An unreachable upstream is a 502 the SDK may retry. Every request,
served or not, is logged (logger ``trialrun.gateway``) and becomes a ``ModelCall`` of its run
when the run is known; requests the gateway does not serve are also listed by ``unserved()``.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from trialrun.base.accesskey import REFUSED, key_matches, split_key, with_key
from trialrun.errors import CassetteError, ConfigError
from trialrun.gateway.cassette import ModelCassette, Recording, write_cassette
from trialrun.gateway.exchange import Exchange, Outcome, answer_kept, forward, replay
from trialrun.gateway.normalize import RequestNormalizer, request_key
from trialrun.gateway.providers import provider, provider_names
from trialrun.gateway.routes import RUN_ID_RULE, RouteError, is_valid_run_id, parse_route
from trialrun.gateway.runs import MODES, Mode, ModelCall, RunScope, RunState
from trialrun.gateway.usage import Price, cost_usd, load_prices
from trialrun.gateway.wire import Handler, guarded, read_body, send_error
from trialrun.httprec.jsonl import raw_lines
from trialrun.httprec.upstream import DEFAULT_TIMEOUT_S, SharedTls, Upstream

if TYPE_CHECKING:
    from trialrun.base.localserver import LocalHandler
    from trialrun.config.models import Normalization
    from trialrun.httprec.authority import RunAuthority
    from trialrun.httprec.front import HttpRecorder

LOG = logging.getLogger("trialrun.gateway")
CLOSE_TIMEOUT_S = 30.0
AutoOpen = Callable[[str], tuple[Path, Mode]]


@dataclass(frozen=True)
class UnservedRequest:
    """A request the gateway answered with its own error instead of a model response."""

    method: str
    target: str
    status: int
    reason: str
    run_id: str | None


class Gateway:
    """The model gateway. Start it, open runs, give each agent ``scope.env()``, close the runs."""

    def __init__(
        self,
        upstreams: Mapping[str, str] | None = None,
        normalization: Normalization | None = None,
        prices: Mapping[str, Price] | Path | None = None,
        lenient: bool = False,
        *,
        default_rules: bool = True,
        auto_open: AutoOpen | None = None,
        workdir: str | Path | None = None,
        upstream_timeout: float = DEFAULT_TIMEOUT_S,
        token: str | None = None,
    ) -> None:
        """``upstreams`` overrides the provider URLs (``{"openai": "http://127.0.0.1:9"}``);
        ``prices`` is a price table or the path of one; ``default_rules=False`` keeps only the
        given normalization; ``auto_open(run_id) -> (cassette_path, mode)`` opens a run on its
        first request instead of answering 404 (the CLI uses it); ``workdir`` is the default of
        ``open_run``'s; ``token``, when given, is the key every request must present in its path
        (``/key/<token>/run/...``, see ``base.accesskey``)."""
        names = provider_names()
        unknown = sorted(set(upstreams or {}) - set(names))
        if unknown:
            raise ConfigError(
                f"unknown upstream provider {unknown[0]!r}; expected one of {', '.join(names)}"
            )
        # The defaults are parsed when a provider is first forwarded to: a gateway that only
        # sees OpenAI traffic never loads the other providers.
        self._upstreams = {
            p: Upstream.parse(url, provider=p) for p, url in (upstreams or {}).items()
        }
        self._normalization = normalization
        self._default_rules = default_rules
        RequestNormalizer(normalization)  # a bad user regex fails here, not mid-run
        self._prices = load_prices(prices) if isinstance(prices, Path) else prices
        self.lenient = lenient
        self._auto_open = auto_open
        self._workdir = workdir
        self._upstream_timeout = upstream_timeout
        self._tls = SharedTls()
        self._token = token
        self._lock = threading.Lock()
        self._open_lock = threading.Lock()
        self._runs: dict[str, RunState] = {}
        self._closed: set[str] = set()
        self._unserved: list[UnservedRequest] = []
        self._front: HttpRecorder | None = None
        self._owns_front = False

    # ---- lifecycle -----------------------------------------------------------------------

    def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Listen (port 0: any free port) and serve in a thread; returns ``url``."""
        if self._front is not None:
            raise RuntimeError("the gateway is already started")
        from trialrun.httprec.front import HttpRecorder

        front = HttpRecorder(_no_authority, host, port)
        front.report_error = _log_error
        self._owns_front = True
        return self.attach(front)

    def attach(self, front: HttpRecorder) -> str:
        """Serve on the listener of the run's HTTP recorder (one address for the agent's model
        calls and its other HTTP traffic); ``stop`` detaches. Returns ``url``."""
        if self._front is not None:
            raise RuntimeError("the gateway is already started")
        self._front = front
        front.front_door = self._serve_guarded
        return self.url

    @property
    def url(self) -> str:
        """``http://HOST:PORT`` of the running gateway (without any key)."""
        if self._front is None:
            raise RuntimeError("the gateway is not started; call start() first")
        return self._front.url

    def stop(self) -> None:
        """Stop serving (and, on a listener of its own, drop open connections). Open runs are
        not written: close them first."""
        front, self._front = self._front, None
        if front is None:
            return
        front.front_door = None
        if self._owns_front:
            self._owns_front = False
            front.stop()

    def __enter__(self) -> Gateway:
        if self._front is None:
            self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # ---- runs ----------------------------------------------------------------------------

    def open_run(
        self,
        run_id: str,
        cassette_path: Path,
        mode: Mode,
        *,
        workdir: str | Path | None = None,
        key: str | None = None,
        update: bool = False,
        keep_unused: bool = False,
    ) -> RunScope:
        """Start serving ``run_id``; in replay the cassette is loaded now (``CassetteError``).

        ``update`` (record mode, ``--mode update``): a request that matches an unused recording
        of the cassette (loaded now, when there is one) is answered from it and its line kept
        as it was; only the others are forwarded and recorded. The recordings no request used
        are dropped, or kept after the others with ``keep_unused``.

        ``workdir``, the agent's working directory, becomes ``<workdir>`` in message text.
        ``key``: the run's requests must present it (the scope's URLs carry it); a request
        without it is refused with 401 and nothing of the run. For a gateway without ``token``.
        """
        workdir = workdir if workdir is not None else self._workdir
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}; found {mode!r}")
        if not is_valid_run_id(run_id):
            raise ValueError(f"run id must be {RUN_ID_RULE}; found {run_id!r}")
        url = self.url
        normalizer = RequestNormalizer(
            self._normalization, defaults=self._default_rules, workdir=workdir
        )
        cassette = ModelCassette.load(cassette_path, normalizer) if mode == "replay" else None
        state = RunState(
            mode, cassette_path, run_id=run_id, normalizer=normalizer, replay=cassette, key=key
        )
        if update and mode == "record" and cassette_path.exists():
            state.update = ModelCassette.load(cassette_path, normalizer)
            state.old_lines = raw_lines(cassette_path)
            state.keep_unused = keep_unused
        with self._lock:
            if run_id in self._runs:
                raise ValueError(f"run {run_id!r} is already open")
            self._runs[run_id] = state
            self._closed.discard(run_id)
        return RunScope(state, with_key(url, key))

    def close_run(
        self,
        run_id: str,
        clean: bool,
        inside_tool: Callable[[float], str | None] | None = None,
        *,
        keep: Callable[[Recording], bool] | None = None,
    ) -> list[ModelCall]:
        """Stop serving ``run_id`` (after its requests in flight) and return its model calls.

        In record mode a clean close writes the cassette atomically; ``clean=False`` discards it.
        ``inside_tool``: the tool whose body was running when a request arrived (given its
        arrival time), written into its recording (``Recording.inside_tool``). ``keep``: in
        update mode, which old recordings no request used stay in the new file anyway (all of
        them when the run was opened with ``keep_unused``).
        """
        with self._lock:
            state = self._runs.pop(run_id, None)
            if state is None:
                raise ValueError(f"run {run_id!r} is not open")
            self._closed.add(run_id)
        if not state.wait_idle(CLOSE_TIMEOUT_S):
            LOG.warning("run %s closed with requests still in flight", run_id)
        if state.mode == "record" and clean:
            try:
                recordings = state.recordings()
                if inside_tool is not None:
                    recordings = [
                        dataclasses.replace(r, inside_tool=inside_tool(arrived))
                        for arrived, r in state.recordings_arrived()
                    ]
                if state.update is not None:
                    recordings += [
                        r
                        for r in state.update.unused()
                        if state.keep_unused or (keep is not None and keep(r))
                    ]
                write_cassette(state.cassette_path, recordings, state.old_lines)
            except OSError as exc:
                raise CassetteError(
                    f"cannot write the cassette: {exc.strerror or exc}", file=state.cassette_path
                ) from None
        unused = state.unused_recordings()
        if unused:
            never = "1 recording was" if len(unused) == 1 else f"{len(unused)} recordings were"
            LOG.info("run %s: %s never asked for", run_id, never)
        return state.calls()

    def close_all(self, clean: bool) -> dict[str, list[ModelCall]]:
        """Close every open run (the CLI does this at shutdown).

        A cassette that cannot be written does not stop the others from being written; the
        first such ``CassetteError`` is raised once every run is closed.
        """
        with self._lock:
            run_ids = list(self._runs)
        closed: dict[str, list[ModelCall]] = {}
        failures: list[CassetteError] = []
        for run_id in run_ids:
            try:
                closed[run_id] = self.close_run(run_id, clean)
            except CassetteError as exc:
                LOG.error("run %s: %s", run_id, exc)
                failures.append(exc)
        if failures:
            raise failures[0]
        return closed

    @property
    def run_ids(self) -> list[str]:
        """The runs open now."""
        with self._lock:
            return list(self._runs)

    def unserved(self) -> list[UnservedRequest]:
        """Requests the gateway answered with its own error instead of forwarding or replaying
        them: unknown paths, providers and runs, closed runs, bodies it cannot take."""
        with self._lock:
            return list(self._unserved)

    def _begin_request(self, run_id: str) -> RunState:
        """The open run of a request, counted in flight (``close_run`` waits for it)."""
        state = self._open_state(run_id)
        if state is not None:
            return state
        with self._lock:
            closed = run_id in self._closed
        if closed or self._auto_open is None:
            why = "was closed" if closed else "is not open"
            raise RouteError(404, f"run {run_id!r} {why} on this gateway", run_id=run_id)
        with self._open_lock:  # two first requests of one run must not both open it
            state = self._open_state(run_id)
            if state is None:
                path, mode = self._auto_open(run_id)
                try:
                    self.open_run(run_id, path, mode)
                except CassetteError as exc:
                    raise RouteError(
                        500, f"cannot replay run {run_id!r}: {exc}", run_id=run_id
                    ) from None
                state = self._open_state(run_id)
        if state is None:
            raise RouteError(404, f"run {run_id!r} was closed on this gateway", run_id=run_id)
        return state

    def _open_state(self, run_id: str) -> RunState | None:
        # Counted under the run table's lock: once close_run has taken a run out of the table,
        # no new request can start in it, and every one that started is waited for.
        with self._lock:
            state = self._runs.get(run_id)
            if state is not None:
                state.begin()
            return state

    # ---- requests ------------------------------------------------------------------------

    def _serve_guarded(self, handler: LocalHandler) -> None:
        assert isinstance(handler, Handler)
        guarded(handler, self._serve)

    def _serve(self, handler: Handler) -> None:
        started, timestamp = time.monotonic(), time.time()
        # The key leaves the path first: whatever logs or echoes the path never shows it.
        presented, handler.path = split_key(handler.path)
        if not key_matches(presented, self._token):
            self._refuse(handler, RouteError(401, REFUSED), started, timestamp)
            return
        try:
            route = parse_route(handler.command, handler.path)
            state = self._begin_request(route.run_id)
        except RouteError as exc:
            self._refuse(handler, exc, started, timestamp)
            return
        if not key_matches(presented, state.key):
            state.end()
            refused = RouteError(401, REFUSED, provider=route.provider)
            self._refuse(handler, refused, started, timestamp)
            return
        try:
            served_by = provider(route.provider)
            body = read_body(handler, route.provider)
            request = served_by.request_body(handler.headers.get("Content-Type", ""), body)
            normalized = state.normalizer.normalize(request)
            endpoint = served_by.endpoint_key(
                handler.command, route.path, served_by.stored_query(route.query)
            )
            exchange = Exchange(
                state=state,
                route=route,
                provider=served_by,
                method=handler.command,
                body=body,
                request=request,
                normalized=normalized,
                key=request_key(route.provider, endpoint, normalized),
                started=started,
                timestamp=timestamp,
            )
            kept = None if state.update is None else answer_kept(handler, exchange)
            if kept is not None:
                outcome = kept
            elif state.mode == "replay":
                outcome = replay(handler, exchange, lenient=self.lenient)
            else:
                upstream = self._upstream(route.provider)
                outcome = forward(
                    handler, exchange, upstream, tls=self._tls, timeout=self._upstream_timeout
                )
            self._finish(exchange, outcome)
        except RouteError as exc:  # a body the gateway cannot take
            exc.run_id = route.run_id
            self._refuse(handler, exc, started, timestamp)
        finally:
            state.end()

    def _upstream(self, name: str) -> Upstream:
        """Where ``name``'s requests go; ``RouteError`` 502 when it has no default and none was
        given (Azure: the endpoint is the user's own resource)."""
        with self._lock:
            found = self._upstreams.get(name)
        if found is not None:
            return found
        default = provider(name).default_upstream
        if default is None:
            raise RouteError(
                502,
                f"no upstream for {name}: start the gateway with --upstream {name}=URL "
                f"(Gateway(upstreams={{{name!r}: URL}}))",
                provider=name,
            )
        parsed = Upstream.parse(default, provider=name)
        with self._lock:
            return self._upstreams.setdefault(name, parsed)

    def _refuse(self, handler: Handler, exc: RouteError, started: float, timestamp: float) -> None:
        LOG.warning("not served: %s %r -> %d: %s", handler.command, handler.path, exc.status, exc)
        with self._lock:
            self._unserved.append(
                UnservedRequest(handler.command, handler.path, exc.status, exc.message, exc.run_id)
            )
            state = self._runs.get(exc.run_id) if exc.run_id is not None else None
        if state is not None:
            # "/run/<id>/<provider>/<path>": what the agent asked for, even if not served.
            segments = handler.path.split("?")[0].split("/", 4)
            state.add_call(
                ModelCall(
                    provider=exc.provider or (segments[3] if len(segments) > 3 else ""),
                    path="/" + (segments[4] if len(segments) > 4 else ""),
                    model=None,
                    stream=False,
                    status=exc.status,
                    tokens_in=None,
                    tokens_out=None,
                    cost_usd=None,
                    key=None,
                    duration_ms=(time.monotonic() - started) * 1000,
                    replayed=state.mode == "replay",
                    error=exc.message,
                    timestamp=timestamp,
                )
            )
        handler.close_connection = True  # its body may be unread
        code = "unauthorized" if exc.status == 401 else "not_served"
        send_error(handler, exc.provider, exc.status, exc.message, code=code)

    def _finish(self, exchange: Exchange, outcome: Outcome) -> None:
        usage = outcome.usage
        request, route, served_by = exchange.request, exchange.route, exchange.provider
        model = served_by.requested_model(route.path, request) or usage.model
        call = ModelCall(
            provider=route.provider,
            path=route.path,
            model=model,
            stream=served_by.is_stream(route.path, route.query, request),
            status=outcome.status,
            tokens_in=usage.tokens_in,
            tokens_out=usage.tokens_out,
            cost_usd=cost_usd(self._prices, [model, usage.model], usage),
            key=exchange.key,
            duration_ms=(time.monotonic() - exchange.started) * 1000,
            replayed=outcome.replayed,
            error=outcome.error,
            warning=outcome.warning,
            tokens_cached=usage.tokens_cached,
            timestamp=exchange.timestamp,
        )
        exchange.state.add_call(call)
        LOG.info(
            "run %s: %s %s -> %d%s%s (%.0f ms)",
            exchange.state.run_id,
            route.provider,
            route.path,
            outcome.status,
            " replayed" if outcome.replayed else "",
            " failed" if outcome.error else "",
            call.duration_ms,
        )


def _no_authority() -> RunAuthority:
    # A gateway's own listener opens no case to the recorder: every CONNECT is refused with
    # 407 before an authority could be needed.
    raise RuntimeError("a gateway's own listener has no certificate authority")


def _log_error(line: str) -> None:
    LOG.error("%s", line)
