"""Compare shards: which (case, rep) units a shard runs, and the ``shard.json`` it leaves.

``trialrun compare SUBJECT --shard I/N`` runs on N machines. Each computes the whole plan (every
(case, rep) with its seeded arm order, exactly as an unsharded compare) and runs its share of
whole units: every arm of a (case, rep), its checks and its judge calls stay in one shard, so
every row is decided where both of its arms ran. Units are dealt round robin in plan order, the
first to shard 1, so shard sizes differ by at most one unit and the k repetitions of a case
spread over the shards rather than piling onto one. The trigger eval, when the plan has one, is
one more piece of work and goes to shard N, which never holds more units than any other shard.

A shard directory holds ``shard.json`` (below), ``run.jsonl`` (the shard's event log, with an
``arm_sample`` event per arm run, as a store entry has), ``transcripts/`` and ``sandboxes/``.
``shard.json`` is written last, atomically, and says:

* ``plan``: what identifies the plan, equal in every shard of one compare: engine version, seed,
  k, the planned units with their arm orders and their SHA-256 (``units_sha256``), the scored
  (case, rep) list, opponents, skipped cases, judge command, whether a trigger eval is planned,
  the subject's name and id, and the digests of the bytes: ``content_digest`` (the subject),
  ``incumbent_digest``, ``eval_assets_digest`` and ``case_digests``;
* ``shard``: its index, count and unit ids (``[case, rep]`` pairs);
* ``samples`` and ``rows``: every scored arm sample and every decided row, in full, so the merge
  needs neither the sandboxes nor a judge; ``triggers``: the trigger eval's probes (shard N);
* ``interrupted`` and ``started_at``.

``trialrun compare merge`` (``trialrun.compare.merge``) reads these back with
``read_shard_dir``; anything that does not read as a shard is a ``ConfigError`` naming the file.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, TypeVar, get_args

from trialrun.artifacts.rundir import safe_dir_name
from trialrun.base import canonjson
from trialrun.base.signedjson import loads_unique
from trialrun.compare.judge import JudgeCause, JudgeDecision, JudgeWinner
from trialrun.compare.records import (
    ArmSampleResult,
    ArmStatus,
    CompareRow,
    Hole,
    HoleKind,
    SampleEfficiency,
    TriggerOutcome,
    TriggerProbe,
)
from trialrun.compare.rows import DecidedBy, Outcome, Row
from trialrun.compare.store import RunDir, row_event, sample_event
from trialrun.errors import ConfigError
from trialrun.running.sharding import ShardSpec

__all__ = [
    "SHARD_FILE",
    "SHARD_KIND",
    "ShardDoc",
    "UnitId",
    "assign_units",
    "create_shard_dir",
    "hole_from_record",
    "hole_record",
    "read_shard_dir",
    "row_record",
    "sample_record",
    "shard_document",
    "shard_units",
    "triggers_shard",
    "units_sha256",
]

SHARD_FILE = "shard.json"
SHARD_KIND = "trialrun compare shard"
SHARD_SCHEMA_VERSION = 1

UnitId = tuple[str, int]
"""One (case, rep) of the plan; the session is the case ``session``."""


def assign_units(units: Sequence[UnitId], count: int) -> dict[UnitId, int]:
    """Every unit's 1-based shard among ``count``: dealt round robin in plan order."""
    if count < 1:
        raise ValueError(f"shard count must be at least 1, found {count}")
    if len(set(units)) != len(units):
        raise ValueError(f"expected each (case, rep) once in the plan, found {list(units)}")
    return {unit: position % count + 1 for position, unit in enumerate(units)}


def shard_units(units: Sequence[UnitId], spec: ShardSpec) -> list[UnitId]:
    """The units shard ``spec`` runs, in plan order."""
    assignment = assign_units(units, spec.count)
    return [unit for unit in units if assignment[unit] == spec.index]


def triggers_shard(count: int) -> int:
    """The shard that runs the trigger eval: the last, as round robin gives it the fewest units."""
    return count


def units_sha256(arm_orders: Sequence[dict[str, Any]]) -> str:
    """SHA-256 of the planned units and their arm orders as canonical JSON."""
    text = canonjson.dumps(list(arm_orders))
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def shard_document(
    *,
    plan: dict[str, Any],
    spec: ShardSpec,
    units: Sequence[UnitId],
    samples: Sequence[ArmSampleResult],
    rows: Sequence[CompareRow],
    triggers: TriggerOutcome | None,
    interrupted: bool,
    started_at: str,
    subject_path: str,
) -> dict[str, Any]:
    """The ``shard.json`` document of one finished (or interrupted) shard."""
    return {
        "schema_version": SHARD_SCHEMA_VERSION,
        "kind": SHARD_KIND,
        "plan": plan,
        "subject_path": subject_path,
        "shard": {
            "index": spec.index,
            "count": spec.count,
            "units": [[case, rep] for case, rep in units],
        },
        "started_at": started_at,
        "interrupted": interrupted,
        "samples": [sample_record(sample) for sample in samples],
        "rows": [row_record(row) for row in rows],
        "triggers": None
        if triggers is None
        else {"probes": [dataclasses.asdict(probe) for probe in triggers.probes]},
    }


