"""``trialrun compare merge``: the shard directories of one compare become one compare run.

The shards are checked before anything is written, and every problem is reported at once, one
``ConfigError`` line per shard directory (exit 2): a directory that is not a compare shard, a
shard of another plan (seed, k, cases, judge, engine version) or of other bytes (subject,
incumbent, eval assets), a shard count that differs, a unit that two shards both ran, and units
that are not the ones ``compare.shards`` deals to the shard's index.

What is missing is not an error: the units of a shard that was not given are holes named after
it (``not-run``), as is the trigger eval when its shard is missing, so the receipt says
``partial`` and never counts them as zeros; the units an interrupted shard never finished are
holes the same way as in an interrupted compare.

The merge writes what an unsharded compare writes, to the same local store: ``receipt.json``
(built by ``receipt_doc`` from the same outcome ``build_outcome`` rolls up, so rows, comparisons,
statistics, verdict and content digest equal the unsharded run's for deterministic agents) and
``run.jsonl`` with every shard's ``arm_sample`` and trigger events and their transcripts. The
sandboxes stay on the shards' machines, so ``--rescore`` of a merged run can re-run only checks
that read the transcript.
"""

from __future__ import annotations

import shlex
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trialrun import __version__
from trialrun.compare.arms import SESSION_RUN_NAME
from trialrun.compare.engine import CompareResult, finish_compare_run
from trialrun.compare.outcome import CompareOutcome, build_outcome
from trialrun.compare.receipt_doc import ReceiptIdentity, assemble_receipt, compare_provenance
from trialrun.compare.records import Hole, trigger_outcome
from trialrun.compare.runlog_members import start_members
from trialrun.compare.shards import (
    ShardDoc,
    UnitId,
    hole_from_record,
    read_shard_dir,
    shard_units,
    triggers_shard,
)
from trialrun.compare.store import (
    ARM_SAMPLE_EVENT,
    RunDir,
    create_run_dir,
    new_run_id,
    read_run_log,
    row_event,
    sample_event,
)
from trialrun.compare.triggers import SELECTION_EVENT, TRIGGER_PROBE_EVENT
from trialrun.errors import ConfigError, ConfigErrors
from trialrun.receipt.envelope import format_ts
from trialrun.receipt.writer import ReceiptWriter
from trialrun.running.sharding import ShardSpec

__all__ = ["MergedSubject", "merge_shards"]

_BYTES_KEYS = ("content_digest", "incumbent_digest", "eval_assets_digest", "case_digests")
"""Plan fields that name bytes: a difference there is "other bytes", not "another plan"."""


@dataclass(frozen=True)
class MergedSubject:
    """The subject as the shards recorded it: what committing the receipt needs."""

    name: str
    subject_id: str | None
    """compare.yaml ``id``; None until ``trialrun publish`` assigns one."""
    path: str
    """Its folder on the shards' machine, as given: for the publish hint."""


def merge_shards(paths: Sequence[Path]) -> tuple[CompareResult, MergedSubject]:
    """Check the shards, then write the merged store entry."""
    if not paths:
        raise ConfigError("expected at least one compare shard directory to merge, found none")
    shards = _checked_shards(paths)
    plan = shards[0].plan
    count = shards[0].spec.count
    outcome = _merged_outcome(shards, plan, count)
    run_dir = create_run_dir(str(plan["content_digest"]), new_run_id())
    started = format_ts(time.time())
    with ReceiptWriter(run_dir.run_log) as log:
        log.emit("run_start", _run_meta(shards, plan, outcome, started))
        for shard in shards:
            _copy_arm_events(shard, run_dir, log)
        for sample in outcome.samples:
            log.emit("sample_checks", sample_event(sample))
        for row in outcome.rows:
            log.emit("row", row_event(row))
        provenance = compare_provenance(
            k=int(plan["k"]),
            seed=int(plan["seed"]),
            cases=outcome.cases,
            judge_command=plan["judge_command"],
            arm_orders=plan["units"],
            rescored_from=None,
            timestamp=min(shard.started_at for shard in shards),
        ) | {"shards": {"count": count, "merged": [shard.spec.index for shard in shards]}}
        identity = ReceiptIdentity(
            skill_name=str(plan["skill_name"]),
            content_digest=str(plan["content_digest"]),
            eval_assets_digest=str(plan["eval_assets_digest"]),
            case_digests=dict(plan["case_digests"]),
        )
        receipt = assemble_receipt(
            outcome, identity=identity, run_id=run_dir.run_id, provenance=provenance
        )
        finish_compare_run(run_dir, log, receipt, outcome, interrupted=None)
    subject_id = plan.get("skill_id")
    subject = MergedSubject(
        name=str(plan["skill_name"]),
        subject_id=subject_id if isinstance(subject_id, str) else None,
        path=shards[0].subject_path,
    )
    return CompareResult(outcome, receipt, run_dir, interrupted=False), subject


