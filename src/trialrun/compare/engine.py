"""``trialrun compare`` from end to end: load, plan, run the arms, score, decide, report, store.

The stages, cheap refusals first: the eval assets are loaded and every input checked (an unknown
``--case``, a rubric with no judge to read it) before any agent runs, and cases whose ``requires``
is unmet are skipped (``compare.requires``). Then every (case, rep, arm) runs in its own sandbox
(``trialrun.compare.arms``); each finished arm is written to the store at once (transcript file
and an ``arm_sample`` event in ``run.jsonl``), so an interrupted run keeps everything it paid for.
Scoring reads only those arm runs, which is what makes ``--rescore`` possible: it rebuilds them
from a stored run and re-decides every row with today's checks and judge, running no agent.

Interruption (Ctrl-C): the running arms are killed, the finished ones are scored, and the receipt
says ``execution_status: partial`` and names each (case, rep) that never ran as a hole; it is never
counted as a zero. Judge calls run concurrently up to ``-j`` (and at most ``judge.max_concurrent``
at once); rows keep plan order whatever finished first. An optional ``CompareObserver`` hears of
every arm and row as it starts and ends (the progress line); nothing decided depends on it.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from trialrun import __version__
from trialrun.base.fsutil import write_json
from trialrun.compare.arms import (
    SESSION_RUN_NAME,
    ArmRun,
    ArmSpec,
    PlannedRun,
    RunUnit,
    arm_specs,
    plan_runs,
    run_all,
)
from trialrun.compare.config import CompareCase, EvalAssets, load_eval_assets
from trialrun.compare.evaluate import efficiency_of, evaluate_checks, measured_efficiency
from trialrun.compare.judge import JudgeDecision, ask_both_orders
from trialrun.compare.observer import CompareObserver, NullObserver
from trialrun.compare.outcome import CompareOutcome, build_outcome
from trialrun.compare.placeholders import expand_argv, placeholder_problems
from trialrun.compare.receipt_doc import build_receipt, compare_provenance, receipt_identity
from trialrun.compare.records import (
    ArmSampleResult,
    CompareRow,
    Hole,
    SampleEfficiency,
    TriggerOutcome,
)
from trialrun.compare.requires import apply_requirements
from trialrun.compare.rows import ArmResult, decide_row
from trialrun.compare.runlog_members import end_members, start_members
from trialrun.compare.shards import (
    SHARD_FILE,
    create_shard_dir,
    hole_record,
    shard_document,
    shard_units,
    triggers_shard,
    units_sha256,
)
from trialrun.compare.store import (
    RunDir,
    copy_arm_runs,
    create_run_dir,
    find_run_dir,
    log_arm_run,
    new_run_id,
    read_run_log,
    row_event,
    sample_event,
)
from trialrun.compare.triggers import evaluate_triggers
from trialrun.errors import ConfigError
from trialrun.home.digest import content_digest
from trialrun.receipt.envelope import format_ts
from trialrun.receipt.writer import ReceiptWriter
from trialrun.running.sharding import ShardSpec

__all__ = ["CompareOptions", "CompareResult", "ShardRunResult", "run_compare", "run_compare_shard"]


@dataclass(frozen=True)
class CompareOptions:
    """What the command line asked for; None means "as compare.yaml says"."""

    subject: Path
    k: int | None = None
    case_names: tuple[str, ...] = ()
    judge_command: tuple[str, ...] | None = None
    jobs: int = 1
    seed: int | None = None
    rescore: str | None = None
    triggers_k: int = 1
    command_line: str = "trialrun compare"
    """As typed, for the run log's ``run_start`` (``verifyCommand``)."""
    team: str | None = None
    """``--team``: where ``arms.incumbent.version`` is looked up (else config.toml's team)."""


@dataclass(frozen=True)
class CompareResult:
    outcome: CompareOutcome
    receipt: dict[str, Any]
    run_dir: RunDir
    interrupted: bool


@dataclass(frozen=True)
class ShardRunResult:
    path: Path
    """The shard directory (``compare.shards``)."""
    document: dict[str, Any]
    """Its ``shard.json``."""
    interrupted: bool


@dataclass(frozen=True)
class _Plan:
    assets: EvalAssets
    units: tuple[RunUnit, ...]
    arms: tuple[ArmSpec, ...]
    planned: tuple[PlannedRun, ...]
    k: int
    seed: int
    judge_command: tuple[str, ...] | None
    skipped: tuple[Hole, ...] = ()  # unmet ``requires``: named as holes, never planned


