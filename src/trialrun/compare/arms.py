"""The arms of a compare run: which exist, in what order they run, and running one.

* ``baseline`` stages nothing; ``candidate`` stages the subject as it is on disk; ``incumbent``
  stages ``arms.incumbent.path``, or the published ``arms.incumbent.version`` from the team
  store.
* The plan is every (case, rep) in case order, reps inside; the session, when there is one, is
  planned like a case named ``session``. Within each (case, rep) the arm order is shuffled by
  ``random.Random(seed)`` and recorded (reference §1.10 item 4: a fixed order can bias the
  efficiency comparison through drift, rate limits and prompt caching).
* One arm runs in ``workdir/<case>/<rep>/<arm>/``: fixture, ``files``, the staged subject,
  ``setup`` (``/bin/sh -ce``, 60 s; a failure makes the arm ``failed``, never retried, as it is
  the case that is broken), then the agent command with ``{task}``, ``{sandbox}``, ``{evals}``,
  ``{name}`` and ``{max_turns}`` expanded in one pass by ``trialrun.compare.placeholders``, so
  text of the task is never expanded again. The command runs without a shell: a task with
  spaces or quotes stays one argument. The env has ``TRIALRUN_REP`` and ``TRIALRUN_MAX_TURNS``
  (the case's or session's ``max_turns``, default 200): the seed engine passes it as
  ``--max-turns``, which only the agent command can do, so the command decides how to use it.
* A non-zero exit gets ONE retry in a fresh sandbox (``<arm>.retry/``); a timeout gets none, as
  it would most likely time out again at the full cost. Either way a dead arm is a hole for the
  caller, never a zero.
* ``run_all`` runs up to ``jobs`` arms at once, started in plan order; its result and its
  ``on_done`` calls follow the plan order whatever finished first, so receipts do not depend on
  scheduling. Of those arms, at most ``agent.max_concurrent`` run their agent command at any
  moment (sandbox and setup do not count: they call no provider); the others wait for a slot.
"""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from trialrun.compare.config import CompareCase, CompareSession, EvalAssets
from trialrun.compare.observer import CompareObserver, NullObserver
from trialrun.compare.placeholders import expand, expand_argv
from trialrun.compare.sandbox import CommandOutcome, SandboxError, fresh_sandbox, run_command
from trialrun.errors import ConfigError

__all__ = [
    "ARM_NAMES",
    "SESSION_RUN_NAME",
    "AgentSlots",
    "ArmName",
    "ArmRun",
    "ArmSpec",
    "ArmStatus",
    "PlannedRun",
    "RunUnit",
    "arm_specs",
    "plan_runs",
    "run_all",
    "run_arm",
]

ArmName = Literal["baseline", "candidate", "incumbent"]
ArmStatus = Literal["ok", "failed", "timeout"]
ARM_NAMES: tuple[ArmName, ...] = ("baseline", "candidate", "incumbent")
SESSION_RUN_NAME = "session"
SETUP_TIMEOUT_S = 60.0
RETRY_SUFFIX = ".retry"

RunUnit = CompareCase | CompareSession


@dataclass(frozen=True)
class AgentSlots:
    """How many agent commands may run at once across a run, and who hears when one starts."""

    gate: asyncio.Semaphore
    observer: CompareObserver = field(default_factory=NullObserver)


@dataclass(frozen=True)
class ArmSpec:
    name: ArmName
    subject: Path | None
    """The folder staged at ``agent.stage``; None for the baseline (nothing staged)."""


@dataclass(frozen=True)
class PlannedRun:
    case: str
    """The case name, or ``session`` for the session."""
    rep: int
    """0-based; the agent sees it as ``TRIALRUN_REP``."""
    arm_order: tuple[ArmName, ...]
    """The order the arms start in, drawn from the seeded RNG."""
    unit: RunUnit


@dataclass(frozen=True)
class ArmRun:
    case: str
    rep: int
    arm: ArmName
    status: ArmStatus
    transcript: str
    """The agent's stdout of its last attempt (empty when it never ran)."""
    sandbox: Path
    """The sandbox of the last attempt, kept for checks and for inspection."""
    exit_code: int | None
    """None after a timeout or when nothing could run; negative: killed by that signal."""
    attempts: int
    """1, or 2 after a retry; 0 when the agent never started (sandbox or setup failure)."""
    duration_s: float
    """Wall time of the last attempt's agent process (setup excluded)."""
    error: str | None = None
    """Why the arm is not ``ok``: expected / found / where, for the holes of the report."""
    stderr_tail: str = ""