# ---- checking the shards ---------------------------------------------------------------------


def _checked_shards(paths: Sequence[Path]) -> list[ShardDoc]:
    """Every shard read and checked against the others, in index order; all problems at once."""
    errors: list[ConfigError] = []
    shards: list[ShardDoc] = []
    for path in paths:
        try:
            shards.append(read_shard_dir(Path(path)))
        except ConfigError as exc:
            errors.append(exc)
    if shards:
        reference = shards[0]
        version = _version_problem(reference)
        if version is not None:
            errors.append(version)
        agreeing = [reference]
        for shard in shards[1:]:
            problem = _plan_problem(reference, shard)
            if problem is None:
                agreeing.append(shard)
            else:  # refused already: one line per directory, not one per check it fails
                errors.append(ConfigError(problem, file=shard.path))
        errors.extend(_duplicate_problems(agreeing))
        errors.extend(_partition_problems(agreeing))
    failed = ConfigErrors.collect(errors)
    if failed is not None:
        raise failed
    return sorted(shards, key=lambda shard: shard.spec.index)


def _plan_problem(reference: ShardDoc, shard: ShardDoc) -> str | None:
    if shard.spec.count != reference.spec.count:
        return (
            f"expected shard I/{reference.spec.count} like {reference.path} (shard "
            f"{reference.spec}), found shard {shard.spec}: shards of one compare share N"
        )
    keys = sorted(set(reference.plan) | set(shard.plan))
    differ = [key for key in keys if reference.plan.get(key) != shard.plan.get(key)]
    if not differ:
        return None
    what = "other bytes" if set(differ) & set(_BYTES_KEYS) else "another plan"
    shown = "; ".join(
        f"{key} {_short(shard.plan.get(key))} (expected {_short(reference.plan.get(key))})"
        for key in differ[:3]
    )
    return f"a shard of {what} than {reference.path}: {shown}"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _duplicate_problems(shards: Sequence[ShardDoc]) -> list[ConfigError]:
    """A unit run by two given shards: the same shard twice, or two runs of one index."""
    owner: dict[UnitId, ShardDoc] = {}
    indices: dict[int, ShardDoc] = {}
    errors: list[ConfigError] = []
    for shard in shards:
        again = [unit for unit in shard.units if unit in owner]
        first = owner[again[0]] if again else indices.get(shard.spec.index)
        if first is not None:
            what = f"duplicated units {_unit_list(again)}" if again else f"shard {shard.spec}"
            errors.append(
                ConfigError(
                    f"{what} already merged from {first.path} (shard {first.spec}); "
                    "expected each unit in one shard and each shard once",
                    file=shard.path,
                )
            )
        indices.setdefault(shard.spec.index, shard)
        for unit in shard.units:
            owner.setdefault(unit, shard)
    return errors


def _partition_problems(shards: Sequence[ShardDoc]) -> list[ConfigError]:
    """Each shard must hold the units its index is dealt, and rows of those units only."""
    errors: list[ConfigError] = []
    for shard in shards:
        expected = shard_units(_plan_units(shard.plan), shard.spec)
        if list(shard.units) != expected:
            errors.append(
                ConfigError(
                    f"shard {shard.spec} holds units {_unit_list(shard.units)}; expected "
                    f"{_unit_list(expected)} (the plan's units dealt to index {shard.spec.index})",
                    file=shard.path,
                )
            )
            continue
        mine = {key for unit in shard.units for key in _scored_keys(shard.plan, unit)}
        found = {(row.case, row.rep) for row in shard.rows}
        found |= {(sample.case, sample.rep) for sample in shard.samples}
        stray = sorted(found - mine)
        arms = {row.opponent for row in shard.rows} | {sample.arm for sample in shard.samples}
        unknown = sorted(arms - set(shard.plan["arms"]))
        if unknown:
            errors.append(
                ConfigError(
                    f"rows or samples of arms {', '.join(unknown)}, which the plan does not "
                    f"have (arms: {', '.join(shard.plan['arms'])}): the shard's files were changed",
                    file=shard.path,
                )
            )
        elif stray:
            errors.append(
                ConfigError(
                    f"rows or samples of {_unit_list(stray)}, which shard {shard.spec} did not "
                    "run: the shard's files were changed",
                    file=shard.path,
                )
            )
    return errors


