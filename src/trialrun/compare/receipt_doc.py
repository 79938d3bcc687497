"""The ``receipt.json`` document of one ``trialrun compare`` run.

The seed's fields (``schema_version``, ``verdict``, ``attribution``, ``execution_status``,
``expected_rows``, ``scored_rows``, ``comparisons``, ``arm_scores``, ``case_runs``, ``triggers``,
``efficiency``, ``content_digest``, ``version``, ``provenance``) plus what makes two receipts
comparable and recomputable: ``eval_assets_digest``, ``case_digests``, ``holes``, ``per_case``
(every row with its ``decided_by``) and the statistics beyond the seed under each comparison;
``command_health`` (per kind of user command: calls asked and failed, by cause) and
``broken_setup`` (the commands that failed on every call; see ``trialrun.compare.health``).

Everything in the document is a pure function of the outcome, the assets, the run id and the
provenance the caller passes, and every list is in a fixed order; written with sorted keys
(``fsutil.write_json``), two runs with the same seed give the same bytes apart from ``run_id``
and the provenance's timestamps. Free text (the ``why`` line, check names, row reasons, hole
details, trigger prompts and errors, provenance) goes through ``redact`` first; transcripts and
sandboxes stay on the machine and are never copied here.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trialrun import __version__
from trialrun.base.proportions import Interval
from trialrun.base.redact import redact, redact_text
from trialrun.compare.config import EvalAssets
from trialrun.compare.outcome import CompareOutcome, comparison_name
from trialrun.compare.records import TriggerOutcome
from trialrun.compare.stats import ComparisonStats
from trialrun.home.digest import case_digest, content_digest, eval_assets_digest

__all__ = [
    "SCHEMA_VERSION",
    "STATS_VERSION",
    "ReceiptIdentity",
    "assemble_receipt",
    "build_receipt",
    "compare_provenance",
    "receipt_identity",
]

SCHEMA_VERSION = 2
"""The seed's receipt schema; ours only adds fields, as its readers pass unknown ones through."""
STATS_VERSION = 1
"""Bumped whenever a statistic below is computed differently, so old receipts stay readable."""


@dataclass(frozen=True)
class ReceiptIdentity:
    """What a receipt says about the bytes evaluated: computed from the subject's folder, or
    read back from compare shards, which computed it on their machines (``compare merge``)."""

    skill_name: str
    content_digest: str
    eval_assets_digest: str
    case_digests: dict[str, str]


def receipt_identity(
    assets: EvalAssets, subject: Path, cases: Collection[str], *, digest: str | None = None
) -> ReceiptIdentity:
    """The identity of ``subject`` as evaluated over ``cases`` (case names, sub-cases too);
    ``digest`` is its content digest when the caller has computed it already."""
    return ReceiptIdentity(
        skill_name=assets.config.name,
        content_digest=digest if digest is not None else content_digest(subject),
        eval_assets_digest=eval_assets_digest(assets.evals_dir),
        case_digests=_case_digests(cases, assets),
    )


def build_receipt(
    outcome: CompareOutcome,
    *,
    assets: EvalAssets,
    subject: Path,
    run_id: str,
    provenance: Mapping[str, Any],
) -> dict[str, Any]:
    """The receipt as a JSON-ready dict (write it with ``fsutil.write_json``)."""
    identity = receipt_identity(assets, subject, outcome.cases)
    return assemble_receipt(outcome, identity=identity, run_id=run_id, provenance=provenance)


def compare_provenance(
    *,
    k: int,
    seed: int,
    cases: Sequence[str],
    judge_command: Sequence[str] | None,
    arm_orders: Sequence[Mapping[str, Any]],
    rescored_from: str | None,
    timestamp: str,
) -> dict[str, Any]:
    """The receipt's ``provenance``: who ran what, so two receipts can be seen to be comparable.

    ``arm_orders`` is one ``{"case", "rep", "order"}`` per planned (case, rep), in plan order.
    """
    from trialrun.team.publish import HANDLE_ENV

    return {
        # Not git's user.name as publish falls back to: a receipt names only whom it was told.
        "runner_handle": os.environ.get(HANDLE_ENV, "").strip() or "local",
        "engine_version": __version__,
        "k": k,
        "seed": seed,
        "cases": list(cases),
        "judge_command": list(judge_command) if judge_command else None,
        "arm_orders": [dict(entry) for entry in arm_orders],
        "rescored_from": rescored_from,
        "timestamp": timestamp,
    }