def run_compare(options: CompareOptions, observer: CompareObserver | None = None) -> CompareResult:
    """Run (or with ``rescore`` re-decide) one compare; write its store entry and receipt."""
    watcher = observer or NullObserver()
    plan = _make_plan(options)
    if options.rescore is not None:
        source = find_run_dir(options.rescore)
        digest = _stored_digest(source)
    else:
        source = None
        digest = content_digest(plan.assets.subject)
    run_dir = create_run_dir(digest, new_run_id())
    meta = _run_meta(plan, options, digest, source)
    with ReceiptWriter(run_dir.run_log) as log:
        log.emit("run_start", meta)
        outcome, interrupted = _run_and_score(
            plan, options, run_dir, log, source=source, observer=watcher
        )
        provenance = compare_provenance(
            k=plan.k,
            seed=plan.seed,
            cases=outcome.cases,
            judge_command=plan.judge_command,
            arm_orders=_arm_orders(plan),
            rescored_from=source.run_id if source is not None else None,
            timestamp=meta["started_at"],
        )
        receipt = build_receipt(
            outcome,
            assets=plan.assets,
            subject=plan.assets.subject,
            run_id=run_dir.run_id,
            provenance=provenance,
        )
        receipt["content_digest"] = digest
        finish_compare_run(run_dir, log, receipt, outcome, interrupted=interrupted)
    return CompareResult(outcome, receipt, run_dir, interrupted)


def finish_compare_run(
    run_dir: RunDir,
    log: ReceiptWriter,
    receipt: dict[str, Any],
    outcome: CompareOutcome,
    *,
    interrupted: bool | None,
) -> None:
    """Write the receipt and the HTML report, then ``run_end``: a compare and a merge end alike
    (``interrupted`` None: a merge, whose ``run_end`` has no ``interrupted`` member)."""
    write_json(run_dir.receipt, receipt)
    from trialrun.compare.report_html import write_compare_report  # loads the report views

    write_compare_report(run_dir, receipt, outcome)
    passed = outcome.verdict == "PASS" and not outcome.broken_setup
    stopped = {} if interrupted is None else {"interrupted": interrupted}
    log.close(
        end_members(interrupted=bool(interrupted), verified=passed, samples=outcome.samples)
        | {"verdict": outcome.verdict, "execution_status": outcome.execution_status}
        | {"expected_rows": outcome.expected_rows, "scored_rows": outcome.scored_rows}
        | stopped
        | {"broken_setup": [health.command for health in outcome.broken_setup]}
    )


def run_compare_shard(
    options: CompareOptions, spec: ShardSpec, out: Path, observer: CompareObserver | None = None
) -> ShardRunResult:
    """Run shard ``spec`` of the compare into a fresh shard directory under ``out``.

    The plan is the whole compare's; the shard runs, checks and judges its units only
    (``compare.shards``) and writes ``shard.json`` for ``compare merge``; no receipt, no commit.
    """
    plan = _make_plan(options)
    digest = content_digest(plan.assets.subject)
    plan_doc = _plan_document(plan, options, digest)
    units = shard_units([(run.case, run.rep) for run in plan.planned], spec)
    chosen = set(units)
    mine = replace(plan, planned=tuple(r for r in plan.planned if (r.case, r.rep) in chosen))
    run_dir = create_shard_dir(out, plan.assets.config.name, spec)
    meta = _run_meta(mine, options, digest, None) | {
        "shard": {"index": spec.index, "count": spec.count, "units": [list(u) for u in units]}
    }
    with ReceiptWriter(run_dir.run_log) as log:
        log.emit("run_start", meta)
        with_triggers = spec.index == triggers_shard(spec.count)
        outcome, interrupted = _run_and_score(
            mine, options, run_dir, log, source=None, with_triggers=with_triggers, observer=observer
        )
        document = shard_document(
            plan=plan_doc,
            spec=spec,
            units=units,
            samples=outcome.samples,
            rows=outcome.rows,
            triggers=outcome.triggers,
            interrupted=interrupted,
            started_at=meta["started_at"],
            subject_path=str(plan.assets.subject),
        )
        write_json(run_dir.path / SHARD_FILE, document)
        # A shard decides no verdict: only the merge can say the comparison passed.
        log.close(
            end_members(interrupted=interrupted, verified=False, samples=outcome.samples)
            | {"units": len(units), "rows": len(outcome.rows), "interrupted": interrupted}
        )
    return ShardRunResult(run_dir.path, document, interrupted)


