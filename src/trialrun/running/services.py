"""What an agent reaches besides the protocol: MCP servers behind proxies, models behind a gateway.

A suite that declares ``mcp_servers:`` gets, per case, one ``trialrun mcp-proxy`` command per
server, handed to the agent in ``TRIALRUN_MCP_CONFIG`` (a file in the ``mcpServers`` layout that
Claude Code, Cursor and most MCP clients read) and ``TRIALRUN_MCP_SERVERS`` (the same JSON
inline). The agent starts the proxies itself, as it would start the servers. A suite that declares
``model_gateway:`` gets one gateway for the whole run, and each case its own URL prefix in
``OPENAI_BASE_URL`` / ``ANTHROPIC_BASE_URL``, so parallel cases never share a replay cursor.

Each case has its own recordings beside its tool cassette: ``<stem>.mcp-<server>.jsonl`` and
``<stem>.model.jsonl``. After the case, what the proxies and the gateway saw joins the case's
trace: MCP calls become tool calls (assertions and budgets see them), model calls become
``usage`` events and ``AgentRun.model_calls``. A replay miss on either side fails the case as a
``cassette_mismatch`` even when the agent swallowed the error. Record mode replaces a recording
only when its case ended cleanly, as for tool cassettes.

In replay, recordings no call used join the case's unused recordings, after the tool
cassette's: ``mcp:<server>/<tool>`` for an MCP ``tools/call`` (told from the proxy's events,
which name the line that answered each call), ``model:<model>`` (or ``model:<provider> <path>``)
for a model call. Like the tool cassette's, they are reported and never fail the case, with
one exception: an agent that ended well without a single model call while its model recording
holds some fails as ``no_model_call`` (it was answered by something other than the recording).

In record and replay mode every agent also gets the run's HTTP recorder (``trialrun.httprec``)
through the standard proxy variables, and the CA variables where its case needs the run's
authority (record mode, or a replay of https exchanges; ``http_env``): its exchanges go to
``<stem>.http.jsonl``; in replay a miss fails the case, a host with no recording as the network
seal words it, and recordings no request used are reported as ``http:<METHOD> <url>``.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import dataclasses
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from trialrun.base import leftovers
from trialrun.base.accesskey import new_key, with_key
from trialrun.base.fsutil import atomic_write_bytes, atomic_write_text
from trialrun.base.results import (
    AgentRun,
    Failure,
    ModelCall,
    Status,
    ToolCall,
    case_start_timestamp,
)
from trialrun.config import Case, Suite
from trialrun.config.models import Mode, ModelGateway
from trialrun.errors import CassetteError, TrialrunError
from trialrun.running.tool_bodies import ToolBodies

if TYPE_CHECKING:
    import ssl

    from trialrun.gateway import Gateway, Price, RunScope
    from trialrun.gateway import ModelCall as GatewayCall
    from trialrun.gateway.cassette import Recording
    from trialrun.httprec.authority import RunAuthority
    from trialrun.httprec.exchange import Exchange
    from trialrun.httprec.front import HttpRecorder
    from trialrun.httprec.traffic import CaseTraffic
    from trialrun.mcp_proxy import McpCassette

_PROXY_SAVE_S = 5.0
"""How long a proxy may take, after its agent is gone, to write the recording it holds."""
MCP_CONFIG_ENV = "TRIALRUN_MCP_CONFIG"
MCP_SERVERS_ENV = "TRIALRUN_MCP_SERVERS"
UPSTREAM_CA_ENV = "TRIALRUN_HTTP_UPSTREAM_CA"
"""A PEM file of authorities the HTTP recorder trusts upstream, besides the system's."""
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")
NO_PROXY_VARIABLES = ("NO_PROXY", "no_proxy")
CA_VARIABLES = ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS")
DIRECT = "127.0.0.1,localhost,::1"
"""What agents reach without the recorder: trialrun's own services, which listen on loopback."""
_MISMATCH = "cassette mismatch"

RecordedCalls = tuple[tuple[int, str, str | None], ...]
"""The ``(line, tool, inside_tool)`` of each ``tools/call`` an MCP recording holds, in file
order."""


def recorded_calls(cassette: McpCassette) -> RecordedCalls:
    return tuple((call.line, call.tool, call.inside_tool) for call in cassette.calls)


def mcp_cassette_path(case: Case, server: str) -> Path:
    return _beside(case.cassette_path, f"mcp-{server}")


