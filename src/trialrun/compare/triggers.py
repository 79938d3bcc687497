"""The trigger eval of ``trialrun compare``: does the candidate reach for the subject when it
should, and leave it alone when it should not?

Each prompt of ``triggers.yaml`` runs once through the candidate arm's own agent, with the prompt
as the task, in its own sandbox (the subject staged, no fixture, files or setup), through
``trialrun.compare.arms`` like every other arm: same timeout, same one retry after a non-zero
exit. ``evaluate.trigger_fired`` reads the transcript to decide whether the subject fired.

Errors are symmetric (reference §1.10 item 7): a probe whose agent died, or that never ran because
the run was interrupted, has ``fired`` None and counts in neither cell of its row, only in
``errored``; the seed engine counted a dead should-trigger call as a miss and a dead
should-not-trigger call as nothing, which flatters precision.

Storage: each probe's transcript goes to ``transcripts/`` as ``<probe>.candidate.0.<ext>`` and a
``trigger_probe`` event in ``run.jsonl`` records the prompt, what was expected, what happened and
the arm run; ``--rescore`` re-decides ``fired`` from those stored transcripts without running any
agent. Probe names (``trigger-01``, ...) are kept clear of case names and of the session, so no
two runs share a sandbox or a transcript file.

With ``triggers.command`` in compare.yaml no agent runs: ``evaluate_with_selector`` asks the
selector (``trialrun.compare.selector``) about each prompt instead.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Collection, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from trialrun.compare.arms import SESSION_RUN_NAME, ArmRun, ArmSpec, PlannedRun, run_all
from trialrun.compare.config import CaseConfig, CompareCase, EvalAssets
from trialrun.compare.evaluate import TranscriptFormat, trigger_fired
from trialrun.compare.placeholders import expand_argv
from trialrun.compare.records import TriggerOutcome, TriggerProbe, trigger_outcome
from trialrun.compare.selector import (
    SelectorCallError,
    ask_selector,
    build_catalog,
    selection_payload,
)
from trialrun.compare.store import (
    RunDir,
    arm_run_record,
    read_run_log,
    transcript_name,
    write_transcript,
)
from trialrun.errors import ConfigError
from trialrun.receipt.writer import ReceiptWriter

__all__ = [
    "TRIGGER_PROBE_EVENT",
    "ProbePlan",
    "evaluate_triggers",
    "plan_probes",
    "probe_from_run",
    "rescore_probes",
    "run_probes",
]

TRIGGER_PROBE_EVENT = "trigger_probe"
SELECTION_EVENT = "trigger_selection"
PROBE_REP = 0
_NOT_RUN = "not run: the compare was interrupted before this probe finished"


@dataclass(frozen=True)
class ProbePlan:
    """One trigger prompt and the planned candidate run that asks it."""

    prompt: str
    should_trigger: bool
    run: PlannedRun


def plan_probes(assets: EvalAssets, taken: Collection[str] = ()) -> list[ProbePlan]:
    """One planned candidate run per prompt, should-trigger prompts first, in file order.

    ``taken`` names runs that already exist (cases); the session's name is always taken.
    """
    if assets.triggers is None:
        return []
    prompts = [(p, True) for p in assets.triggers.should_trigger]
    prompts += [(p, False) for p in assets.triggers.should_not_trigger]
    reserved = {*taken, SESSION_RUN_NAME}
    prefix = "trigger"
    while any(f"{prefix}-{i:02d}" in reserved for i in range(1, len(prompts) + 1)):
        prefix = "_" + prefix
    source = assets.evals_dir / "triggers.yaml"
    plans: list[ProbePlan] = []
    for index, (prompt, should) in enumerate(prompts, start=1):
        name = f"{prefix}-{index:02d}"
        # A blank prompt cannot be a task; it still runs, as a single space, and is reported.
        config = CaseConfig(task=prompt if prompt.strip() else " ")
        unit = CompareCase(name=name, file=source, config=config, checks=(), fixture=None)
        plans.append(ProbePlan(prompt, should, PlannedRun(name, PROBE_REP, ("candidate",), unit)))
    return plans


def probe_from_run(
    plan: ProbePlan, run: ArmRun | None, transcript_format: TranscriptFormat, name: str
) -> TriggerProbe:
    """The probe's verdict: fired or not from the transcript, None when the agent died."""
    if run is None:
        return TriggerProbe(plan.prompt, plan.should_trigger, None, _NOT_RUN)
    if run.status != "ok":
        error = run.error or f"the agent run ended as {run.status}"
        return TriggerProbe(plan.prompt, plan.should_trigger, None, error)
    fired = trigger_fired(run.transcript, transcript_format, name)
    return TriggerProbe(plan.prompt, plan.should_trigger, fired)


