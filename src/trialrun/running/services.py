"""What an agent reaches besides the protocol: MCP servers behind proxies, models behind a gateway,
the network through the HTTP recorder.

``RunServices`` starts what a run shares (the gateway, the proxies of ``transport: http`` MCP
servers, the HTTP recorder); ``CaseServices`` is one case's view of them: the environment its
agent gets, then merging what each service saw into the case's trace. Each service is a module
of its own: ``mcp_service``, ``model_service``, ``http_service`` (with ``recording_paths``,
where a case's recordings lie beside its tool cassette).

A replay miss on any side fails the case as a ``cassette_mismatch`` even when the agent
swallowed the error. Record mode replaces a recording only when its case ended cleanly, as for
tool cassettes. In replay, recordings no call used join the case's unused recordings, after the
tool cassette's: ``mcp:<server>/<tool>`` for an MCP ``tools/call`` (told from the proxy's
events, which name the line that answered each call), ``model:<model>`` (or
``model:<provider> <path>``) for a model call, ``http:<METHOD> <url>`` for an HTTP exchange.
Like the tool cassette's, they are reported and never fail the case, with one exception: an
agent that ended well without a single model call while its model recording holds some fails as
``no_model_call`` (it was answered by something other than the recording).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from trialrun.base.leftovers import remove_tree
from trialrun.base.results import AgentRun
from trialrun.config import Case, Suite
from trialrun.config.models import Mode
from trialrun.errors import TrialrunError
from trialrun.running.http_service import (
    CaseHttp,
    RunHttp,
)
from trialrun.running.mcp_service import (
    CaseMcp,
    HttpMcpProxy,
    RecordedCalls,
    proxy_mode,
    server_command,
)
from trialrun.running.model_service import (
    CaseModel,
    start_gateway,
)
from trialrun.running.scratch import scratch_dir
from trialrun.running.tool_bodies import ToolBodies

if TYPE_CHECKING:
    import ssl

    from trialrun.gateway import Gateway, Price

__all__ = ["CaseServices", "RunServices"]


class RunServices:
    """The services of one run, started once and shared by every case: the model gateway,
    the proxies of ``transport: http`` MCP servers and the HTTP recorder."""

    def __init__(
        self,
        suite: Suite,
        mode: Mode,
        prices: dict[str, Price] | None = None,
        mcp_calls: Mapping[Path, RecordedCalls] | None = None,
        *,
        update: bool = False,
        keep_unused: bool = False,
    ) -> None:
        """``prices``: the gateway's price table as loaded before the run (else read at start);
        ``mcp_calls``: the recorded calls of the MCP recordings, as read before the run (else
        read after each case); ``update``, ``keep_unused``: record mode as ``--mode update``
        (the gateway and the HTTP recorder answer what still matches from the recordings)."""
        self.update = update
        self.keep_unused = keep_unused
        self._suite = suite
        self._mode = mode
        self._prices = prices
        self._mcp_calls: Mapping[Path, RecordedCalls] = mcp_calls or {}
        self._gateway: Gateway | None = None
        self._http: dict[str, HttpMcpProxy] = {}
        self._workdir: Path | None = None
        self._run_http = RunHttp(mode)

    def start(self) -> None:
        if self._mode != "live":
            self._run_http.start()
        settings = self._suite.config.model_gateway
        if settings is not None and self._gateway is None:
            self._gateway = start_gateway(
                settings, self._suite.suite_dir, self._prices, self._run_http.recorder
            )
        for name, server in self._suite.config.mcp_servers.items():
            if server.transport == "http" and name not in self._http:
                if self._workdir is None:
                    self._workdir = scratch_dir("trialrun-mcp-")
                command = server_command(self._suite, server.command)
                self._http[name] = HttpMcpProxy(
                    name,
                    command,
                    proxy_mode(self._mode, update=self.update),
                    self._workdir / name,
                    server.env,
                    keep_unused=self.keep_unused,
                )

    @property
    def run_http(self) -> RunHttp:
        """The run's HTTP recorder side (no recorder in live mode, or before ``start``)."""
        return self._run_http

    @property
    def upstream_tls(self) -> ssl.SSLContext | None:
        return self._run_http.upstream_tls

    @property
    def recorder_address(self) -> tuple[str, int] | None:
        """Where the run's HTTP recorder listens (None: live mode, or not started): an address
        a network seal lets agents reach."""
        return self._run_http.address

    def ca_bundle(self, agent_env: Mapping[str, str]) -> Path:
        """The CA bundle for an agent whose environment is ``agent_env``: the system's
        authorities, the file its ``SSL_CERT_FILE`` named (if any), the run's authority."""
        return self._run_http.ca_bundle(agent_env)

    def stop(self) -> None:
        self._run_http.stop()
        if self._gateway is not None:
            self._gateway.stop()
            self._gateway = None
        for proxy in self._http.values():
            proxy.stop()
        self._http.clear()
        if self._workdir is not None:
            remove_tree(self._workdir)
            self._workdir = None

    def for_case(self, case: Case) -> CaseServices:
        return CaseServices(
            self._suite, case, self._mode, self._gateway, self._http, self._mcp_calls, self
        )


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
        self._mode = mode
        self._run_services = run_services
        self._gateway = gateway
        self._http = http_proxies
        self._run_id = f"{_safe(case.config.id)}-{os.urandom(4).hex()}"
        update = run_services is not None and run_services.update
        keep_unused = run_services is not None and run_services.keep_unused
        self._mcp = CaseMcp(
            suite,
            case,
            mode,
            http_proxies,
            mcp_calls or {},
            self._run_id,
            update=update,
            keep_unused=keep_unused,
        )
        self._model = (
            None
            if gateway is None
            else CaseModel(
                suite, case, mode, gateway, self._run_id, update=update, keep_unused=keep_unused
            )
        )
        self._http_case = (
            None
            if run_services is None
            else CaseHttp(
                suite,
                case,
                mode,
                run_services.run_http,
                self._run_id,
                update=update,
                keep_unused=keep_unused,
            )
        )

    @property
    def waits_for_exit(self) -> bool:
        """Record mode needs the agent's stdio proxies to have exited (and saved) first."""
        return self._mcp.waits_for_exit

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
        if self._suite.config.mcp_servers:
            env.update(self._mcp.open())
        if self._model is not None:
            env.update(self._model.open(agent_env))
        if self._http_case is not None:
            env.update(self._http_case.open(os.environ if agent_env is None else agent_env))
        return env

    def discard(self) -> None:
        """Drop everything the case recorded (setup failed, or the run was interrupted)."""
        try:
            # Best effort: the case already failed, and what these would save is thrown away.
            with contextlib.suppress(OSError, TrialrunError):
                self._mcp.discard()
                if self._model is not None:
                    self._model.discard()
                if self._http_case is not None:
                    self._http_case.close_traffic()
        finally:
            self._mcp.remove_scratch()

    async def close(self, run: AgentRun, *, clean: bool) -> None:
        """Merge what the proxies and the gateway saw into ``run``; commit or drop recordings."""
        unused: list[str] = []
        # The calls of tool bodies replay never runs: marked in record, said in one log line.
        bodies = ToolBodies(run, self._mode)
        try:
            await self._mcp.close(run, unused, clean=clean, bodies=bodies)
            if self._model is not None:
                self._model.close(run, unused, clean=clean, bodies=bodies)
            if self._http_case is not None:
                clean_http = clean and run.failure is None
                unused += self._http_case.finish(run, clean=clean_http, bodies=bodies)
            bodies.note()
        finally:
            run.unused_recordings += len(unused)
            run.unused_recording_tools += unused
            self._mcp.remove_scratch()


def _safe(case_id: str) -> str:
    cleaned = "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in case_id)
    return cleaned.strip("-.")[:40] or "case"
