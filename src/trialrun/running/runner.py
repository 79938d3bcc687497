"""Run the cases of a suite: pick each case's tool backend, drive its agent, judge the result.

Cases run concurrently up to ``jobs`` at a time, yet results and events come out in case order,
so ``-j 4`` produces exactly what ``-j 1`` does. A case's slot frees up as soon as its verdict is
known: an agent that is still exiting after its final output does so while the next case runs.
Each case gets a fresh agent process; nothing is shared between cases except the imported tool
module (record and live modes).

With pre-starting (``RunOptions.prestart``), the case after the running ones is prepared and its
agent started while they run: its interpreter start-up and imports overlap their work, and it
waits for ``task_start`` as any agent does. At most ``jobs`` + 1 agents are starting or running at
once; a prepared case that never gets its turn (an interruption) has its agent's process group
stopped and its services discarded.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import os
import time
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trialrun.base.redact import redact, redact_each
from trialrun.base.results import AgentRun, CaseResult, Failure, RecordingPlace
from trialrun.checks.verdict import judge_case
from trialrun.config import Case, Suite
from trialrun.config.models import Mode
from trialrun.config.paths import display_path
from trialrun.conversation.process import Spawn, StartedAgent, start_agent
from trialrun.conversation.session import Limits, run_agent
from trialrun.conversation.teardowns import Teardowns
from trialrun.errors import CassetteError, TrialrunError
from trialrun.running.case_commands import name_update_command, rerecord_command, update_command
from trialrun.running.network import RunSeal, judge_seal, network_seal
from trialrun.running.repeats import ONCE, Repeats, run_again
from trialrun.running.replay_env import agent_env
from trialrun.tools.base import ToolBackend

if TYPE_CHECKING:
    from trialrun.conversation.seal import AgentSeal
    from trialrun.running.preflight import Preflight
    from trialrun.running.services import CaseServices, RunServices

CaseCallback = Callable[[int, CaseResult], None]


@dataclass(frozen=True)
class RunOptions:
    mode: Mode
    jobs: int = 1
    env: Mapping[str, str] | None = None
    preflight: Preflight | None = None
    """What ``preflight.preflight`` read before the run (cassettes, tools): used, not re-read."""
    prestart: bool | None = None
    """Start the next case's agent while the running cases run; None: as ``prestarts`` says."""
    seal: RunSeal | None = None
    """The run's network seal (``running.network``); None: decided from the suite and mode."""
    repeats: Repeats = ONCE
    """``--repeat`` / ``--retries``: how often each case runs (``running.repeats``)."""
    update: bool = False
    """Record mode as ``--mode update``: tool calls with a recording are replayed (``updater``)."""
    keep_unused: bool = False
    """Update mode: keep the recordings no call used (after the calls' recordings)."""


@dataclass
class RunProgress:
    """Results gathered so far, in case order; survives an interruption of ``run_suite``."""

    results: dict[int, CaseResult] = field(default_factory=dict)

    def ordered(self) -> list[CaseResult]:
        return [self.results[i] for i in sorted(self.results)]