def model_cassette_path(case: Case) -> Path:
    return _beside(case.cassette_path, "model")


def http_cassette_path(case: Case) -> Path:
    return _beside(case.cassette_path, "http")


def _beside(cassette: Path, part: str) -> Path:
    stem = cassette.name.removesuffix(".jsonl")
    return cassette.with_name(f"{stem}.{part}.jsonl")


class RunServices:
    """The services of one run, started once and shared by every case: the model gateway and
    the proxies of ``transport: http`` MCP servers."""

    def __init__(
        self,
        suite: Suite,
        mode: Mode,
        prices: dict[str, Price] | None = None,
        mcp_calls: Mapping[Path, RecordedCalls] | None = None,
    ) -> None:
        """``prices``: the gateway's price table as loaded before the run (else read at start);
        ``mcp_calls``: the recorded calls of the MCP recordings, as read before the run (else
        read after each case)."""
        self._suite = suite
        self._mode = mode
        self._prices = prices
        self._mcp_calls: Mapping[Path, RecordedCalls] = mcp_calls or {}
        self._gateway: Gateway | None = None
        self._http: dict[str, HttpMcpProxy] = {}
        self._workdir: Path | None = None
        self._recorder: HttpRecorder | None = None
        self._recorder_dir: Path | None = None
        self._bundles: dict[str, Path] = {}
        self._upstream_tls: ssl.SSLContext | None = None

    def start(self) -> None:
        if self._mode != "live" and self._recorder is None:
            self._start_recorder()
        settings = self._suite.config.model_gateway
        if settings is not None and self._gateway is None:
            self._gateway = _start_gateway(settings, self._suite.suite_dir, self._prices)
        for name, server in self._suite.config.mcp_servers.items():
            if server.transport == "http" and name not in self._http:
                if self._workdir is None:
                    self._workdir = _scratch_dir("trialrun-mcp-")
                command = _server_command(self._suite, server.command)
                self._http[name] = HttpMcpProxy(
                    name, command, self._mode, self._workdir / name, server.env
                )

    def _start_recorder(self) -> None:
        from trialrun.httprec.front import HttpRecorder

        # The authority is made only when a case needs it (see CaseServices.needs_authority).
        self._recorder = HttpRecorder(self._make_authority)
        if self._mode == "record":
            self._upstream_tls = _upstream_tls()

    def _make_authority(self) -> RunAuthority:
        """The run's certificate authority, and the private directory it and the CA bundles
        use (made once, by the recorder, under its lock)."""
        from trialrun.httprec.authority import RunAuthority

        directory = _scratch_dir("trialrun-http-")
        self._recorder_dir = directory
        return RunAuthority(directory)

    @property
    def http_recorder(self) -> HttpRecorder | None:
        return self._recorder

    @property
    def upstream_tls(self) -> ssl.SSLContext | None:
        return self._upstream_tls

    @property
    def recorder_address(self) -> tuple[str, int] | None:
        """Where the run's HTTP recorder listens (None: live mode, or not started): an address
        a network seal lets agents reach."""
        return None if self._recorder is None else self._recorder.address

    def ca_bundle(self, agent_env: Mapping[str, str]) -> Path:
        """The CA bundle for an agent whose environment is ``agent_env``: the system's
        authorities, the file its ``SSL_CERT_FILE`` named (if any), the run's authority."""
        from trialrun.httprec.authority import bundle

        assert self._recorder is not None
        authority = self._recorder.authority
        assert self._recorder_dir is not None
        extra = agent_env.get("SSL_CERT_FILE") or ""
        path = self._bundles.get(extra)
        if path is None:
            path = self._recorder_dir / f"ca-bundle-{len(self._bundles)}.pem"
            data = bundle(authority, Path(extra) if extra else None)
            atomic_write_bytes(path, data)
            self._bundles[extra] = path
        return path

    def stop(self) -> None:
        if self._recorder is not None:
            self._recorder.stop()
            self._recorder = None
        if self._recorder_dir is not None:
            _remove_tree(self._recorder_dir)
            self._recorder_dir = None
            self._bundles.clear()
        if self._gateway is not None:
            self._gateway.stop()
            self._gateway = None
        for proxy in self._http.values():
            proxy.stop()
        self._http.clear()
        if self._workdir is not None:
            _remove_tree(self._workdir)
            self._workdir = None

    def for_case(self, case: Case) -> CaseServices:
        return CaseServices(
            self._suite, case, self._mode, self._gateway, self._http, self._mcp_calls, self
        )