@dataclass(frozen=True)
class ShardDoc:
    """One shard directory, read back and type-checked."""

    path: Path
    plan: dict[str, Any]
    spec: ShardSpec
    units: tuple[UnitId, ...]
    samples: tuple[ArmSampleResult, ...]
    rows: tuple[CompareRow, ...]
    triggers: tuple[TriggerProbe, ...] | None
    interrupted: bool
    started_at: str
    subject_path: str
    """The subject's folder on the shard's machine, as given: for messages only."""


def create_shard_dir(out: Path, subject_name: str, spec: ShardSpec) -> RunDir:
    """``<out>/<name>-shard-<I>-of-<N>/`` with ``transcripts/`` and ``sandboxes/``.

    An existing directory is refused rather than reused: it holds paid-for arm runs, and a
    merge must never mix two runs of one shard.
    """
    path = out / f"{safe_dir_name(subject_name)}-shard-{spec.index}-of-{spec.count}"
    try:
        out.mkdir(parents=True, exist_ok=True)
        path.mkdir(mode=0o700)
    except FileExistsError:
        raise ConfigError(
            "a shard directory is already here; expected a fresh one (remove it to run the "
            "shard again, or choose another --out)",
            file=path,
        ) from None
    except OSError as exc:
        raise ConfigError(
            f"cannot create the shard directory: {exc.strerror or exc}", file=path
        ) from None
    run_dir = RunDir(path, redact_transcripts=True)  # uploaded for the merge
    run_dir.transcripts.mkdir()
    run_dir.sandboxes.mkdir(mode=0o700)
    return run_dir


def read_shard_dir(path: Path) -> ShardDoc:
    """The shard in directory ``path``; a ConfigError (file = the directory) when it is none."""
    document = _load_document(path)
    where = path / SHARD_FILE
    try:
        block = document["shard"]
        spec = ShardSpec(int(block["index"]), int(block["count"]))
        plan = _checked_plan(document["plan"])
        triggers = document.get("triggers")
        return ShardDoc(
            path=path,
            plan=plan,
            spec=spec,
            units=tuple((str(case), int(rep)) for case, rep in block["units"]),
            samples=tuple(_sample(record) for record in document["samples"]),
            rows=tuple(_row(record) for record in document["rows"]),
            triggers=None
            if triggers is None
            else tuple(_probe(record) for record in triggers["probes"]),
            interrupted=bool(document["interrupted"]),
            started_at=str(document["started_at"]),
            subject_path=str(document["subject_path"]),
        )
    except ConfigError as exc:  # ShardSpec's own check of index and count
        raise ConfigError(f"{where}: {exc.message}") from None
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(
            f"{where}: cannot be read back ({exc!r}); expected the fields `trialrun compare "
            "--shard` writes"
        ) from None


_Member = TypeVar("_Member", bound=StrEnum)

_PLAN_TYPES: dict[str, type | tuple[type, ...]] = {
    "engine_version": str,
    "skill_name": str,
    "skill_id": (str, type(None)),
    "seed": int,
    "k": int,
    "arms": list,
    "opponents": list,
    "units": list,
    "units_sha256": str,
    "scored": list,
    "session_cases": list,
    "skipped": list,
    "judge_command": (list, type(None)),
    "triggers": bool,
    "content_digest": str,
    "incumbent_digest": (str, type(None)),
    "eval_assets_digest": str,
    "case_digests": dict,
}


def _checked_plan(plan: Any) -> dict[str, Any]:
    """The plan block with every field the merge reads, of the type it reads it as."""
    if not isinstance(plan, dict):
        raise TypeError(f"plan is {type(plan).__name__}, expected an object")
    for key, kind in _PLAN_TYPES.items():
        if not isinstance(plan.get(key), kind):
            raise ValueError(f"plan.{key} is {plan.get(key)!r}")
    if not all(_is_planned_unit(entry) for entry in plan["units"]):
        raise ValueError(f"plan.units is {plan['units']!r}, expected {{case, rep, order}} each")
    if not all(_is_unit_id(entry) for entry in plan["scored"]):
        raise ValueError(f"plan.scored is {plan['scored']!r}, expected [case, rep] each")
    for record in plan["skipped"]:
        hole_from_record(record)
    return plan


def _is_planned_unit(entry: Any) -> bool:
    return (
        isinstance(entry, dict)
        and _is_unit_id([entry.get("case"), entry.get("rep")])
        and isinstance(entry.get("order"), list)
    )


def _is_unit_id(entry: Any) -> bool:
    return (
        isinstance(entry, list)
        and len(entry) == 2
        and isinstance(entry[0], str)
        and isinstance(entry[1], int)
    )