def arm_specs(assets: EvalAssets, subject: Path, *, team: str | None = None) -> list[ArmSpec]:
    """baseline, candidate and, when configured, incumbent (in that canonical order).

    ``team`` (``--team``) is where a published incumbent version is found; None means the team
    in config.toml.
    """
    specs = [ArmSpec("baseline", None), ArmSpec("candidate", Path(subject).resolve())]
    incumbent = assets.config.arms.incumbent
    if incumbent is not None and incumbent.version is not None:
        specs.append(ArmSpec("incumbent", _published_version(assets, incumbent.version, team)))
    elif assets.incumbent_path is not None:
        specs.append(ArmSpec("incumbent", assets.incumbent_path))
    return specs


def _published_version(assets: EvalAssets, version: str, explicit_team: str | None) -> Path:
    """``arms.incumbent.version`` (``3``, ``v3`` or ``latest``) from the team store."""
    from trialrun.team.publish import team_from_config
    from trialrun.team.store import TeamError, TeamStore

    where = assets.evals_dir / "compare.yaml"
    team, subject_id = team_from_config(explicit_team), assets.config.id
    if team is None or subject_id is None:
        raise ConfigError(
            f"arms.incumbent.version '{version}' is looked up in the team store: it needs a "
            "team (--team or config.toml) and an id in compare.yaml (`trialrun publish` "
            "assigns one)",
            file=where,
            key="incumbent",
        )
    store = TeamStore(team)
    try:
        published = store.versions(subject_id)
        wanted = published[-1] if version == "latest" and published else version.removeprefix("v")
        number = int(wanted)
        if number not in published:
            raise TeamError(
                f"{team}: no version {version} of {subject_id} (published: {published})"
            )
        return store.version_dir(subject_id, number)
    except (TeamError, ValueError) as exc:
        raise ConfigError(f"arms.incumbent.version: {exc}", file=where, key="incumbent") from None


def plan_runs(
    cases: Sequence[RunUnit], k: int, arms: Sequence[ArmSpec], seed: int
) -> list[PlannedRun]:
    """Every (case, rep), case order then rep, each with its seeded arm order."""
    if k < 1:
        raise ValueError(f"k must be at least 1, found {k}")
    names = [_unit_name(unit) for unit in cases]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ConfigError(
            f"two runs would share the name {duplicates[0]!r} and so one sandbox; rename "
            f"cases/{duplicates[0]}.yaml (the session is planned as '{SESSION_RUN_NAME}')"
        )
    rng = random.Random(seed)
    planned: list[PlannedRun] = []
    for unit, name in zip(cases, names, strict=True):
        for rep in range(k):
            order = [arm.name for arm in arms]
            rng.shuffle(order)
            planned.append(PlannedRun(name, rep, tuple(order), unit))
    return planned


async def run_arm(
    run: PlannedRun,
    arm: ArmSpec,
    assets: EvalAssets,
    *,
    workdir: Path,
    timeout_s: float | None = None,
    agent_slots: AgentSlots | None = None,
) -> ArmRun:
    """Run one arm of one (case, rep); ``timeout_s`` overrides the configured minutes.

    ``agent_slots``, shared by the arms of a run, bounds how many agent commands run at once.
    """
    arm_dir = workdir / run.case / str(run.rep)
    deadline = timeout_s if timeout_s is not None else _configured_timeout_s(run.unit, assets)
    slots = agent_slots or AgentSlots(asyncio.Semaphore(1))
    first = await _attempt(run, arm, assets, arm_dir / arm.name, workdir, deadline, slots)
    if first.status != "failed" or first.attempts == 0 or first.exit_code is None:
        return first
    second = await _attempt(
        run, arm, assets, arm_dir / (arm.name + RETRY_SUFFIX), workdir, deadline, slots
    )
    return replace(second, attempts=2) if second.attempts else second