async def run_suite(
    suite: Suite,
    options: RunOptions,
    progress: RunProgress,
    on_case_done: CaseCallback | None = None,
    on_case_decided: CaseCallback | None = None,
    on_first_agent: Callable[[], None] | None = None,
) -> list[CaseResult]:
    """Run every case of ``suite``; ``on_case_done`` is called in case order.

    ``on_case_decided`` hears of each case as soon as its verdict is known, in whatever order
    the cases finish (a progress display: with ``-j``, a fast case need not wait for a slow one).
    ``on_first_agent`` is called once the first case is ready to run (with pre-started agents:
    its agent is starting), the moment for work that may overlap the agents' start-up.
    """
    tools = _ToolModuleCache(suite, options.preflight)
    teardowns = Teardowns()
    services = _services_for(suite, options)
    if options.env is None:  # one snapshot for the run, not a copy of os.environ per agent
        options = dataclasses.replace(options, env=dict(os.environ))
    jobs = max(1, options.jobs)
    gate = asyncio.Semaphore(jobs)
    if options.prestart is None:
        options = dataclasses.replace(options, prestart=prestarts(suite, options.mode))
    run_seal = options.seal if options.seal is not None else network_seal(suite, options.mode)
    options = dataclasses.replace(options, seal=run_seal)
    agents = asyncio.Semaphore(jobs + 1 if options.prestart else jobs)
    reported = 0
    done: dict[int, CaseResult] = {}
    first_agent: Callable[[], None] | None = on_first_agent

    def report_in_order() -> None:
        nonlocal reported
        while reported in done:
            progress.results[reported] = done[reported]
            if on_case_done is not None:
                on_case_done(reported, done[reported])
            reported += 1

    async def one(index: int, case: Case) -> None:
        # Both semaphores are fair, so cases are prepared, and their agents started, in order.
        nonlocal first_agent
        async with agents:
            prepared = await _prepare(suite, case, options, tools, services)
            if first_agent is not None:
                announce, first_agent = first_agent, None
                announce()
            try:
                async with gate:
                    done[index] = await prepared.run(teardowns)
                    if options.repeats != ONCE and prepared.setup_failure is None:
                        done[index] = await run_again(
                            done[index],
                            lambda: _run_fresh(suite, case, options, tools, services, teardowns),
                            options.repeats,
                            suite,
                            case,
                        )
                if on_case_decided is not None:
                    on_case_decided(index, done[index])
            finally:
                await prepared.discard()
        report_in_order()

    try:
        if services is not None:
            services.start()
        await _all_or_none([one(i, case) for i, case in enumerate(suite.cases)])
        await teardowns.wait_all()
    finally:
        run_seal.close()  # every agent has been reaped: what it stops is only the spawner
        if services is not None:
            services.stop()
    return progress.ordered()


async def _all_or_none(work: list[Coroutine[Any, Any, None]]) -> None:
    """Run every case; when one fails or we are cancelled, every case stops before we return.

    A plain ``gather`` returns as soon as its first child is cancelled, and ``asyncio.run`` then
    cancels the others a second time, in the middle of stopping their agents.
    """
    tasks = [asyncio.ensure_future(job) for job in work]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        # A second cancellation (a second SIGTERM) must not leave before they have: their
        # agents would be left unreaped as the loop closes. Each stops within a bound.
        cancelled = False
        while not all(task.done() for task in tasks):
            try:
                await asyncio.wait(tasks)
            except asyncio.CancelledError:
                cancelled = True
        for task in tasks:  # retrieved, so that none is reported as never retrieved
            if not task.cancelled():
                task.exception()
        if cancelled:
            raise asyncio.CancelledError from None
        raise


async def run_case(
    suite: Suite,
    case: Case,
    options: RunOptions,
    tools: _ToolModuleCache | None = None,
    teardowns: Teardowns | None = None,
    services: RunServices | None = None,
) -> CaseResult:
    """Run one case from start to verdict. Faults of the case never escape as exceptions.

    With ``teardowns``, a successful agent may still be exiting when this returns: its exit
    code and stderr tail are complete once ``teardowns.wait_all()`` returned. Without
    ``services``, a suite that needs them (MCP proxies, the model gateway) gets its own for
    this case (the pytest plugin runs cases one by one).
    """
    if options.seal is None:
        seal = network_seal(suite, options.mode)
        try:
            options = dataclasses.replace(options, seal=seal)
            return await run_case(suite, case, options, tools, teardowns, services)
        finally:
            if teardowns is None:  # else the spawner ends with us, once its agents are done
                seal.close()
    if services is None and (own := _services_for(suite, options)) is not None:
        return await _run_case_with_own_services(suite, case, options, tools, teardowns, own)
    options = dataclasses.replace(options, prestart=False)  # one case: nothing to overlap with
    tools = tools or _ToolModuleCache(suite, options.preflight)
    prepared = await _prepare(suite, case, options, tools, services)
    try:
        return await prepared.run(teardowns)
    finally:
        await prepared.discard()


async def _run_fresh(
    suite: Suite,
    case: Case,
    options: RunOptions,
    tools: _ToolModuleCache,
    services: RunServices | None,
    teardowns: Teardowns,
) -> CaseResult:
    """One more run of ``case`` (``--repeat``, ``--retries``), with a fresh agent and backend."""
    options = dataclasses.replace(options, prestart=False)  # it runs now: nothing to overlap
    prepared = await _prepare(suite, case, options, tools, services)
    try:
        return await prepared.run(teardowns)
    finally:
        await prepared.discard()