class HttpMcpProxy:
    """One MCP server behind an in-process streamable-HTTP proxy; each case is one URL path."""

    def __init__(
        self,
        name: str,
        command: list[str],
        mode: Mode,
        directory: Path,
        env: Mapping[str, str] | None = None,
    ) -> None:
        from trialrun.mcp_proxy.http import McpHttpProxy, make_server, server_url

        self.name = name
        self.cassettes = directory / "cassettes"
        self.events = directory / "events"
        self.cassettes.mkdir(parents=True)
        self._proxy = McpHttpProxy(
            mode="replay" if mode == "replay" else "record",
            cassette_dir=self.cassettes,
            server_command=command,
            name=name,
            events_dir=self.events,
            # A key nobody is given: only the runs opened by open_run, each with its own, are
            # served; a path naming any other run is refused before it can start a server.
            token=new_key(),
            server_env=env,
        )
        self._server = make_server("127.0.0.1", 0, self._proxy)
        self.url = server_url(self._server)
        self._thread = threading.Thread(
            target=self._server.serve_forever, name=f"mcp-http-{name}", daemon=True
        )
        self._thread.start()

    def open_run(self, run_id: str) -> str:
        """Serve ``run_id`` under a key of its own; the URL (key included) for its agent only."""
        key = new_key()
        self._proxy.allow_run(run_id, key)
        return f"{with_key(self.url, key)}/run/{run_id}/mcp"

    def end_run(self, run_id: str) -> None:
        """Stop the run's live server and write what it recorded (record mode); its key no
        longer opens anything."""
        self._proxy.end_run(run_id)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._proxy.close()


def _start_gateway(
    settings: ModelGateway, suite_dir: Path, prices: dict[str, Price] | None
) -> Gateway:
    from trialrun.gateway import Gateway

    if prices is None:
        prices = load_suite_prices(settings, suite_dir)
    gateway = Gateway(
        upstreams={str(provider): url for provider, url in settings.upstreams.items()},
        normalization=settings.normalization,
        prices=prices,
        lenient=settings.lenient,
        # Agents run in our working directory and some (Claude Code) put it in their prompts:
        # a checkout at another path must still match the recordings.
        workdir=Path.cwd(),
    )
    gateway.start()
    return gateway


def load_suite_prices(settings: ModelGateway, suite_dir: Path) -> dict[str, Price] | None:
    """The suite's ``model_gateway.prices`` table, if it names one (ConfigErrors at its lines)."""
    if settings.prices is None:
        return None
    from trialrun.config.paths import display_path
    from trialrun.gateway import load_prices

    path = (suite_dir / settings.prices).resolve()
    return load_prices(path, display=display_path(path))


@dataclass(frozen=True, slots=True)
class _McpServerRun:
    name: str
    cassette: Path
    """The committed recording (replay reads it; record replaces it when the case is clean)."""
    writing: Path
    """What the proxy reads or writes: the cassette itself (stdio replay), or a file in a
    scratch directory (record; HTTP replay reads a copy named by the run id)."""
    events: Path
    http: HttpMcpProxy | None = None
    """The run's HTTP proxy (``transport: http``); None: a stdio proxy the agent starts."""