def _version_problem(reference: ShardDoc) -> ConfigError | None:
    version = reference.plan.get("engine_version")
    if version == __version__:
        return None
    return ConfigError(
        f"the shards were run by trialrun {version}, this is trialrun {__version__}; expected "
        "the same version in every shard and in the merge",
        file=reference.path,
    )


def _unit_list(units: Sequence[UnitId]) -> str:
    return ", ".join(f"{case}/{rep}" for case, rep in units) or "none"


def _plan_units(plan: dict[str, Any]) -> list[UnitId]:
    return [(str(entry["case"]), int(entry["rep"])) for entry in plan["units"]]


def _scored_keys(plan: dict[str, Any], unit: UnitId) -> list[UnitId]:
    """The (case, rep) rows of one unit: a session unit gives one per sub-case."""
    case, rep = unit
    if case == SESSION_RUN_NAME and plan["session_cases"]:
        return [(str(sub), rep) for sub in plan["session_cases"]]
    return [unit]


# ---- rolling up ------------------------------------------------------------------------------


def _merged_outcome(shards: Sequence[ShardDoc], plan: dict[str, Any], count: int) -> CompareOutcome:
    present = {shard.spec.index for shard in shards}
    holes = [hole_from_record(record) for record in plan["skipped"]]
    for index in range(1, count + 1):
        if index in present:
            continue
        missing = f"shard {index}/{count} was not merged (its directory was not given)"
        for unit in shard_units(_plan_units(plan), ShardSpec(index, count)):
            holes.extend(
                Hole(case, rep, "not-run", missing) for case, rep in _scored_keys(plan, unit)
            )
    triggers = None
    owner = next((s for s in shards if s.spec.index == triggers_shard(count)), None)
    if owner is not None and owner.triggers is not None:
        triggers = trigger_outcome(owner.triggers)
    elif owner is None and plan["triggers"]:
        detail = f"the trigger eval runs in shard {triggers_shard(count)}/{count}, not merged"
        holes.append(Hole("trigger eval", None, "not-run", detail))
    return build_outcome(
        samples=[sample for shard in shards for sample in shard.samples],
        rows=[row for shard in shards for row in shard.rows],
        opponents=plan["opponents"],
        planned=[(str(case), int(rep)) for case, rep in plan["scored"]],
        session_cases=plan["session_cases"],
        skipped=holes,
        triggers=triggers,
        seed=int(plan["seed"]),
    )


def _run_meta(
    shards: Sequence[ShardDoc], plan: dict[str, Any], outcome: CompareOutcome, started: str
) -> dict[str, Any]:
    command = shlex.join(["trialrun", "compare", "merge", *(str(s.path) for s in shards)])
    standard = start_members(str(plan["skill_name"]), shards[0].subject_path, command)
    return standard | {
        "command": "trialrun compare merge",
        "subject": shards[0].subject_path,
        "content_digest": plan["content_digest"],
        "k": plan["k"],
        "seed": plan["seed"],
        "arms": plan["arms"],
        "expected_rows": outcome.expected_rows,
        "plan": [
            {"case": entry["case"], "rep": entry["rep"], "arm_order": entry["order"]}
            for entry in plan["units"]
        ],
        "shards": [
            {"index": shard.spec.index, "count": shard.spec.count, "path": str(shard.path)}
            for shard in shards
        ],
        "engine_version": __version__,
        "started_at": started,
    }


def _copy_arm_events(shard: ShardDoc, run_dir: RunDir, log: ReceiptWriter) -> None:
    """The shard's arm runs and trigger events, logged again with their transcripts, so the
    merged run can be read back (and rescored) like any other."""
    source = RunDir(shard.path)
    for kind, data in read_run_log(source):
        if kind not in (ARM_SAMPLE_EVENT, TRIGGER_PROBE_EVENT, SELECTION_EVENT):
            continue
        record = data.get("run") if kind == TRIGGER_PROBE_EVENT else data
        name = record.get("transcript_file") if isinstance(record, dict) else None
        if isinstance(name, str):
            try:
                shutil.copyfile(source.transcripts / name, run_dir.transcripts / name)
            except OSError as exc:
                raise ConfigError(
                    f"cannot copy transcript {name}: {exc.strerror or exc}", file=shard.path
                ) from None
        log.emit(kind, data)