@dataclass
class _PreparedCase:
    """A case ready to run: its tool backend, its open services, maybe its agent started.

    Exactly one of ``run`` and ``discard`` releases what it holds; ``discard`` after ``run``
    does nothing.
    """

    suite: Suite
    case: Case
    options: RunOptions
    backend: ToolBackend | None = None
    case_services: CaseServices | None = None
    extra_env: dict[str, str] = field(default_factory=dict)
    seal: AgentSeal | None = None
    agent: StartedAgent | None = None
    setup_failure: CaseResult | None = None
    taken: bool = False
    recordings_before: dict[Path, bytes | None] | None = None
    """Record and update modes: the case's recording files before it ran (their review)."""

    async def run(self, teardowns: Teardowns | None) -> CaseResult:
        self.taken = True
        if self.setup_failure is not None:
            return self.setup_failure
        assert self.backend is not None
        if self.case_services is not None and self.case_services.waits_for_exit:
            teardowns = None  # the proxies save their recordings as the agent's group stops
        run = await _converse(self, teardowns)
        return _judge(self.case, run, self.options.mode, self.backend)

    async def discard(self) -> None:
        if self.seal is not None:
            # First, and not after an await a second Ctrl-C could cut short: its watch holds a
            # thread and sockets. A connect of the agent being stopped then fails (ENOSYS).
            self.seal.stop()
        if self.agent is not None:
            await self.agent.discard()  # nothing to do once its session claimed it
        if self.taken:
            return
        self.taken = True
        if self.case_services is not None:
            self.case_services.discard()
        if self.backend is not None:
            self.backend.close(clean=False)


async def _prepare(
    suite: Suite,
    case: Case,
    options: RunOptions,
    tools: _ToolModuleCache,
    services: RunServices | None,
) -> _PreparedCase:
    """Open the case's tool backend and services; start its agent too when pre-starting."""
    prepared = _PreparedCase(suite, case, options)
    if options.mode == "record":
        from trialrun.running.recording_review import case_recording_files, snapshot

        prepared.recordings_before = snapshot(case_recording_files(suite, case))
    try:
        prepared.backend = _backend_for(case, options, tools)
    except CassetteError as exc:
        message = str(exc)
        if options.mode == "replay" and not case.cassette_path.exists():
            message += f"\nTo record this case: {rerecord_command(suite, case)}"
        prepared.setup_failure = _setup_failure(case, "cassette_error", message)
        return prepared
    except TrialrunError as exc:
        prepared.setup_failure = _setup_failure(case, "tool_registry_error", str(exc))
        return prepared
    prepared.case_services = services.for_case(case) if services is not None else None
    try:
        prepared.extra_env = _agent_extra_env(suite, options, prepared.case_services)
    except CassetteError as exc:
        await prepared.discard()
        prepared.setup_failure = _setup_failure(case, "cassette_error", str(exc))
        return prepared
    assert options.seal is not None  # run_suite and run_case decide it first
    seal = options.seal
    ports = prepared.case_services.ports() if prepared.case_services is not None else []
    prepared.seal = seal.for_case(ports)
    if options.prestart:
        try:
            prepared.agent = await start_agent(
                _spawn_of(suite, options, prepared.extra_env, prepared.seal),
                suite.config.max_message_bytes,
            )
        except BaseException:  # cancelled: no one will discard a case never handed out
            if prepared.seal is not None:
                prepared.seal.stop()
            raise
    return prepared


async def _run_case_with_own_services(
    suite: Suite,
    case: Case,
    options: RunOptions,
    tools: _ToolModuleCache | None,
    teardowns: Teardowns | None,
    services: RunServices,
) -> CaseResult:
    """One case alone (the pytest plugin) with the MCP proxies and gateway its suite needs."""
    services.start()
    try:
        return await run_case(suite, case, options, tools, teardowns, services)
    finally:
        services.stop()


def _agent_extra_env(
    suite: Suite, options: RunOptions, case_services: CaseServices | None
) -> dict[str, str]:
    """What the agent's environment gets on top of ``options.env``; opens the case's services.

    First the replay (or record) environment (``replay_env``), then the channel and services.

    Raises ``CassetteError`` when a service cannot open its recording.
    """
    # The services' variables go on top: the gateway's URLs must win, or the agent escapes it.
    extra_env = agent_env(
        options.mode, os.environ if options.env is None else options.env, suite.config.replay_env
    )
    if suite.config.agent_channel == "fd":
        extra_env["TRIALRUN_MODE"] = options.mode
    if case_services is not None:
        extra_env.update(case_services.open(options.env))
    return extra_env