class CaseServices:
    """One case's view of the services: the agent's environment, then merging what they saw."""

    def __init__(
        self,
        suite: Suite,
        case: Case,
        mode: Mode,
        gateway: Gateway | None,
        http_proxies: Mapping[str, HttpMcpProxy],
        mcp_calls: Mapping[Path, RecordedCalls] | None = None,
        run_services: RunServices | None = None,
    ) -> None:
        self._suite = suite
        self._case = case
        self._run_services = run_services
        self._http_open = False
        self._mode = mode
        self._gateway = gateway
        self._http = http_proxies
        self._mcp_calls: Mapping[Path, RecordedCalls] = mcp_calls or {}
        self._workdir: Path | None = None
        self._servers: list[_McpServerRun] = []
        self._run_id = f"{_safe(case.config.id)}-{os.urandom(4).hex()}"
        self._gateway_scope: RunScope | None = None

    @property
    def waits_for_exit(self) -> bool:
        """Record mode needs the agent's stdio proxies to have exited (and saved) first."""
        return self._mode == "record" and any(server.http is None for server in self._servers)

    def ports(self) -> list[int]:
        """The loopback ports of the services this case's agent reaches (the HTTP MCP proxies,
        the gateway, the HTTP recorder): what replay's network seal lets it connect to. A
        service that listens for the agent joins here."""
        urls = [proxy.url for proxy in self._http.values()]
        if self._gateway is not None:
            urls.append(self._gateway.url)
        ports = {port for url in urls if (port := urlsplit(url).port) is not None}
        recorder = None if self._run_services is None else self._run_services.recorder_address
        if recorder is not None:
            ports.add(recorder[1])
        return sorted(ports)

    def open(self, agent_env: Mapping[str, str] | None) -> dict[str, str]:
        """Prepare the case; the environment to add to ``agent_env``. Raises ``CassetteError``."""
        env: dict[str, str] = {}
        servers = self._suite.config.mcp_servers
        if servers:
            env.update(self._open_mcp())
        if self._gateway is not None:
            path = model_cassette_path(self._case)
            scope = self._gateway.open_run(self._run_id, path, self._mode, key=new_key())
            self._gateway_scope = scope
            # No agent_env: the credentials are the replay environment's (running.replay_env).
            env.update(scope.env())
            env.update(scope.provider_env(self._providers_in_use(agent_env)))
        env.update(self._open_http_recorder(os.environ if agent_env is None else agent_env))
        return env

    def _providers_in_use(self, agent_env: Mapping[str, str] | None) -> list[str]:
        """The providers beyond OpenAI and Anthropic whose endpoint variable the agent gets:
        those the suite names in ``model_gateway.upstreams`` or whose variable it already has."""
        from trialrun.gateway.runs import PROVIDER_URL_VARIABLES

        seen = os.environ if agent_env is None else agent_env
        gateway = self._suite.config.model_gateway
        named = set() if gateway is None else set(gateway.upstreams)
        return [
            provider
            for provider, names in PROVIDER_URL_VARIABLES.items()
            if provider in named or any(name in seen for name in names)
        ]

    def _open_http_recorder(self, agent_env: Mapping[str, str]) -> dict[str, str]:
        services = self._run_services
        recorder = None if services is None else services.http_recorder
        if services is None or recorder is None:
            return {}
        path = http_cassette_path(self._case)
        if self._mode == "replay" and not path.exists():
            # Nothing was recorded: every request is refused as the seal would, a CONNECT
            # before any TLS. Nothing is loaded unless a request comes, and no authority made.
            url = recorder.open_case(self._run_id, new_key(), self._refusing_traffic)
            self._http_open = True
            return http_env(url, None)
        traffic = self._traffic_of(path)
        url = recorder.open_case(self._run_id, new_key(), traffic)
        self._http_open = True
        return http_env(url, services.ca_bundle(agent_env) if traffic.tls else None)

    def _traffic_of(self, path: Path) -> CaseTraffic:
        """The case's traffic; in replay its recording, whose https exchanges (if any) are
        why the agent is given the run's authority."""
        from trialrun.httprec.cassette import load_cassette
        from trialrun.httprec.matching import Replay, RequestNormalizer
        from trialrun.httprec.traffic import CaseTraffic

        assert self._run_services is not None
        normalizer = RequestNormalizer(self._suite.config.normalization)
        traffic = CaseTraffic(self._mode, path, normalizer, self._run_services.upstream_tls)
        if self._mode == "replay":
            exchanges = load_cassette(path)
            traffic.replay = Replay(exchanges, normalizer)
            traffic.tls = any(e.url.lower().startswith("https:") for e in exchanges)
        return traffic

    def _refusing_traffic(self) -> CaseTraffic:
        """A replay with no recording: made by the recorder when a first request comes."""
        from trialrun.httprec.matching import Replay, RequestNormalizer
        from trialrun.httprec.traffic import CaseTraffic

        normalizer = RequestNormalizer(self._suite.config.normalization)
        path = http_cassette_path(self._case)
        return CaseTraffic(self._mode, path, normalizer, replay=Replay([], normalizer), tls=False)

    def _open_mcp(self) -> dict[str, str]:
        self._workdir = _scratch_dir("trialrun-case-")
        entries: dict[str, Any] = {}
        for name, server in self._suite.config.mcp_servers.items():
            cassette = mcp_cassette_path(self._case, name)
            if self._mode == "replay" and not cassette.is_file():
                raise CassetteError(
                    f"MCP cassette for server {name!r} not found; record it with "
                    "`trialrun run --mode record`",
                    file=cassette,
                )
            proxy = self._http.get(name)
            if proxy is not None:
                entries[name] = self._open_http(proxy, cassette)
                continue
            # Recording goes to the case's scratch directory: MCP clients start servers in their
            # own session, so a proxy can outlive the case, and a late write must land nowhere.
            writing = cassette
            if self._mode == "record":
                writing = self._workdir / f"{name}.cassette.jsonl"
            run = _McpServerRun(name, cassette, writing, self._workdir / f"{name}.events.jsonl")
            self._servers.append(run)
            from trialrun.mcp_proxy import proxy_command

            argv = proxy_command(
                cassette=writing,
                mode="replay" if self._mode == "replay" else "record",
                name=name,
                events=run.events,
                server_command=_server_command(self._suite, server.command),
                python=sys.executable,
            )
            entry: dict[str, Any] = {"command": argv[0], "args": argv[1:]}
            if server.env:
                entry["env"] = dict(server.env)
            entries[name] = entry
        config_path = self._workdir / "mcp.json"
        document = json.dumps({"mcpServers": entries}, indent=2)
        atomic_write_text(config_path, document + "\n")
        return {MCP_CONFIG_ENV: str(config_path), MCP_SERVERS_ENV: document}

    def _open_http(self, proxy: HttpMcpProxy, cassette: Path) -> dict[str, Any]:
        writing = proxy.cassettes / f"{self._run_id}.jsonl"
        if self._mode == "replay":
            import shutil

            shutil.copyfile(cassette, writing)
        events = proxy.events / f"{self._run_id}.jsonl"
        self._servers.append(_McpServerRun(proxy.name, cassette, writing, events, proxy))
        return {"type": "http", "url": proxy.open_run(self._run_id)}

    def discard(self) -> None:
        """Drop everything the case recorded (setup failed, or the run was interrupted)."""
        try:
            # Best effort: the case already failed, and what these would save is thrown away.
            with contextlib.suppress(OSError, TrialrunError):
                for server in self._servers:
                    if server.http is not None:
                        server.http.end_run(self._run_id)
                if self._gateway is not None and self._gateway_scope is not None:
                    self._gateway.close_run(self._run_id, clean=False)
                self._close_traffic()
        finally:
            if self._workdir is not None:
                _remove_tree(self._workdir)

    async def close(self, run: AgentRun, *, clean: bool) -> None:
        """Merge what the proxies and the gateway saw into ``run``; commit or drop recordings."""
        unused: list[str] = []
        # Which tool body was running when a call arrived (record mode marks its recording).
        inside = _inside_tool(run) if self._mode == "record" else None
        bodies = ToolBodies(run, self._mode)
        try:
            for server in self._servers:
                if server.http is not None:  # its run ends: live server stopped, recording written
                    await asyncio.to_thread(server.http.end_run, self._run_id)
                events = _read_server_events(server)
                _merge_mcp_calls(run, server, events)
                if self._mode == "replay":
                    unused += self._unused_mcp(server, events, bodies)
                elif inside is not None:
                    bodies.made("mcp", [inside(float(e["timestamp"])) for e in _timed(events)])
            await self._commit_mcp(run, clean=clean and run.failure is None, inside=inside)
            scope = self._gateway_scope
            if self._gateway is not None and scope is not None:
                calls = self._gateway.close_run(
                    self._run_id, clean=clean and run.failure is None, inside_tool=inside
                )
                if inside is not None:
                    bodies.made("model", [inside(call.timestamp) for call in calls])
                _merge_model_calls(run, calls)
                left = bodies.unused("model", scope.unused_recordings(), _recording_inside)
                unused += [_model_recording_name(r) for r in left]
                if self._mode == "replay" and not calls and left and run.failure is None:
                    _fail(run, NO_MODEL_CALL, _no_model_call(len(left)), "fail")
            unused += self._finish_http(
                run, clean=clean and run.failure is None, inside=inside, bodies=bodies
            )
            bodies.note()
        finally:
            run.unused_recordings += len(unused)
            run.unused_recording_tools += unused
            if self._workdir is not None:
                _remove_tree(self._workdir)

    def _close_traffic(self) -> CaseTraffic | None:
        """The case's traffic, its credentials closed; None: no request ever needed it."""
        opened, self._http_open = self._http_open, False
        services = self._run_services
        recorder = None if services is None else services.http_recorder
        if not opened or recorder is None:
            return None
        return recorder.close_case(self._run_id)

    def _finish_http(
        self,
        run: AgentRun,
        *,
        clean: bool,
        inside: Callable[[float], str | None] | None = None,
        bodies: ToolBodies | None = None,
    ) -> list[str]:
        """Judge replay misses, write a clean recording; the unused recordings' names.

        ``inside`` (record): which tool body was running when a request arrived, written into
        its recording; ``bodies`` hears of those (record) and of the unused recordings made
        inside a tool the case called (replay), which are no unused recordings.
        """
        traffic = self._close_traffic()
        if traffic is None:
            return []
        run.http_exchanges += traffic.served
        if traffic.misses:
            first = traffic.misses[0]
            more = len(traffic.misses) - 1
            message = first.message + (f" (and {more} more refused request(s))" if more else "")
            _fail_mismatch(run, message, kind=first.kind)
        if self._mode == "record":
            exchanges = _marked_exchanges(traffic, inside, bodies)
            if clean:
                if exchanges:
                    from trialrun.httprec.cassette import write_cassette

                    write_cassette(traffic.cassette, exchanges)
                else:  # the case no longer calls any HTTP API: no stale recording stays
                    with contextlib.suppress(FileNotFoundError):
                        traffic.cassette.unlink()
            return []
        assert traffic.replay is not None
        unused = traffic.replay.unused()
        if bodies is not None:
            unused = bodies.unused("http", unused, _exchange_inside)
        return [f"http:{e.method} {e.url}" for e in unused]

    def _unused_mcp(
        self, server: _McpServerRun, events: list[dict[str, Any]], bodies: ToolBodies | None = None
    ) -> list[str]:
        """``mcp:<server>/<tool>`` for each recorded tools/call no event says it answered;
        ``bodies`` counts instead those made inside a tool the case called."""
        calls = self._mcp_calls.get(server.cassette)
        if calls is None:  # a run without preflight (doctor --probe): read the recording once
            from trialrun.mcp_proxy import load_cassette

            calls = recorded_calls(load_cassette(server.cassette))
        used = {event.get("recording") for event in events}
        unused = [call for call in calls if call[0] not in used]
        if bodies is not None:
            unused = bodies.unused("mcp", unused, lambda call: call[2])
        return [f"mcp:{server.name}/{tool}" for _line, tool, _inside in unused]

    async def _commit_mcp(
        self, run: AgentRun, *, clean: bool, inside: Callable[[float], str | None] | None = None
    ) -> None:
        if self._mode != "record" or not clean:
            return
        for server in self._servers:
            if not server.events.exists():
                continue  # the agent never started this server's proxy
            if not await _appeared(server.writing, _PROXY_SAVE_S):
                _fail(
                    run,
                    "cassette_error",
                    f"the MCP proxy for server {server.name!r} did not save its recording within "
                    f"{_PROXY_SAVE_S:g} s of the agent's exit; expected the agent to close its MCP "
                    "session (or exit) when done",
                    "error",
                )
                return
            atomic_write_bytes(server.cassette, self._portable(server, inside))

    def _portable(
        self, server: _McpServerRun, inside: Callable[[float], str | None] | None = None
    ) -> bytes:
        """The recording, its header naming the server command as the suite declares it, and
        (given ``inside``) each call made inside a tool's body marked with that tool.

        The proxy ran the command with its paths made absolute; a committed recording must not
        change with the checkout's location, or every re-record on another machine is a diff.
        """
        from trialrun.mcp_proxy.cassette import cassette_lines, load_cassette

        recorded = load_cassette(server.writing)
        records = recorded.records
        if inside is not None:
            from trialrun.mcp_proxy.marks import mark_inside

            records = tuple(mark_inside(records, _read_server_events(server), inside))
        if recorded.header is None:
            if records == recorded.records:
                return server.writing.read_bytes()
            return cassette_lines(None, records)
        declared = self._suite.config.mcp_servers[server.name].command
        return cassette_lines({**recorded.header, "upstream": list(declared)}, records)


