"""The MCP servers of a suite, behind trialrun's proxies: their recordings and what they saw.

A suite that declares ``mcp_servers:`` gets, per case, one ``trialrun mcp-proxy`` command per
``stdio`` server, handed to the agent in ``TRIALRUN_MCP_CONFIG`` (a file in the ``mcpServers``
layout that Claude Code, Cursor and most MCP clients read) and ``TRIALRUN_MCP_SERVERS`` (the same
JSON inline); the agent starts the proxies itself, as it would start the servers. A
``transport: http`` server has one in-process proxy for the run (``HttpMcpProxy``), each case a
URL of its own. After the case, the proxies' events become tool calls of the case's trace.

``--mode update`` runs the proxies in their update mode (``proxy_mode``): a ``tools/call`` an
unused recording matches is answered from it, its line kept; the server answers the rest.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trialrun.base.accesskey import new_key, with_key
from trialrun.base.fsutil import atomic_write_bytes, atomic_write_text
from trialrun.base.leftovers import remove_tree
from trialrun.base.results import AgentRun, RecordingPlace, ToolCall, case_start_timestamp
from trialrun.config import Case, Suite
from trialrun.config.models import Mode
from trialrun.errors import CassetteError
from trialrun.running.recording_paths import mcp_cassette_path
from trialrun.running.scratch import scratch_dir
from trialrun.running.tool_bodies import ToolBodies
from trialrun.running.trace_merge import MISMATCH, fail, fail_mismatch, order_by_time

if TYPE_CHECKING:
    from trialrun.mcp_proxy import McpCassette
    from trialrun.mcp_proxy import Mode as ProxyMode

_PROXY_SAVE_S = 5.0
"""How long a proxy may take, after its agent is gone, to write the recording it holds."""
MCP_CONFIG_ENV = "TRIALRUN_MCP_CONFIG"
MCP_SERVERS_ENV = "TRIALRUN_MCP_SERVERS"

RecordedCalls = tuple[tuple[int, str, str | None], ...]
"""The ``(line, tool, inside_tool)`` of each ``tools/call`` an MCP recording holds, in file
order."""


def recorded_calls(cassette: McpCassette) -> RecordedCalls:
    return tuple((call.line, call.tool, call.inside_tool) for call in cassette.calls)


def proxy_mode(mode: Mode, *, update: bool) -> ProxyMode:
    """What the MCP proxies of a run in ``mode`` do: replay, record, or (record mode as
    ``--mode update``) update. Live mode records too; its recordings are never committed."""
    if mode == "replay":
        return "replay"
    return "update" if update and mode == "record" else "record"


class HttpMcpProxy:
    """One MCP server behind an in-process streamable-HTTP proxy; each case is one URL path."""

    def __init__(
        self,
        name: str,
        command: list[str],
        mode: ProxyMode,
        directory: Path,
        env: Mapping[str, str] | None = None,
        *,
        keep_unused: bool = False,
    ) -> None:
        from trialrun.mcp_proxy.http import McpHttpProxy, make_server, server_url

        self.name = name
        self.cassettes = directory / "cassettes"
        self.events = directory / "events"
        self.cassettes.mkdir(parents=True)
        self._proxy = McpHttpProxy(
            mode=mode,
            cassette_dir=self.cassettes,
            server_command=command,
            name=name,
            events_dir=self.events,
            # A key nobody is given: only the runs opened by open_run, each with its own, are
            # served; a path naming any other run is refused before it can start a server.
            token=new_key(),
            server_env=env,
            keep_unused=keep_unused,
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


class CaseMcp:
    """One case's MCP servers: the agent's MCP configuration, then the calls the proxies saw."""

    def __init__(
        self,
        suite: Suite,
        case: Case,
        mode: Mode,
        http_proxies: Mapping[str, HttpMcpProxy],
        mcp_calls: Mapping[Path, RecordedCalls],
        run_id: str,
        *,
        update: bool = False,
        keep_unused: bool = False,
    ) -> None:
        self._suite = suite
        self._case = case
        self._mode = mode
        self._proxy_mode = proxy_mode(mode, update=update)
        self._keep_unused = keep_unused and self._proxy_mode == "update"
        self._http = http_proxies
        self._mcp_calls = mcp_calls
        self._run_id = run_id
        self._workdir: Path | None = None
        self._servers: list[_McpServerRun] = []

    @property
    def waits_for_exit(self) -> bool:
        """Record mode needs the agent's stdio proxies to have exited (and saved) first."""
        return self._mode == "record" and any(server.http is None for server in self._servers)

    def open(self) -> dict[str, str]:
        """The agent's MCP configuration (a file and the same JSON inline). Raises
        ``CassetteError`` for a replay without a server's recording."""
        self._workdir = scratch_dir("trialrun-case-")
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
            if self._proxy_mode != "replay":
                writing = self._workdir / f"{name}.cassette.jsonl"
            run = _McpServerRun(name, cassette, writing, self._workdir / f"{name}.events.jsonl")
            self._servers.append(run)
            from trialrun.mcp_proxy import proxy_command

            updating = self._proxy_mode == "update"
            argv = proxy_command(
                cassette=writing,
                mode=self._proxy_mode,
                name=name,
                events=run.events,
                server_command=server_command(self._suite, server.command),
                python=sys.executable,
                update_from=cassette if updating else None,
                keep_unused=self._keep_unused,
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
        # Replay reads the copy; update reads it and writes the updated recording over it.
        if self._proxy_mode == "replay" or (self._proxy_mode == "update" and cassette.is_file()):
            import shutil

            shutil.copyfile(cassette, writing)
        events = proxy.events / f"{self._run_id}.jsonl"
        self._servers.append(_McpServerRun(proxy.name, cassette, writing, events, proxy))
        return {"type": "http", "url": proxy.open_run(self._run_id)}

    def discard(self) -> None:
        """End the case's runs on the HTTP proxies, keeping nothing they recorded."""
        for server in self._servers:
            if server.http is not None:
                server.http.end_run(self._run_id)

    async def close(
        self, run: AgentRun, unused: list[str], *, clean: bool, bodies: ToolBodies
    ) -> None:
        """Merge the proxies' calls into ``run``, add the recorded calls no call used to
        ``unused`` (replay), commit the recordings (record, ``clean`` and no failure). Record
        marks the calls made inside a tool's body; ``bodies`` hears of them, and of the
        recordings replay left alone because the tool was answered from its cassette."""
        inside = bodies.inside
        for server in self._servers:
            if server.http is not None:  # its run ends: live server stopped, recording written
                await asyncio.to_thread(server.http.end_run, self._run_id)
            else:
                _name_a_server_that_did_not_start(run, server)
            events = _read_server_events(server)
            _merge_mcp_calls(run, server, events)
            if self._mode == "replay":
                unused += self._unused_mcp(run, server, events, bodies)
            elif inside is not None:  # update's replayed calls ran no body: not counted
                made = [e for e in _timed(events) if e.get("recording") is None]
                bodies.made("mcp", [inside(float(e["timestamp"])) for e in made])
        await self._commit_mcp(run, clean=clean and run.failure is None, bodies=bodies)

    def remove_scratch(self) -> None:
        if self._workdir is not None:
            remove_tree(self._workdir)

    def _unused_mcp(
        self,
        run: AgentRun,
        server: _McpServerRun,
        events: list[dict[str, Any]],
        bodies: ToolBodies,
    ) -> list[str]:
        """``mcp:<server>/<tool>`` for each recorded tools/call no event says it answered;
        ``bodies`` counts instead those made inside a tool the case called."""
        calls = self._mcp_calls.get(server.cassette)
        if calls is None:  # a run without preflight (doctor --probe): read the recording once
            from trialrun.mcp_proxy import load_cassette

            calls = recorded_calls(load_cassette(server.cassette))
        used = {event.get("recording") for event in events}
        unused = bodies.unused(
            "mcp", [call for call in calls if call[0] not in used], lambda call: call[2]
        )
        path = str(Path(server.cassette).resolve())
        run.unused_places += [
            RecordingPlace("mcp", path, line, f"mcp:{server.name}/{tool}")
            for line, tool, _inside in unused
        ]
        return [f"mcp:{server.name}/{tool}" for _line, tool, _inside in unused]

    async def _commit_mcp(self, run: AgentRun, *, clean: bool, bodies: ToolBodies) -> None:
        if self._mode != "record" or not clean:
            return
        for server in self._servers:
            if not server.events.exists():
                continue  # the agent never started this server's proxy
            if not await _appeared(server.writing, _PROXY_SAVE_S):
                fail(
                    run,
                    "cassette_error",
                    f"the MCP proxy for server {server.name!r} did not save its recording within "
                    f"{_PROXY_SAVE_S:g} s of the agent's exit; expected the agent to close its MCP "
                    "session (or exit) when done",
                    "error",
                )
                return
            events = _read_server_events(server)
            atomic_write_bytes(server.cassette, self._portable(server, events, bodies))

    def _portable(
        self, server: _McpServerRun, events: list[dict[str, Any]], bodies: ToolBodies
    ) -> bytes:
        """The recording, its header naming the server command as the suite declares it, and
        (given ``bodies.inside``) each call made inside a tool's body marked with that tool.
        Every other line stays as the proxy wrote it (update copied old lines byte for byte).

        The proxy ran the command with its paths made absolute; a committed recording must not
        change with the checkout's location, or every re-record on another machine is a diff.
        """
        from trialrun.mcp_proxy.cassette import cassette_lines, load_cassette

        written = server.writing.read_bytes().split(b"\n")
        recorded = load_cassette(server.writing)
        records = recorded.records
        if bodies.inside is not None:
            from trialrun.mcp_proxy.marks import mark_inside

            records = tuple(mark_inside(records, events, bodies.inside))
        out: list[bytes] = []
        if recorded.header is not None:
            declared = self._suite.config.mcp_servers[server.name].command
            out.append(cassette_lines({**recorded.header, "upstream": list(declared)}, ()))
        for was, record in zip(recorded.records, records, strict=True):
            same = record is was and was.line > 1  # line 1 may carry a BOM; rewrite it
            out.append(written[was.line - 1] + b"\n" if same else cassette_lines(None, (record,)))
        out += self._kept_by_update(server, events, bodies)
        return b"".join(out)

    def _kept_by_update(
        self, server: _McpServerRun, events: list[dict[str, Any]], bodies: ToolBodies
    ) -> list[bytes]:
        """Update mode: the old lines of the tool calls no call used that a tool's body made,
        when the case called that tool (update may have answered it from the tool cassette,
        never running the body). ``--keep-unused`` had the proxy keep every unused one."""
        if self._proxy_mode != "update" or self._keep_unused:
            return []
        from trialrun.mcp_proxy.update import load_previous

        previous = load_previous(server.cassette)
        if previous is None:
            return []
        used = {event.get("recording") for event in events}
        return [
            previous.line(call.line)
            for call in previous.cassette.calls
            if call.line not in used and bodies.kept_by_update(call)
        ]


def server_command(suite: Suite, command: list[str]) -> list[str]:
    """The same rule as agent_command: a relative part naming a file of the suite is absolute.

    A server's ``env`` never goes on its command line (``env NAME=VALUE``), which every user of
    the machine can read: the HTTP proxy lays it over the server's environment.
    """
    from trialrun.config.paths import SuitePaths

    return SuitePaths.for_suite_dir(suite.suite_dir).agent_command(command)


def _name_a_server_that_did_not_start(run: AgentRun, server: _McpServerRun) -> None:
    """Put the proxy's reason in the case's failure: on the agent's stderr the same line sits
    above its MCP client's traceback, where the stderr tail no longer reaches."""
    from trialrun.mcp_proxy.events import read_failure

    reason = read_failure(server.events)
    if reason is None:
        return
    said = f"MCP server {server.name!r} did not start: {reason.removeprefix('MCP server ')}"
    if run.failure is None:
        fail(run, "agent_error", said, "error")
    else:
        run.failure.message = f"{run.failure.message}; {said}"


def _read_server_events(server: _McpServerRun) -> list[dict[str, Any]]:
    """What the server's proxy saw; nothing when the agent never started it."""
    from trialrun.mcp_proxy import read_events

    return read_events(server.events) if server.events.exists() else []


def _timed(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The proxy's events that say when their call arrived."""
    return [e for e in events if isinstance(e.get("timestamp"), int | float)]


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
        if call.error and MISMATCH in call.error:
            fail_mismatch(run, f"MCP server {server.name!r}: {call.error}")
    if events:
        order_by_time(run)


async def _appeared(path: Path, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while not path.exists():
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.02)
    return True