def _spawn_of(
    suite: Suite, options: RunOptions, extra_env: dict[str, str], seal: AgentSeal | None
) -> Spawn:
    return Spawn(
        suite.agent_command,
        env=options.env,
        extra_env=extra_env or None,
        channel=suite.config.agent_channel,
        spawner=None if options.seal is None else options.seal.spawner,
        seal=seal,
    )


async def _converse(prepared: _PreparedCase, teardowns: Teardowns | None) -> AgentRun:
    """Run the agent on the case's tools, then close its services and tool backend.

    Their recordings are kept only when the agent ended cleanly; an interruption drops them.
    """
    suite, case, backend = prepared.suite, prepared.case, prepared.backend
    assert backend is not None
    case_services = prepared.case_services
    clean = False
    try:
        run = await run_agent(
            _spawn_of(suite, prepared.options, prepared.extra_env, prepared.seal),
            case_id=case.config.id,
            task_input=case.config.input,
            tools=backend,
            allowed_tools=frozenset(suite.config.tool_registry),
            limits=_limits(suite, case),
            teardowns=teardowns,
            prestarted=prepared.agent,
            rerecord=update_command(suite, case) if prepared.options.mode == "replay" else None,
        )
        judge_seal(run, prepared.seal)
        if case_services is not None:
            services_of_case, case_services = case_services, None
            await _close_services(services_of_case, run)
            if prepared.options.mode == "replay":
                name_update_command(run, update_command(suite, case))
        clean = run.failure is None
        # Recordings are committed only when the case ended cleanly: say what was left alone.
        run.recording_kept = prepared.options.mode == "record" and not clean
        _note_unused(run, backend)
        if prepared.options.mode == "replay":
            _note_stale(run, suite, case)
    finally:
        if case_services is not None:  # interrupted: drop what the services recorded
            case_services.discard()
        backend.close(clean=clean)
    if clean and prepared.recordings_before is not None:
        from trialrun.running.recording_review import review_case

        run.recording_review = review_case(
            prepared.recordings_before, case.normalization, display_path
        )
    return run


def _limits(suite: Suite, case: Case) -> Limits:
    config = suite.config
    return Limits(
        wall_ms=case.budgets.max_wall_ms,
        idle_ms=config.idle_timeout_ms,
        max_message_bytes=config.max_message_bytes,
        kill_grace_ms=config.kill_grace_ms,
    )


async def _close_services(case_services: CaseServices, run: AgentRun) -> None:
    """Merge what the services saw into ``run``; keep their recordings if the agent ended clean."""
    try:
        await case_services.close(run, clean=run.failure is None)
    except (OSError, TrialrunError) as exc:  # a recording that cannot be read or saved
        run.failure = Failure("cassette_error", str(exc), "error", run.stderr_tail)


def _judge(case: Case, run: AgentRun, mode: Mode, backend: ToolBackend) -> CaseResult:
    """The case's verdict from its redacted trace, with the cassette it used."""
    # The trace goes to run.jsonl and report.html: redact it once, here, for every consumer.
    # Events with nothing to redact stay as they are: nothing changes them from here on.
    run.events = redact_each(run.events)
    run.events_redacted = True
    result = judge_case(case, run)
    _describe_cassette(result, case, mode, backend)
    return result


def _backend_for(case: Case, options: RunOptions, tools: _ToolModuleCache) -> ToolBackend:
    mode = options.mode
    if mode == "replay":
        from trialrun.tools.cassette import Cassette, ReplayBackend

        checked = options.preflight.cassettes if options.preflight is not None else {}
        parsed = checked.get(case.cassette_path)
        cassette = parsed.fresh() if parsed is not None else Cassette.load(case.cassette_path)
        return ReplayBackend(cassette, case.normalization)
    from trialrun.tools.live import LiveBackend

    live = LiveBackend(tools.get(), timeout_s=tools.timeout_s, normalization=case.normalization)
    if mode == "live":
        return live
    from trialrun.tools.recorder import RecordingBackend

    recorder = RecordingBackend(live, case.cassette_path)
    if not options.update:
        return recorder
    from trialrun.tools.cassette import Cassette
    from trialrun.tools.updater import UpdateBackend

    old: Cassette | None = None
    try:
        # The cassette is read here, not by preflight: update mode may create it.
        if case.cassette_path.exists():
            old = Cassette.load(case.cassette_path)
    except BaseException:
        recorder.close(clean=False)
        raise
    return UpdateBackend(old, recorder, case.normalization, keep_unused=options.keep_unused)