def _server_command(suite: Suite, command: list[str]) -> list[str]:
    """The same rule as agent_command: a relative part naming a file of the suite is absolute.

    A server's ``env`` never goes on its command line (``env NAME=VALUE``), which every user of
    the machine can read: the HTTP proxy lays it over the server's environment.
    """
    from trialrun.config.paths import SuitePaths

    return SuitePaths.for_suite_dir(suite.suite_dir).agent_command(command)


def _read_server_events(server: _McpServerRun) -> list[dict[str, Any]]:
    """What the server's proxy saw; nothing when the agent never started it."""
    from trialrun.mcp_proxy import read_events

    return read_events(server.events) if server.events.exists() else []


NO_MODEL_CALL = "no_model_call"
"""The failure of a replayed case whose agent ended well without asking the gateway anything
while its model recording holds calls: whatever answered it, the recording did not."""


def _no_model_call(recorded: int) -> str:
    return (
        f"the agent made no model call through the gateway, yet its model recording holds "
        f"{recorded}: expected it to ask for them. A client trialrun does not point at the "
        "gateway (a base URL set in code?) would be answered by something else; if the agent "
        "no longer needs a model here, re-record the case (`trialrun run --mode record`)"
    )


def _inside_tool(run: AgentRun) -> Callable[[float], str | None]:
    """Which tool was running (its body, in the agent or a tool module) at a given time.

    From the case's ``tool_call`` / ``tool_result`` events; MCP calls and handoffs run no body
    of the agent's. Only an unused recording is ever judged by it, so a model call of another
    thread that happened to arrive during a tool's run costs nothing: replay still asks for it.
    """
    opened: dict[Any, tuple[float, str]] = {}
    windows: list[tuple[float, float, str]] = []
    for event in run.events:
        kind = event.get("type")
        if kind == "tool_call" and "mcp_server" not in event and event.get("kind") != "handoff":
            opened[event.get("call_id")] = (float(event["timestamp"]), str(event["name"]))
        elif kind == "tool_result" and event.get("call_id") in opened:
            begin, name = opened.pop(event.get("call_id"))
            windows.append((begin, float(event["timestamp"]), name))
    windows.sort()
    starts = [begin for begin, _end, _name in windows]

    def inside(arrived: float) -> str | None:
        index = bisect.bisect_right(starts, arrived) - 1
        if index >= 0 and arrived <= windows[index][1]:
            return windows[index][2]
        return None

    return inside