def run_probes(
    plans: Sequence[ProbePlan],
    candidate: ArmSpec,
    assets: EvalAssets,
    run_dir: RunDir,
    log: ReceiptWriter,
    *,
    jobs: int,
) -> tuple[list[TriggerProbe], bool]:
    """Run every probe (up to ``jobs`` at once) and store each as it finishes.

    Returns the probes in plan order and whether the run was interrupted (Ctrl-C); a probe that
    never finished is errored, never a miss or a true negative.
    """
    transcript_format = assets.config.agent.transcript
    by_name = {plan.run.case: plan for plan in plans}
    finished: dict[str, ArmRun] = {}

    def on_done(run: ArmRun) -> None:
        finished[run.case] = run
        plan = by_name[run.case]
        probe = probe_from_run(plan, run, transcript_format, assets.config.name)
        file_name = transcript_name(run.case, run.arm, run.rep, transcript_format)
        write_transcript(run_dir, file_name, run.transcript)
        log.emit(TRIGGER_PROBE_EVENT, _probe_event(probe, arm_run_record(run, file_name)))

    work = run_all(
        [plan.run for plan in plans],
        [candidate],
        assets,
        jobs=jobs,
        workdir=run_dir.sandboxes,
        on_done=on_done,
    )
    interrupted = False
    try:
        asyncio.run(work)
    except KeyboardInterrupt:
        interrupted = True
    probes = [
        probe_from_run(plan, finished.get(plan.run.case), transcript_format, assets.config.name)
        for plan in plans
    ]
    return probes, interrupted


def replay_selections(source: RunDir, log: ReceiptWriter) -> list[TriggerProbe]:
    """A stored run's selector decisions, as made: rescoring re-decides rows, not the selector."""
    probes: list[TriggerProbe] = []
    for kind, data in read_run_log(source):
        if kind != SELECTION_EVENT:
            continue
        try:
            probe = TriggerProbe(
                prompt=str(data["prompt"]),
                should_trigger=bool(data["should_trigger"]),
                fired=None if data["fired"] is None else bool(data["fired"]),
                error=None if data.get("error") is None else str(data["error"]),
            )
        except (KeyError, TypeError) as exc:
            raise ConfigError(
                f"{source.run_log}: a {SELECTION_EVENT} event cannot be read back ({exc!r})"
            ) from None
        log.emit(SELECTION_EVENT, asdict(probe))
        probes.append(probe)
    return probes


def rescore_probes(
    source: RunDir, run_dir: RunDir, log: ReceiptWriter, assets: EvalAssets
) -> list[TriggerProbe]:
    """The stored run's probes re-decided from their transcripts (copied into ``run_dir``)."""
    transcript_format = assets.config.agent.transcript
    probes: list[TriggerProbe] = []
    for kind, data in read_run_log(source):
        if kind != TRIGGER_PROBE_EVENT:
            continue
        try:
            prompt, should = str(data["prompt"]), bool(data["should_trigger"])
            record = data["run"]
            status = str(record["status"])
            file_name = str(record["transcript_file"])
            transcript = (source.transcripts / file_name).read_text(encoding="utf-8")
            shutil.copyfile(source.transcripts / file_name, run_dir.transcripts / file_name)
        except (KeyError, TypeError, ValueError, OSError) as exc:
            raise ConfigError(
                f"{source.run_log}: a {TRIGGER_PROBE_EVENT} event cannot be read back ({exc!r}); "
                "expected prompt, should_trigger and run.status / run.transcript_file"
            ) from None
        if status == "ok":
            fired = trigger_fired(transcript, transcript_format, assets.config.name)
            probe = TriggerProbe(prompt, should, fired)
        else:
            error = record.get("error")
            probe = TriggerProbe(prompt, should, None, str(error) if error else status)
        probes.append(probe)
        log.emit(TRIGGER_PROBE_EVENT, _probe_event(probe, record))
    return probes