def _run_and_score(
    plan: _Plan,
    options: CompareOptions,
    run_dir: RunDir,
    log: ReceiptWriter,
    *,
    source: RunDir | None,
    with_triggers: bool = True,
    observer: CompareObserver | None = None,
) -> tuple[CompareOutcome, bool]:
    """Run (or copy from ``source``) the planned arms, then the trigger eval, then score."""
    watcher = observer or NullObserver()
    if source is None:
        arm_runs, interrupted = _run_arms(plan, options.jobs, run_dir, log, watcher)
    else:
        arm_runs, interrupted = copy_arm_runs(source, run_dir, log), False
    triggers = None  # like the session, the trigger eval is skipped when --case narrows
    if with_triggers and not interrupted and not options.case_names:
        watcher.phase("triggers")
        triggers, interrupted = evaluate_triggers(
            plan.assets,
            plan.arms,
            run_dir,
            log,
            jobs=options.jobs,
            source=source,
            selector_k=options.triggers_k,
        )
    return _score(plan, arm_runs, options.jobs, log, triggers, watcher), interrupted


# ---- planning --------------------------------------------------------------------------------


def _make_plan(options: CompareOptions) -> _Plan:
    assets = load_eval_assets(options.subject)
    cases = _selected_cases(assets, options.case_names)
    # --case narrows to named cases; the session is one shared run, so it goes with them.
    units: list[RunUnit] = list(cases)
    if assets.session is not None and not options.case_names:
        units.append(assets.session)
    judge = assets.config.judge
    if options.judge_command is not None:
        _check_judge_option(options.judge_command)
    judge_command = options.judge_command or (tuple(judge.command) if judge else None)
    unjudged = [case.name for case in cases if case.config.judge and not judge_command]
    if unjudged:
        raise ConfigError(
            f"cases {unjudged} have a judge rubric but no judge command is set: expected "
            "judge.command in compare.yaml or --judge-command",
            file=assets.evals_dir / "compare.yaml",
        )
    k = options.k if options.k is not None else assets.config.k
    seed = options.seed if options.seed is not None else assets.config.seed
    arms = tuple(arm_specs(assets, assets.subject, team=options.team))
    units, skipped = apply_requirements(units)
    planned = tuple(plan_runs(units, k, arms, seed))
    return _Plan(assets, tuple(units), arms, planned, k, seed, judge_command, tuple(skipped))


def _check_judge_option(argv: Sequence[str]) -> None:
    """``--judge-command`` has no file to be checked with, so it is checked here, before any run."""
    for part in argv:
        for problem in placeholder_problems(part, "--judge-command"):
            raise ConfigError(problem)


def _selected_cases(assets: EvalAssets, names: Sequence[str]) -> list[CompareCase]:
    if not names:
        return list(assets.cases)
    by_name = {case.name: case for case in assets.cases}
    unknown = [name for name in names if name not in by_name]
    if unknown:
        known = ", ".join(sorted(by_name)) or "none"
        raise ConfigError(
            f"--case {unknown[0]}: no such case in {assets.evals_dir}; known: {known}"
        )
    return [by_name[name] for name in dict.fromkeys(names)]


def _opponents(plan: _Plan) -> list[str]:
    return [arm.name for arm in plan.arms if arm.name != "candidate"]


def _scored_units(plan: _Plan) -> list[tuple[str, int]]:
    """Every (case, rep) that gives one row per opponent; a session gives one per sub-case."""
    keys: list[tuple[str, int]] = []
    for run in plan.planned:
        if run.case == SESSION_RUN_NAME and plan.assets.session is not None:
            keys.extend((sub.name, run.rep) for sub in plan.assets.session.cases)
        else:
            keys.append((run.case, run.rep))
    return keys


def _arm_orders(plan: _Plan) -> list[dict[str, Any]]:
    return [
        {"case": run.case, "rep": run.rep, "order": list(run.arm_order)} for run in plan.planned
    ]


def _plan_document(plan: _Plan, options: CompareOptions, digest: str) -> dict[str, Any]:
    """What identifies the plan in every shard's ``shard.json``: equal in all shards of one
    compare, so ``compare merge`` can refuse shards of another plan or other bytes."""
    scored = _scored_units(plan)
    cases = [case for case, _ in scored]
    identity = receipt_identity(plan.assets, plan.assets.subject, cases, digest=digest)
    incumbent = next((arm.subject for arm in plan.arms if arm.name == "incumbent"), None)
    config = plan.assets.config
    arm_orders = _arm_orders(plan)
    return {
        "engine_version": __version__,
        "skill_name": config.name,
        "skill_id": config.id,
        "seed": plan.seed,
        "k": plan.k,
        "arms": [arm.name for arm in plan.arms],
        "opponents": _opponents(plan),
        "units": arm_orders,
        "units_sha256": units_sha256(arm_orders),
        "scored": [[case, rep] for case, rep in scored],
        "session_cases": [sub.name for sub in plan.assets.session.cases]
        if plan.assets.session is not None
        else [],
        "skipped": [hole_record(hole) for hole in plan.skipped],
        "judge_command": list(plan.judge_command) if plan.judge_command else None,
        "triggers": not options.case_names
        and (plan.assets.triggers is not None or config.triggers is not None),
        "content_digest": digest,
        "incumbent_digest": content_digest(incumbent) if incumbent is not None else None,
        "eval_assets_digest": identity.eval_assets_digest,
        "case_digests": identity.case_digests,
    }


