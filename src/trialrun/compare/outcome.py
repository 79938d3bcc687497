"""Everything one ``trialrun compare`` run concluded, rolled up from its arm samples and rows.

``build_outcome`` is the one place where samples (one arm's run of one case and repetition) and
decided rows (one case, repetition and opponent) become the numbers the report prints and the
receipt records. Holes stay holes: a row an arm died on, a (case, rep) that never ran because the
run was interrupted, a case skipped or dropped before it started; each is named in ``holes`` and
left out of every count, so an unscored row is never read as a zero.

Arms are listed baseline, candidate, incumbent (then any other name, sorted) whatever order they
ran in, because the run order is shuffled per (case, rep) and the report must not move with it.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal, TypeVar

from trialrun.base.words import counted
from trialrun.compare.health import CommandHealth, command_health
from trialrun.compare.records import (
    ArmSampleResult,
    CompareRow,
    Hole,
    TriggerOutcome,
)
from trialrun.compare.stats import (
    ArmSample,
    CaseRunTally,
    ComparisonStats,
    Outcome,
    RowOutcome,
    Verdict,
    arm_scores,
    case_runs_passed,
    comparison_stats,
    verdict_band,
)

ARM_ORDER = ("baseline", "candidate", "incumbent")
ExecutionStatus = Literal["complete", "partial", "failed"]
_T = TypeVar("_T")


@dataclass(frozen=True)
class ArmEfficiency:
    """Independent means over an arm's live, scored samples; None when no sample reported it."""

    turns: float | None
    duration_ms: float | None
    cost_usd: float | None
    tokens: float | None
    samples: int


@dataclass(frozen=True)
class CompareOutcome:
    verdict: Verdict
    why: str
    execution_status: ExecutionStatus
    expected_rows: int
    scored_rows: int
    cases: tuple[str, ...]
    """Every case and session sub-case planned, in plan order."""
    opponents: tuple[str, ...]
    rows: tuple[CompareRow, ...]
    samples: tuple[ArmSampleResult, ...]
    holes: tuple[Hole, ...]
    comparisons: dict[str, ComparisonStats]
    """Keyed by opponent, in ``opponents`` order."""
    arm_scores: dict[str, float | None]
    case_runs: dict[str, CaseRunTally]
    efficiency: dict[str, ArmEfficiency]
    triggers: TriggerOutcome | None
    session_ran: bool
    seed: int
    arms: tuple[str, ...] = ()
    health: tuple[CommandHealth, ...] = ()
    """Each kind of user command asked in the run: how often it failed (``compare.health``)."""

    @property
    def broken_setup(self) -> tuple[CommandHealth, ...]:
        """The commands that failed on every call: ``--gate`` fails on any of them."""
        return tuple(health for health in self.health if health.broken)


def comparison_name(opponent: str) -> str:
    return f"candidate-vs-{opponent}"


def arm_sort_key(arm: str) -> tuple[int, str]:
    return (ARM_ORDER.index(arm) if arm in ARM_ORDER else len(ARM_ORDER), arm)