def _note_unused(run: AgentRun, backend: ToolBackend) -> None:
    """How many cassette recordings no call used, and of which tools (replay only).

    They go before those of the MCP and model recordings, which the services already noted.
    """
    from trialrun.tools.cassette import ReplayBackend

    if isinstance(backend, ReplayBackend):
        # Their tools only: parsing every unused recording of a big cassette would cost memory.
        unused = backend.cassette.unused_tools()
        run.unused_recordings += len(unused)
        run.unused_recording_tools[:0] = unused
        path = str(backend.cassette.path)
        lines = backend.cassette.unused_lines()
        places = [RecordingPlace("tool", path, n, t) for n, t in zip(lines, unused, strict=True)]
        run.unused_places[:0] = places
    else:
        run.unused_recordings += backend.unused()


def _note_stale(run: AgentRun, suite: Suite, case: Case) -> None:
    """Name the case's stale recordings (they still replay; nothing fails for them)."""
    from trialrun.running.staleness import stale_recordings

    for stale in stale_recordings(suite, case, time.time()):
        run.stale_recordings.append(stale.text(display_path(stale.path)))


class _ToolModuleCache:
    """Imports the suite's ``tool_module`` once per run, on first need, unless preflight did."""

    def __init__(self, suite: Suite, checked: Preflight | None = None) -> None:
        self._suite = suite
        self._tools: Mapping[str, Any] | None = checked.tools if checked is not None else None
        self.timeout_s = suite.config.tool_timeout_ms / 1000

    def get(self) -> Mapping[str, Any]:
        if self._tools is None:
            from trialrun.running.preflight import select_suite_tools

            self._tools = select_suite_tools(self._suite)
        return self._tools


def _services_for(suite: Suite, options: RunOptions) -> RunServices | None:
    """The run's MCP proxies, model gateway and HTTP recorder (imported lazily); None in live
    mode when the suite declares neither MCP servers nor a gateway."""
    if (
        options.mode == "live"
        and not suite.config.mcp_servers
        and suite.config.model_gateway is None
    ):
        return None
    from trialrun.running.services import RunServices

    checked = options.preflight
    return RunServices(
        suite,
        options.mode,
        None if checked is None else checked.prices,
        None if checked is None else checked.mcp_calls,
        update=options.update,
        keep_unused=options.keep_unused,
    )


def _setup_failure(case: Case, kind: str, message: str) -> CaseResult:
    run = AgentRun(case_id=case.config.id)
    run.failure = Failure(kind=kind, message=message, status="error")
    event = {"type": "agent_error", "case_id": case.config.id, "kind": kind, "message": message}
    run.events.append(redact(event))
    return judge_case(case, run)


def _describe_cassette(result: CaseResult, case: Case, mode: Mode, backend: ToolBackend) -> None:
    path = case.cassette_path
    result.cassette_path = str(path) if mode != "live" else None
    if mode == "replay":
        from trialrun.tools.cassette import ReplayBackend

        # Replay never writes its cassette: the digest of the bytes it loaded still describes it.
        assert isinstance(backend, ReplayBackend)
        result.cassette_sha256 = backend.cassette.sha256
        return
    # Record mode may just have replaced the file: hash what is there now.
    try:
        result.cassette_sha256 = hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        result.cassette_sha256 = None


def prestarts(suite: Suite, mode: Mode) -> bool:
    """Whether agents are started ahead of their case: the suite's ``prestart``, else replay only.

    Record and live cases act on the real world (tools, MCP servers, model providers): an agent
    and its servers starting while the previous case still changes that world could see it half
    changed, so there the user opts in.
    """
    if suite.config.prestart is not None:
        return suite.config.prestart
    return mode == "replay"


def resolve_mode(suite: Suite, override: str | None) -> Mode:
    mode = override or suite.config.mode
    assert mode in ("replay", "record", "live")
    return mode  # type: ignore[return-value]