def _run_meta(
    plan: _Plan, options: CompareOptions, digest: str, source: RunDir | None
) -> dict[str, Any]:
    standard = start_members(plan.assets.config.name, plan.assets.subject, options.command_line)
    return standard | {
        "command": "trialrun compare",
        "subject": str(plan.assets.subject),
        "content_digest": digest,
        "k": plan.k,
        "seed": plan.seed,
        "jobs": options.jobs,
        "arms": [arm.name for arm in plan.arms],
        "expected_rows": len(_scored_units(plan)) * len(_opponents(plan)),
        "plan": [
            {"case": run.case, "rep": run.rep, "arm_order": list(run.arm_order)}
            for run in plan.planned
        ],
        "rescored_from": str(source.path) if source is not None else None,
        "started_at": format_ts(time.time()),
    }


def _stored_digest(source: RunDir) -> str:
    for kind, data in read_run_log(source):
        if kind == "run_start" and isinstance(data.get("content_digest"), str):
            return str(data["content_digest"])
    raise ConfigError(f"{source.run_log}: expected a run_start event naming its content_digest")


# ---- running the arms ------------------------------------------------------------------------


def _run_arms(
    plan: _Plan, jobs: int, run_dir: RunDir, log: ReceiptWriter, observer: CompareObserver
) -> tuple[list[ArmRun], bool]:
    """Run every planned arm; on Ctrl-C keep the finished ones and say it was interrupted."""
    finished: list[ArmRun] = []
    transcript_format = plan.assets.config.agent.transcript

    def on_done(run: ArmRun) -> None:
        finished.append(run)
        log_arm_run(run, run_dir, log, transcript_format)

    observer.arms_planned(
        [(run.case, run.rep) for run in plan.planned], [arm.name for arm in plan.arms]
    )
    work = run_all(
        plan.planned,
        plan.arms,
        plan.assets,
        jobs=jobs,
        workdir=run_dir.sandboxes,
        on_done=on_done,
        observer=observer,
    )
    try:
        asyncio.run(work)
    except KeyboardInterrupt:
        return finished, True
    return finished, False


# ---- scoring ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Scored:
    """One arm's run of one scored unit (a case, or one session sub-case)."""

    sample: ArmSampleResult
    result: ArmResult | None
    """None for a dead arm: a hole in every row it is part of."""
    transcript: str


def _score(
    plan: _Plan,
    arm_runs: Sequence[ArmRun],
    jobs: int,
    log: ReceiptWriter,
    triggers: TriggerOutcome | None = None,
    observer: CompareObserver | None = None,
) -> CompareOutcome:
    watcher = observer or NullObserver()
    watcher.phase("scoring")
    units = {run.case: run.unit for run in plan.planned}
    scored: dict[tuple[str, int, str], _Scored] = {}
    for run in arm_runs:
        unit = units.get(run.case)
        if unit is None:
            continue  # a rescore with fewer cases than the stored run
        for entry in _score_arm_run(run, unit, plan):
            scored[(entry.sample.case, entry.sample.rep, entry.sample.arm)] = entry
            log.emit("sample_checks", sample_event(entry.sample))
    decisions: list[Callable[[], CompareRow]] = []
    keys: list[tuple[str, int, str]] = []
    judge_slots = _judge_slots(plan, jobs)
    for case, rep in _scored_units(plan):
        candidate = scored.get((case, rep, "candidate"))
        for opponent in _opponents(plan):
            other = scored.get((case, rep, opponent))
            if candidate is None or other is None:
                continue  # never ran (interrupted): build_outcome names it as a hole
            # A session sub-case is not a key of ``units``: it gets no judge, as sessions never do.
            judge = _judge_for(plan, units.get(case), candidate, other, judge_slots)
            decisions.append(_decider(case, rep, opponent, candidate, other, judge))
            keys.append((case, rep, opponent))
    watcher.rows_planned(keys)
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        rows = list(pool.map(lambda decide: _watched(decide, watcher), decisions))
    for row in rows:
        log.emit("row", row_event(row))
    session = plan.assets.session
    return build_outcome(
        samples=[entry.sample for entry in scored.values()],
        rows=rows,
        opponents=_opponents(plan),
        planned=_scored_units(plan),
        session_cases=[sub.name for sub in session.cases] if session is not None else (),
        skipped=plan.skipped,
        triggers=triggers,
        seed=plan.seed,
    )