def build_outcome(
    *,
    samples: Sequence[ArmSampleResult],
    rows: Sequence[CompareRow],
    opponents: Sequence[str],
    planned: Sequence[tuple[str, int]],
    session_cases: Collection[str] = (),
    skipped: Sequence[Hole] = (),
    triggers: TriggerOutcome | None = None,
    seed: int = 0,
) -> CompareOutcome:
    """Roll a run up. ``planned`` lists every (case, rep) that should give one row per opponent
    (expected_rows = len(planned) x len(opponents)); ``session_cases`` names the session's
    sub-cases (their rows share one session, which pins sign p); ``skipped`` names cases the
    engine skipped or dropped before they started, with the reason."""
    order = {key: index for index, key in enumerate(planned)}
    opponent_list = tuple(opponents)
    unknown = sorted({row.opponent for row in rows} - set(opponent_list))
    if unknown:
        raise ValueError(f"expected rows against {list(opponent_list)}, found opponent {unknown}")

    def row_key(row: CompareRow) -> tuple[int, str, int, int]:
        index = order.get((row.case, row.rep), len(order))
        return (index, row.case, row.rep, opponent_list.index(row.opponent))

    sorted_rows = tuple(sorted(rows, key=row_key))
    sorted_samples = tuple(
        sorted(
            samples,
            key=lambda s: (
                order.get((s.case, s.rep), len(order)),
                s.case,
                s.rep,
                arm_sort_key(s.arm),
            ),
        )
    )
    ran_cases = {row.case for row in sorted_rows}
    session_ran = any(case in ran_cases for case in session_cases)
    outcomes = [row.as_row_outcome() for row in sorted_rows]
    comparisons = {
        opponent: comparison_stats(
            opponent,
            [o for o, row in zip(outcomes, sorted_rows, strict=True) if row.opponent == opponent],
            session_ran=session_ran,
            seed=seed,
        )
        for opponent in opponent_list
    }
    baseline = comparisons.get("baseline")
    stats_samples = [_stats_sample(sample) for sample in sorted_samples]
    scored_rows = sum(1 for row in sorted_rows if row.row.scored)
    expected_rows = len(planned) * len(opponent_list)
    holes = tuple(skipped) + _dead_arm_holes(sorted_rows, sorted_samples)
    holes += _not_run_holes(planned, opponent_list, sorted_rows, skipped)
    arms = tuple(sorted({sample.arm for sample in sorted_samples}, key=arm_sort_key))
    return CompareOutcome(
        verdict=verdict_band(baseline.record if baseline is not None else None),
        why=attribution(row for row in sorted_rows if row.opponent == "baseline"),
        execution_status=_status(expected_rows, scored_rows, holes),
        expected_rows=expected_rows,
        scored_rows=scored_rows,
        cases=tuple(dict.fromkeys(case for case, _ in planned)),
        opponents=opponent_list,
        rows=sorted_rows,
        samples=sorted_samples,
        holes=holes,
        comparisons=comparisons,
        arm_scores=_in_arm_order(
            _every_arm(arm_scores(stats_samples, outcomes), planned, opponent_list)
        ),
        case_runs=_in_arm_order(case_runs_passed(stats_samples, outcomes)),
        efficiency=_efficiency(sorted_samples, outcomes, arms),
        triggers=triggers,
        session_ran=session_ran,
        seed=seed,
        arms=arms,
        health=command_health(sorted_rows, sorted_samples, triggers, session_cases),
    )


def attribution(baseline_rows: Iterable[CompareRow]) -> str:
    """The ``why:`` sentence from what decided the scored candidate-vs-baseline rows.

    Wins (and losses) read "execution checks" when at least half of them were decided by checks,
    otherwise "judge calls"; then the tie count. No model writes it.
    """
    scored = [row for row in baseline_rows if row.row.scored]
    if not scored:
        return "no candidate-vs-baseline row was scored"
    parts = []
    for label, outcome in (("wins", Outcome.WIN), ("loses", Outcome.LOSS)):
        decided = [row for row in scored if row.row.outcome is outcome]
        if decided:
            by_checks = sum(1 for row in decided if row.row.decided_by == "checks")
            via = "execution checks" if 2 * by_checks >= len(decided) else "judge calls"
            parts.append(f"{label} on {via}")
    if not parts:
        return "all comparisons tied"
    ties = sum(1 for row in scored if row.row.outcome is Outcome.TIE)
    if ties:
        parts.append(f"{ties} tie{'' if ties == 1 else 's'}")
    return "; ".join(parts)


def _stats_sample(sample: ArmSampleResult) -> ArmSample:
    passed = sum(1 for _, ok in sample.checks if ok)
    return ArmSample(sample.case, sample.rep, sample.arm, passed, len(sample.checks), sample.died)