async def run_all(
    planned: Sequence[PlannedRun],
    arms: Sequence[ArmSpec],
    assets: EvalAssets,
    *,
    jobs: int,
    workdir: Path,
    on_done: Callable[[ArmRun], None] | None = None,
    timeout_s: float | None = None,
    observer: CompareObserver | None = None,
) -> list[ArmRun]:
    """Run every planned arm, up to ``jobs`` at once; results in plan order (then arm order).

    ``on_done`` is called in that same order as soon as an arm and all before it finished;
    ``observer`` hears of each arm as it really starts and ends. If the run is cancelled, the
    running arms' process groups are killed, the arms that had finished are still delivered to
    ``on_done`` (in order, with gaps), and the cancellation propagates.
    """
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, found {jobs}")
    watcher = observer or NullObserver()
    by_name = {arm.name: arm for arm in arms}
    schedule = [(run, by_name[name]) for run in planned for name in run.arm_order]
    gate = asyncio.Semaphore(jobs)
    cap = assets.config.agent.max_concurrent
    agent_slots = AgentSlots(asyncio.Semaphore(cap if cap is not None else jobs), watcher)

    async def one(run: PlannedRun, arm: ArmSpec) -> ArmRun:
        async with gate:
            watcher.arm_started(run.case, run.rep, arm.name)
            done = await run_arm(
                run, arm, assets, workdir=workdir, timeout_s=timeout_s, agent_slots=agent_slots
            )
            watcher.arm_finished(run.case, run.rep, arm.name, done.status, done.duration_s)
            return done

    tasks = [asyncio.ensure_future(one(run, arm)) for run, arm in schedule]
    results: list[ArmRun] = []
    try:
        for task in tasks:
            result = await task
            results.append(result)
            if on_done is not None:
                on_done(result)
    finally:
        unfinished = [task for task in tasks if not task.done()]
        for task in unfinished:
            task.cancel()
        await asyncio.gather(*unfinished, return_exceptions=True)
        if len(results) < len(tasks) and on_done is not None:
            for task in tasks[len(results) :]:
                if task.done() and not task.cancelled() and task.exception() is None:
                    on_done(task.result())
    return results


def _unit_name(unit: RunUnit) -> str:
    return unit.name if isinstance(unit, CompareCase) else SESSION_RUN_NAME


def _configured_timeout_s(unit: RunUnit, assets: EvalAssets) -> float:
    # A case's own limit wins only when written; otherwise compare.yaml's agent limit applies.
    if unit.config.timeout_written:
        return unit.config.timeout_minutes * 60.0
    return assets.config.agent.timeout_minutes * 60.0


async def _attempt(
    run: PlannedRun,
    arm: ArmSpec,
    assets: EvalAssets,
    sandbox: Path,
    workdir: Path,
    timeout: float,
    agent_slots: AgentSlots,
) -> ArmRun:
    config = assets.config
    stage = Path(expand(config.agent.stage, {"name": config.name}))
    max_turns = str(run.unit.config.max_turns)
    env = dict(os.environ, TRIALRUN_REP=str(run.rep), CLAUDE_PROJECT_DIR=str(sandbox.resolve()))
    env["TRIALRUN_MAX_TURNS"] = max_turns

    def dead(error: str, outcome: CommandOutcome | None = None) -> ArmRun:
        tail = outcome.stderr_tail if outcome else ""
        return ArmRun(run.case, run.rep, arm.name, "failed", "", sandbox, None, 0, 0.0, error, tail)

    try:
        fresh_sandbox(
            sandbox,
            fixture=run.unit.fixture,
            files=run.unit.config.files,
            stage=stage if arm.subject is not None else None,
            subject=arm.subject,
            workdir=workdir,
        )
    except SandboxError as exc:
        return dead(str(exc))
    setup = run.unit.config.setup
    if setup is not None:
        done = await run_command(
            ["/bin/sh", "-ce", setup], cwd=sandbox, env=env, timeout_s=SETUP_TIMEOUT_S
        )
        if done.exit_code != 0:
            found = _how_it_ended(done, SETUP_TIMEOUT_S)
            return dead(f"setup of {run.case} failed in {sandbox}: {found}", done)
    values = {
        "task": run.unit.config.task,
        "sandbox": str(sandbox.resolve()),
        "evals": str(assets.evals_dir),
        "name": config.name,
        "max_turns": max_turns,
    }
    argv = expand_argv(config.agent.command, values)
    async with agent_slots.gate:
        agent_slots.observer.agent_started(run.case, run.rep, arm.name)
        done = await run_command(argv, cwd=sandbox, env=env, timeout_s=timeout)
    if done.start_error is not None:
        return dead(f"could not start the agent command {argv[0]!r}: {done.start_error}", done)
    status: ArmStatus = "ok" if done.exit_code == 0 else "timeout" if done.timed_out else "failed"
    error = None if status == "ok" else f"agent {_how_it_ended(done, timeout)} in {sandbox}"
    return ArmRun(
        case=run.case,
        rep=run.rep,
        arm=arm.name,
        status=status,
        transcript=done.stdout,
        sandbox=sandbox,
        exit_code=done.exit_code,
        attempts=1,
        duration_s=done.duration_s,
        error=error,
        stderr_tail=done.stderr_tail,
    )


def _how_it_ended(done: CommandOutcome, timeout: float) -> str:
    if done.timed_out:
        return f"timed out after {timeout:g}s (its process group was killed)"
    if done.exit_code is not None and done.exit_code < 0:
        return f"was killed by signal {-done.exit_code}"
    last = done.stderr_tail.strip().splitlines()[-1:]
    return f"exited with code {done.exit_code} (expected 0)" + (
        f": {last[0][:200]}" if last else ""
    )