def evaluate_triggers(
    assets: EvalAssets,
    arms: Sequence[ArmSpec],
    run_dir: RunDir,
    log: ReceiptWriter,
    *,
    jobs: int,
    source: RunDir | None,
    selector_k: int = 1,
) -> tuple[TriggerOutcome | None, bool]:
    """The trigger eval of one compare: run (or, from ``source``, re-decide) every probe.

    With ``triggers.command`` in compare.yaml the selector decides each prompt (``selector_k``
    times); otherwise the candidate agent runs once per prompt. None when there is nothing to
    probe (no ``triggers.yaml``, no prompts, or a rescored run that stored none). The flag says
    the run was interrupted.
    """
    if source is not None:
        stored = rescore_probes(source, run_dir, log, assets)
        stored += replay_selections(source, log)
        return (trigger_outcome(stored) if stored else None), False
    if assets.config.triggers is not None:
        timeout_s = assets.config.agent.timeout_minutes * 60
        selected = evaluate_with_selector(assets, assets.subject, k=selector_k, timeout_s=timeout_s)
        for probe in selected:
            log.emit(SELECTION_EVENT, asdict(probe))
        return (trigger_outcome(selected) if selected else None), False
    plans = plan_probes(assets, {case.name for case in assets.cases})
    candidate = next((arm for arm in arms if arm.name == "candidate"), None)
    if not plans or candidate is None:
        return None, False
    probes, interrupted = run_probes(plans, candidate, assets, run_dir, log, jobs=jobs)
    return trigger_outcome(probes), interrupted


def evaluate_with_selector(
    assets: EvalAssets, subject: Path, *, k: int, timeout_s: float
) -> list[TriggerProbe]:
    """Ask ``triggers.command`` about every prompt of ``triggers.yaml``, ``k`` times each.

    ``subject`` is the folder evaluated (its siblings form the catalog). Probes come
    should-trigger prompts first, in file order, each prompt's repetitions together. Empty when
    there is no triggers.yaml. Raises ConfigError when compare.yaml names no ``triggers.command``
    or ``k`` is below 1.
    """
    section = assets.config.triggers
    if section is None:
        raise ConfigError(
            f"{assets.evals_dir / 'compare.yaml'}: expected a 'triggers.command' to evaluate "
            "triggers by selector, found no 'triggers' section"
        )
    if k < 1:
        raise ConfigError(f"--triggers-k: expected a whole number >= 1, found {k}")
    if assets.triggers is None:
        return []
    prompts = [(prompt, True) for prompt in assets.triggers.should_trigger]
    prompts += [(prompt, False) for prompt in assets.triggers.should_not_trigger]
    catalog = build_catalog(subject, assets.config.name)
    values = {"evals": str(assets.evals_dir), "name": assets.config.name}
    argv = expand_argv(section.command, values)
    probes: list[TriggerProbe] = []
    for prompt, should in prompts:
        payload = selection_payload(catalog, prompt)
        for rep in range(k):
            try:
                selected = ask_selector(argv, payload, rep, timeout_s)
            except SelectorCallError as error:
                probes.append(TriggerProbe(prompt, should, None, str(error)))
                continue
            probes.append(TriggerProbe(prompt, should, assets.config.name in selected))
    return probes


def _probe_event(probe: TriggerProbe, record: dict[str, Any]) -> dict[str, Any]:
    return {
        "prompt": probe.prompt,
        "should_trigger": probe.should_trigger,
        "fired": probe.fired,
        "error": probe.error,
        "run": record,
    }