def _score_arm_run(run: ArmRun, unit: RunUnit, plan: _Plan) -> list[_Scored]:
    if isinstance(unit, CompareCase):
        checked = [(unit.name, unit.checks)]
    else:
        checked = [(sub.name, sub.checks) for sub in unit.cases]
    transcript_format = plan.assets.config.agent.transcript
    efficiency = efficiency_of(run.transcript, transcript_format) if run.status == "ok" else None
    if run.status == "ok" and transcript_format == "text":
        # A text transcript reports nothing of itself; the wall time trialrun measured is real.
        efficiency = measured_efficiency(run.duration_s)
    entries: list[_Scored] = []
    for index, (name, checks) in enumerate(checked):
        if run.status != "ok":
            sample = ArmSampleResult(
                name, run.rep, run.arm, run.status, attempts=run.attempts, error=run.error
            )
            entries.append(_Scored(sample, None, run.transcript))
            continue
        passed, total, outcomes = evaluate_checks(
            checks,
            transcript=run.transcript,
            transcript_format=transcript_format,
            sandbox=run.sandbox,
        )
        # A shared session is counted once in the efficiency means: on its first sub-case.
        reported = efficiency if index == 0 and efficiency is not None else None
        sample = ArmSampleResult(
            case=name,
            rep=run.rep,
            arm=run.arm,
            status="ok",
            checks=tuple((outcome.name, outcome.passed) for outcome in outcomes),
            efficiency=SampleEfficiency(
                turns=reported.turns,
                duration_ms=reported.duration_ms,
                cost_usd=reported.cost_usd,
                tokens=reported.tokens,
            )
            if reported is not None
            else None,
            attempts=run.attempts,
            unrunnable=tuple((o.name, o.detail) for o in outcomes if o.could_not_run),
        )
        entries.append(_Scored(sample, ArmResult(run.arm, passed, total), run.transcript))
    return entries


def _judge_slots(plan: _Plan, jobs: int) -> threading.Semaphore:
    """``judge.max_concurrent`` slots shared by every judge call of the run (else ``-j``)."""
    section = plan.assets.config.judge
    cap = section.max_concurrent if section is not None else None
    return threading.Semaphore(cap if cap is not None else max(1, jobs))


def _judge_for(
    plan: _Plan,
    unit: RunUnit | None,
    candidate: _Scored,
    opponent: _Scored,
    slots: threading.Semaphore,
) -> Callable[[], JudgeDecision] | None:
    """The judge thunk of a case with a rubric; None for no rubric and for session sub-cases."""
    if not isinstance(unit, CompareCase) or unit.config.judge is None or not plan.judge_command:
        return None
    rubric, task = unit.config.judge, unit.config.task
    values = {
        "task": task,
        "evals": str(plan.assets.evals_dir),
        "name": plan.assets.config.name,
        "max_turns": str(unit.config.max_turns),
    }
    command = expand_argv(plan.judge_command, values)
    judge_section = plan.assets.config.judge
    escalate = judge_section.escalate_command if judge_section is not None else None
    escalate_argv = expand_argv(escalate, values) if escalate else None

    def judge() -> JudgeDecision:
        with slots:  # the orderings of one row are asked one after the other: one slot
            return ask_both_orders(
                command,
                task=task,
                rubric=rubric,
                candidate_transcript=candidate.transcript,
                opponent_transcript=opponent.transcript,
                escalate_command=escalate_argv,
            )

    return judge


def _watched(decide: Callable[[], CompareRow], observer: CompareObserver) -> CompareRow:
    row = decide()
    observer.row_decided(row.case, row.rep, row.opponent, row.row.outcome.value, row.row.decided_by)
    return row


def _decider(
    case: str,
    rep: int,
    opponent: str,
    candidate: _Scored,
    other: _Scored,
    judge: Callable[[], JudgeDecision] | None,
) -> Callable[[], CompareRow]:
    return lambda: CompareRow(
        case, rep, opponent, decide_row(candidate.result, other.result, judge)
    )