def assemble_receipt(
    outcome: CompareOutcome,
    *,
    identity: ReceiptIdentity,
    run_id: str,
    provenance: Mapping[str, Any],
) -> dict[str, Any]:
    """The receipt of ``outcome`` for the bytes ``identity`` names."""
    return {
        "schema_version": SCHEMA_VERSION,
        "stats_version": STATS_VERSION,
        "skill_name": redact_text(identity.skill_name),
        "version": None,  # a local run evaluates bytes that have no version number yet
        "content_digest": identity.content_digest,
        "eval_assets_digest": identity.eval_assets_digest,
        "case_digests": dict(identity.case_digests),
        "run_id": run_id,
        "seed": outcome.seed,
        "verdict": outcome.verdict,
        "attribution": redact_text(outcome.why),
        "execution_status": outcome.execution_status,
        "expected_rows": outcome.expected_rows,
        "scored_rows": outcome.scored_rows,
        "holes": [
            {
                "case": hole.case,
                "rep": hole.rep,
                "kind": hole.kind,
                "arm": hole.arm,
                "detail": redact_text(hole.detail),
            }
            for hole in outcome.holes
        ],
        "comparisons": {
            comparison_name(opponent): _comparison(stats)
            for opponent, stats in outcome.comparisons.items()
        },
        "sign_p_pinned": outcome.session_ran,
        "arm_scores": dict(outcome.arm_scores),
        "case_runs": {
            arm: {"passed": tally.passed, "total": tally.total, "ci95": _pair(tally.interval())}
            for arm, tally in outcome.case_runs.items()
        },
        "triggers": _triggers(outcome.triggers),
        "efficiency": {arm: dataclasses.asdict(eff) for arm, eff in outcome.efficiency.items()},
        "per_case": _per_case(outcome),
        "command_health": {
            health.command: {
                "asked": health.asked,
                "failed": health.failed,
                "causes": dict(health.causes),
                "broken": health.broken,
                "never_ran": [redact_text(name) for name in health.never_ran],
            }
            for health in outcome.health
        },
        "broken_setup": [health.command for health in outcome.broken_setup],
        "provenance": redact(dict(provenance)),
    }


def _case_digests(cases: Collection[str], assets: EvalAssets) -> dict[str, str]:
    """Each planned case's digest; a session's sub-cases share the session's digest (its file
    and fixture), because they are judged from one shared session."""
    digests: dict[str, str] = {}
    for case in assets.cases:
        if case.name in cases:
            digests[case.name] = case_digest(case.file)
    session = assets.session
    if session is not None and any(sub.name in cases for sub in session.cases):
        session_digest = case_digest(session.file)
        for sub in session.cases:
            if sub.name in cases:
                digests[sub.name] = session_digest
    return digests


def _pair(interval: Interval | None) -> list[float] | None:
    return None if interval is None else [interval.low, interval.high]


def _comparison(stats: ComparisonStats) -> dict[str, Any]:
    record, judge, level = stats.record, stats.judge, stats.case_level
    return {
        "win": record.wins,
        "loss": record.losses,
        "tie": record.ties,
        "net_lift": stats.net_lift,
        "sign_p": stats.sign_p,
        "row_sign_p": stats.row_sign_p,
        "net_lift_ci95": _pair(stats.net_lift_interval),
        "case_level": None if level is None else dataclasses.asdict(level),
        "judge": {
            "judged": judge.judged,
            "agreed": judge.agreed,
            "split": judge.split,
            "split_rate": judge.split_rate(),
            "split_ci95": _pair(judge.split_interval()),
            "failures": dict(judge.failures),
        },
    }


def _triggers(triggers: TriggerOutcome | None) -> dict[str, Any] | None:
    if triggers is None:
        return None
    return {
        "recall": triggers.recall,
        "precision": triggers.precision,
        "tp": triggers.tp,
        "fn": triggers.fn,
        "fp": triggers.fp,
        "tn": triggers.tn,
        "errored": triggers.errored,
        "prompts": [
            {
                "prompt": redact_text(probe.prompt),
                "should_trigger": probe.should_trigger,
                "fired": probe.fired,
                "error": None if probe.error is None else redact_text(probe.error),
            }
            for probe in triggers.probes
        ],
    }


def _per_case(outcome: CompareOutcome) -> list[dict[str, Any]]:
    """One entry per (case, rep) in plan order: each arm's checks and each row's decision."""
    entries: dict[tuple[str, int], dict[str, Any]] = {}

    def entry(case: str, rep: int) -> dict[str, Any]:
        return entries.setdefault(
            (case, rep), {"case": case, "rep": rep, "arms": {}, "outcomes": {}}
        )

    for sample in outcome.samples:
        entry(sample.case, sample.rep)["arms"][sample.arm] = {
            "status": sample.status,
            "attempts": sample.attempts,
            "passed": sample.passed_all,
            "checks": [[redact_text(name), passed] for name, passed in sample.checks],
        }
    for row in outcome.rows:
        entry(row.case, row.rep)["outcomes"][comparison_name(row.opponent)] = {
            "outcome": row.row.outcome.value,
            "decided_by": row.row.decided_by,
            "scored": row.row.scored,
            "reason": redact_text(row.row.reason),
            "judge_escalated": None if row.row.judge is None else row.row.judge.escalated,
        }
    position = {case: index for index, case in enumerate(outcome.cases)}
    return [
        entries[key]
        for key in sorted(entries, key=lambda k: (position.get(k[0], len(position)), k[0], k[1]))
    ]