def _timed(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The proxy's events that say when their call arrived."""
    return [e for e in events if isinstance(e.get("timestamp"), int | float)]


def _recording_inside(recording: Recording) -> str | None:
    return recording.inside_tool


def _exchange_inside(exchange: Exchange) -> str | None:
    return exchange.inside_tool


def _marked_exchanges(
    traffic: CaseTraffic,
    inside: Callable[[float], str | None] | None,
    bodies: ToolBodies | None,
) -> list[Exchange]:
    """Record mode: the case's exchanges, each sent inside a tool's body marked with that tool
    (``bodies`` hears of them)."""
    if inside is None:
        return traffic.recorded_exchanges()
    marked = [
        dataclasses.replace(exchange, inside_tool=inside(arrived))
        for arrived, exchange in traffic.exchanges.arrived()
    ]
    if bodies is not None:
        bodies.made("http", [exchange.inside_tool for exchange in marked])
    return marked


def _model_recording_name(recording: Recording) -> str:
    """``model:gpt-4o-mini``; ``model:openai /v1/embeddings`` when the request names no model."""
    return f"model:{recording.model or f'{recording.provider} {recording.path}'}"


def _merge_mcp_calls(run: AgentRun, server: _McpServerRun, events: list[dict[str, Any]]) -> None:
    case_started = case_start_timestamp(run.events)
    for number, event in enumerate(events, start=1):
        call_id = f"mcp-{server.name}-{number}"
        started = float(event.get("timestamp") or time.time())
        duration_ms = float(event.get("duration_ms") or 0.0)
        call = ToolCall(
            call_id,
            str(event["tool"]),
            dict(event.get("args") or {}),
            bool(event.get("ok")),
            event.get("result"),
            event.get("error"),
            duration_ms,
            None if case_started is None else max(0.0, (started - case_started) * 1000),
        )
        run.tool_calls.append(call)
        base = {"case_id": run.case_id, "call_id": call_id}
        run.events.append(
            {
                "type": "tool_call",
                **base,
                "timestamp": started,
                "name": call.name,
                "args": call.args,
                "mcp_server": server.name,
            }
        )
        run.events.append(
            {
                "type": "tool_result",
                **base,
                "timestamp": started + duration_ms / 1000,
                "ok": call.ok,
                "result": call.result,
                "error": call.error,
            }
        )
        if call.error and _MISMATCH in call.error:
            _fail_mismatch(run, f"MCP server {server.name!r}: {call.error}")
    if events:
        _order_by_time(run)


def _merge_model_calls(run: AgentRun, calls: list[GatewayCall]) -> None:
    for call in calls:
        model_call = ModelCall(
            provider=call.provider,
            endpoint=call.path,
            model=call.model,
            ok=call.error is None and call.status < 400,
            tokens_in=call.tokens_in,
            tokens_out=call.tokens_out,
            cost_usd=call.cost_usd,
            duration_ms=call.duration_ms,
            error=call.error,
        )
        run.model_calls.append(model_call)
        run.usage.add(call.tokens_in, call.tokens_out, call.cost_usd)
        if call.model is not None:
            run.usage.model = call.model
        run.events.append(
            {
                "type": "usage",
                "case_id": run.case_id,
                "timestamp": call.timestamp,
                "tokens_in": call.tokens_in,
                "tokens_out": call.tokens_out,
                "cost_usd": call.cost_usd,
                "model": call.model,
                "source": "model_gateway",
                "provider": call.provider,
                "endpoint": call.path,
                "ok": model_call.ok,
                "error": call.error,
            }
        )
        if call.error and _MISMATCH in call.error:
            _fail_mismatch(run, f"model call {call.provider} {call.path}: {call.error}")
    if calls:
        _order_by_time(run)


_CONSEQUENCES = frozenset({"agent_crashed", "task_error", "idle_timeout", "protocol_error"})
"""Failures an agent shows after a replay miss it could not handle: the miss is the cause."""


def _fail_mismatch(run: AgentRun, message: str, *, kind: str = "cassette_mismatch") -> None:
    if run.failure is not None:
        if run.failure.kind not in _CONSEQUENCES:
            return
        message = f"{message} (then: {run.failure.message})"
    _fail(run, kind, message, "fail")


def _fail(run: AgentRun, kind: str, message: str, status: Status) -> None:
    run.failure = Failure(kind=kind, message=message, status=status, stderr_tail=run.stderr_tail)
    event = {"type": "agent_error", "case_id": run.case_id, "timestamp": time.time()}
    run.events.append({**event, "kind": kind, "message": message})


async def _appeared(path: Path, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while not path.exists():
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.02)
    return True


def _order_by_time(run: AgentRun) -> None:
    """Events, and tool calls after them, in the order they happened (stable for ties)."""
    run.events.sort(key=lambda event: float(event.get("timestamp") or 0.0))
    position = {
        event.get("call_id"): index
        for index, event in enumerate(run.events)
        if event.get("type") == "tool_call"
    }
    run.tool_calls.sort(key=lambda call: position.get(call.call_id, len(position)))


def http_env(proxy_url: str, ca_bundle: Path | None) -> dict[str, str]:
    """The variables through which clients find the recorder and trust its authority.

    They replace whatever the suite's or the user's environment set for the same names: an
    agent that could go around the recorder would reach the network in replay. ``ca_bundle``
    None (a replay with no https recording): no CA variables, the agent's TLS settings stay.
    """
    env = dict.fromkeys(PROXY_VARIABLES, proxy_url)
    env.update(dict.fromkeys(NO_PROXY_VARIABLES, DIRECT))
    if ca_bundle is not None:
        env.update(dict.fromkeys(CA_VARIABLES, str(ca_bundle)))
    return env


def _upstream_tls() -> ssl.SSLContext:
    """How record mode verifies upstreams: the system's authorities, plus the file named by
    ``TRIALRUN_HTTP_UPSTREAM_CA`` (a private API's own authority)."""
    import ssl

    from trialrun.errors import ConfigError

    context = ssl.create_default_context()
    extra = os.environ.get(UPSTREAM_CA_ENV)
    if extra:
        try:
            context.load_verify_locations(cafile=extra)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                f"{UPSTREAM_CA_ENV} must name a PEM file of certificate authorities; "
                f"cannot load it: {exc}",
                file=Path(extra),
            ) from None
    return context


def _scratch_dir(prefix: str) -> Path:
    """A fresh private directory under trialrun's scratch root."""
    import tempfile  # with shutil under it, only for a suite whose services need a directory

    return Path(tempfile.mkdtemp(prefix=prefix, dir=leftovers.scratch_root()))


def _remove_tree(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def _safe(case_id: str) -> str:
    cleaned = "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in case_id)
    return cleaned.strip("-.")[:40] or "case"