def _every_arm(
    scores: dict[str, float | None], planned: Sequence[tuple[str, int]], opponents: Sequence[str]
) -> dict[str, float | None]:
    """``scores`` with None ("n/a") for an arm that never ran: a run stopped before the
    candidate's first sample still shows it scored nothing rather than leaving it out. A run
    in which no arm ran has no scores at all."""
    if not scores or not planned:
        return scores
    return {arm: None for arm in ("candidate", *opponents)} | scores


def _in_arm_order(values: dict[str, _T]) -> dict[str, _T]:
    return {arm: values[arm] for arm in sorted(values, key=arm_sort_key)}


def _status(expected: int, scored: int, holes: Sequence[Hole]) -> ExecutionStatus:
    if scored == 0:
        return "failed"
    return "complete" if scored >= expected and not holes else "partial"


def _dead_arm_holes(
    rows: Sequence[CompareRow], samples: Sequence[ArmSampleResult]
) -> tuple[Hole, ...]:
    """One hole per dead arm of a (case, rep) that cost a row, however many rows it cost."""
    status = {(s.case, s.rep, s.arm): s for s in samples}
    holes: dict[tuple[str, int, str], Hole] = {}
    for row in rows:
        if row.row.scored:
            continue
        dead = {
            "both-arms-failed": ("candidate", row.opponent),
            "candidate-run-failed": ("candidate",),
            "opponent-run-failed": (row.opponent,),
        }.get(row.row.decided_by, ())
        for arm in dead:
            sample = status.get((row.case, row.rep, arm))
            how = (
                f"{sample.status} after {counted(sample.attempts, 'attempt')}"
                if sample
                else "no result"
            )
            holes.setdefault(
                (row.case, row.rep, arm),
                Hole(row.case, row.rep, "arm-died", f"the {arm} arm died ({how})", arm=arm),
            )
    return tuple(holes.values())


def _not_run_holes(
    planned: Sequence[tuple[str, int]],
    opponents: Sequence[str],
    rows: Sequence[CompareRow],
    skipped: Sequence[Hole],
) -> tuple[Hole, ...]:
    """A planned (case, rep) missing rows, e.g. after an interruption; skipped cases are named
    already by the engine's own holes."""
    have = {(row.case, row.rep, row.opponent) for row in rows}
    named = {(hole.case, hole.rep) for hole in skipped}
    holes = []
    for case, rep in planned:
        if (case, None) in named or (case, rep) in named:
            continue
        missing = [opponent for opponent in opponents if (case, rep, opponent) not in have]
        if missing:
            against = ", ".join(comparison_name(opponent) for opponent in missing)
            holes.append(Hole(case, rep, "not-run", f"never ran to a row ({against})"))
    return tuple(holes)


def _efficiency(
    samples: Sequence[ArmSampleResult], rows: Sequence[RowOutcome], arms: Sequence[str]
) -> dict[str, ArmEfficiency]:
    scored = {(row.case, row.rep) for row in rows if row.scored}
    result = {}
    for arm in arms:
        reports = [
            sample.efficiency
            for sample in samples
            if sample.arm == arm
            and not sample.died
            and (sample.case, sample.rep) in scored
            and sample.efficiency is not None
        ]
        result[arm] = ArmEfficiency(
            turns=_mean(report.turns for report in reports),
            duration_ms=_mean(report.duration_ms for report in reports),
            cost_usd=_mean(report.cost_usd for report in reports),
            tokens=_mean(report.tokens for report in reports),
            samples=len(reports),
        )
    return result


def _mean(values: Iterable[float | None]) -> float | None:
    # Exact rationals, so the mean does not depend on the order samples finished in.
    present = [Fraction(value) for value in values if value is not None and math.isfinite(value)]
    return float(sum(present, Fraction(0)) / len(present)) if present else None
