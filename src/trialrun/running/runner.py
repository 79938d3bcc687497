"""Run the cases of a suite: pick each case's tool backend, drive its agent, judge the result.

Cases run concurrently up to ``jobs`` at a time, yet results and events come out in case order,
so ``-j 4`` produces exactly what ``-j 1`` does. A case's slot frees up as soon as its verdict is
known: an agent that is still exiting after its final output does so while the next case runs.
Each case gets a fresh agent process; nothing is shared between cases except the imported tool
module (record and live modes).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from trialrun.base.redact import redact
from trialrun.base.results import AgentRun, CaseResult, Failure
from trialrun.checks.verdict import judge_case
from trialrun.config import Case, Suite
from trialrun.config.models import Mode
from trialrun.conversation.session import Limits, Spawn, Teardowns, run_agent
from trialrun.errors import CassetteError, TrialrunError
from trialrun.tools.base import ToolBackend

if TYPE_CHECKING:
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
) -> list[CaseResult]:
    """Run every case of ``suite``; ``on_case_done`` is called in case order."""
    tools = _ToolModuleCache(suite, options.preflight)
    teardowns = Teardowns()
    services = _services_for(suite, options)
    if options.env is None:  # one snapshot for the run, not a copy of os.environ per agent
        options = dataclasses.replace(options, env=dict(os.environ))
    gate = asyncio.Semaphore(max(1, options.jobs))
    reported = 0
    done: dict[int, CaseResult] = {}

    def report_in_order() -> None:
        nonlocal reported
        while reported in done:
            progress.results[reported] = done[reported]
            if on_case_done is not None:
                on_case_done(reported, done[reported])
            reported += 1

    async def one(index: int, case: Case) -> None:
        async with gate:
            done[index] = await run_case(suite, case, options, tools, teardowns, services)
        report_in_order()

    try:
        if services is not None:
            services.start()
        await asyncio.gather(*(one(i, case) for i, case in enumerate(suite.cases)))
        await teardowns.wait_all()
    finally:
        if services is not None:
            services.stop()
    return progress.ordered()


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
    if services is None and (own := _services_for(suite, options)) is not None:
        return await _run_case_with_own_services(suite, case, options, tools, teardowns, own)
    tools = tools or _ToolModuleCache(suite, options.preflight)
    try:
        backend = _backend_for(case, options, tools)
    except CassetteError as exc:
        return _setup_failure(case, "cassette_error", str(exc))
    except TrialrunError as exc:
        return _setup_failure(case, "tool_registry_error", str(exc))
    case_services = services.for_case(case) if services is not None else None
    try:
        extra_env = _agent_extra_env(suite, options, case_services)
    except CassetteError as exc:
        backend.close(clean=False)
        if case_services is not None:
            case_services.discard()
        return _setup_failure(case, "cassette_error", str(exc))
    if case_services is not None and case_services.waits_for_exit:
        teardowns = None  # the proxies save their recordings as the agent's group stops
    run = await _converse(suite, case, options, backend, extra_env, teardowns, case_services)
    return _judge(case, run, options.mode, backend)


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

    Raises ``CassetteError`` when a service cannot open its recording.
    """
    extra_env: dict[str, str] = {}
    if suite.config.agent_channel == "fd":
        extra_env["TRIALRUN_MODE"] = options.mode
    if case_services is not None:
        extra_env.update(case_services.open(options.env))
    return extra_env


async def _converse(
    suite: Suite,
    case: Case,
    options: RunOptions,
    backend: ToolBackend,
    extra_env: dict[str, str],
    teardowns: Teardowns | None,
    case_services: CaseServices | None,
) -> AgentRun:
    """Run the agent on the case's tools, then close its services and tool backend.

    Their recordings are kept only when the agent ended cleanly; an interruption drops them.
    """
    config = suite.config
    limits = _limits(suite, case)
    clean = False
    try:
        spawn = Spawn(
            suite.agent_command,
            env=options.env,
            extra_env=extra_env or None,
            channel=config.agent_channel,
        )
        run = await run_agent(
            spawn,
            case_id=case.config.id,
            task_input=case.config.input,
            tools=backend,
            allowed_tools=frozenset(config.tool_registry),
            limits=limits,
            teardowns=teardowns,
        )
        if case_services is not None:
            services_of_case, case_services = case_services, None
            await _close_services(services_of_case, run)
        clean = run.failure is None
        _note_unused(run, backend)
    finally:
        if case_services is not None:  # interrupted: drop what the services recorded
            case_services.discard()
        backend.close(clean=clean)
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
    run.events = [redact(event) for event in run.events]
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

    return RecordingBackend(live, case.cassette_path)


def _note_unused(run: AgentRun, backend: ToolBackend) -> None:
    """How many cassette recordings no call used, and of which tools (replay only).

    They go before those of the MCP and model recordings, which the services already noted.
    """
    from trialrun.tools.cassette import ReplayBackend

    if isinstance(backend, ReplayBackend):
        unused = backend.cassette.unused()
        run.unused_recordings += len(unused)
        run.unused_recording_tools[:0] = [entry.tool for entry in unused]
    else:
        run.unused_recordings += backend.unused()


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
    """The run's MCP proxies and model gateway, when the suite declares any (imported lazily)."""
    if not suite.config.mcp_servers and suite.config.model_gateway is None:
        return None
    from trialrun.running.services import RunServices

    checked = options.preflight
    if checked is None:
        return RunServices(suite, options.mode)
    return RunServices(suite, options.mode, checked.prices, checked.mcp_calls)


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


def resolve_mode(suite: Suite, override: str | None) -> Mode:
    mode = override or suite.config.mode
    assert mode in ("replay", "record", "live")
    return mode  # type: ignore[return-value]