def _load_document(path: Path) -> dict[str, Any]:
    where = path / SHARD_FILE
    if not path.is_dir():
        raise ConfigError("expected a compare shard directory, found no directory", file=path)
    if not where.is_file():
        hint = (
            " (a `trialrun run --shard` directory? merge those with `trialrun merge`)"
            if (path / "summary.json").is_file()
            else ""
        )
        raise ConfigError(
            f"expected a compare shard directory holding {SHARD_FILE} (written by "
            f"`trialrun compare SUBJECT --shard I/N`), found none{hint}",
            file=path,
        )
    try:
        # A key twice would read as its last value here and as its first elsewhere.
        document = loads_unique(where.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        raise ConfigError(f"cannot read {SHARD_FILE}: {exc}", file=path) from None
    if not isinstance(document, dict) or document.get("kind") != SHARD_KIND:
        raise ConfigError(f"expected {SHARD_FILE} of kind {SHARD_KIND!r}", file=path)
    if document.get("schema_version") != SHARD_SCHEMA_VERSION:
        raise ConfigError(
            f"expected {SHARD_FILE} schema_version {SHARD_SCHEMA_VERSION}, found "
            f"{document.get('schema_version')!r} (shards and merge need the same trialrun)",
            file=path,
        )
    return document


# ---- records: every field build_outcome reads, so a merge rolls up what the shard decided ----


def sample_record(sample: ArmSampleResult) -> dict[str, Any]:
    """The run log's ``sample_checks`` event plus what the merge needs to roll the sample up."""
    efficiency = sample.efficiency
    return sample_event(sample) | {
        "efficiency": None if efficiency is None else dataclasses.asdict(efficiency),
        "attempts": sample.attempts,
        "error": sample.error,
        "unrunnable": [[name, detail] for name, detail in sample.unrunnable],
    }


def _one_of(value: Any, allowed: Any, what: str) -> Any:
    """``value`` when it is one of the Literal type ``allowed``'s values, else a ValueError."""
    choices = get_args(allowed)
    if value not in choices:
        raise ValueError(f"{what} {value!r}, expected one of {', '.join(choices)}")
    return value


def _member_of(value: Any, allowed: type[_Member], what: str) -> _Member:
    """The member of the enum ``allowed`` whose value is ``value``, else a ValueError."""
    try:
        return allowed(value)
    except ValueError:
        choices = ", ".join(member.value for member in allowed)
        raise ValueError(f"{what} {value!r}, expected one of {choices}") from None


def _sample(record: dict[str, Any]) -> ArmSampleResult:
    efficiency = record["efficiency"]
    status = _one_of(record["status"], ArmStatus, "sample status")
    return ArmSampleResult(
        case=str(record["case"]),
        rep=int(record["rep"]),
        arm=str(record["arm"]),
        status=status,
        checks=tuple((str(name), bool(passed)) for name, passed in record["checks"]),
        efficiency=None if efficiency is None else SampleEfficiency(**efficiency),
        attempts=int(record["attempts"]),
        error=None if record["error"] is None else str(record["error"]),
        unrunnable=tuple((str(name), str(detail)) for name, detail in record["unrunnable"]),
    )


def row_record(row: CompareRow) -> dict[str, Any]:
    """The run log's ``row`` event plus the judge's reason, which the merge needs to rebuild it."""
    record = row_event(row)
    judge = row.row.judge
    if judge is not None:
        record["judge"]["reason"] = judge.reason
    return record


def _row(record: dict[str, Any]) -> CompareRow:
    judge = record["judge"]
    decision = Row(
        outcome=_member_of(record["outcome"], Outcome, "row outcome"),
        decided_by=_one_of(record["decided_by"], DecidedBy, "row decided_by"),
        scored=bool(record["scored"]),
        reason=str(record["reason"]),
        judge=None
        if judge is None
        else JudgeDecision(
            winner=_one_of(judge["winner"], JudgeWinner, "judge winner"),
            reason=str(judge["reason"]),
            agreed=bool(judge["agreed"]),
            split=bool(judge["split"]),
            errors=tuple(str(error) for error in judge["errors"]),
            raw_answers=tuple(str(answer) for answer in judge["raw_answers"]),
            cause=_one_of(judge["cause"], JudgeCause, "judge cause"),
            escalated=bool(judge["escalated"]),
        ),
    )
    return CompareRow(str(record["case"]), int(record["rep"]), str(record["opponent"]), decision)


def _probe(record: dict[str, Any]) -> TriggerProbe:
    fired = record["fired"]
    return TriggerProbe(
        prompt=str(record["prompt"]),
        should_trigger=bool(record["should_trigger"]),
        fired=None if fired is None else bool(fired),
        error=None if record["error"] is None else str(record["error"]),
    )


def hole_record(hole: Hole) -> dict[str, Any]:
    return dataclasses.asdict(hole)


def hole_from_record(record: dict[str, Any]) -> Hole:
    return Hole(
        case=str(record["case"]),
        rep=None if record["rep"] is None else int(record["rep"]),
        kind=_one_of(record["kind"], HoleKind, "hole kind"),
        detail=str(record["detail"]),
        arm=None if record["arm"] is None else str(record["arm"]),
    )
