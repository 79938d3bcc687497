"""How one comparison row is decided (seed 003 "How one row is decided", reference §1.5).

A row is one case, one repetition, one opponent; the caller keys it, this module only decides
it. The first rule that applies wins, and every row says which one (``decided_by``):

1. An arm died (no result): a tie left unscored: ``both-arms-failed``, ``candidate-run-failed``
   or ``opponent-run-failed``. A dead arm is a hole, never a loss.
2. One arm passed every check and the other did not: a win or a loss, ``checks``. Checks are
   all-or-nothing, so two arms passing different subsets are equal here.
3. Same all-or-nothing result and no rubric: a tie, ``checks-equal-no-judge``.
4. Same result and a rubric: the judge decides; ``judge`` or its failure cause (every failure is
   a tie, never a win: see ``trialrun.compare.judge``).

The judge is passed as a thunk so it runs only when rule 4 is reached: a judge call costs a model
call per ordering, and a row decided by checks must not spend one. ``judge=None`` says the case
has no rubric (suite sub-cases are never judged, so their callers pass ``None``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from trialrun.compare.judge import JudgeCause, JudgeDecision
from trialrun.compare.stats import Outcome

__all__ = ["ArmResult", "DecidedBy", "Outcome", "Row", "decide_row"]

DecidedBy = Literal[
    "both-arms-failed",
    "candidate-run-failed",
    "opponent-run-failed",
    "checks",
    "checks-equal-no-judge",
    "judge",
    "judge-split",
    "judge-unparseable",
    "judge-refused",
    "judge-timeout",
    "judge-error",
]


@dataclass(frozen=True)
class ArmResult:
    """What one arm's run of one (case, rep) produced, as far as row decisions need it."""

    arm: str
    checks_passed: int
    checks_total: int

    def __post_init__(self) -> None:
        if not 0 <= self.checks_passed <= self.checks_total:
            raise ValueError(
                f"{self.arm}: expected 0 <= checks_passed <= checks_total, found "
                f"{self.checks_passed}/{self.checks_total}"
            )

    @property
    def passed_all(self) -> bool:
        """The all-or-nothing result; a case without checks passes vacuously in both arms."""
        return self.checks_passed == self.checks_total


@dataclass(frozen=True)
class Row:
    """The decision of one row. ``scored`` is False only for a hole (rule 1)."""

    outcome: Outcome
    decided_by: DecidedBy
    scored: bool
    reason: str
    judge: JudgeDecision | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "outcome", Outcome(self.outcome))


_JUDGE_OUTCOME: dict[str, Outcome] = {
    "candidate": Outcome.WIN,
    "opponent": Outcome.LOSS,
    "tie": Outcome.TIE,
}
_JUDGE_LABELS: dict[JudgeCause, DecidedBy] = {
    "judge": "judge",
    "judge-split": "judge-split",
    "judge-unparseable": "judge-unparseable",
    "judge-refused": "judge-refused",
    "judge-timeout": "judge-timeout",
    "judge-error": "judge-error",
}


def decide_row(
    candidate: ArmResult | None,
    opponent: ArmResult | None,
    judge: Callable[[], JudgeDecision] | None,
) -> Row:
    """Apply the four rules in order; call ``judge`` only when rule 4 is reached."""
    if candidate is None or opponent is None:
        return _hole(candidate, opponent)
    if candidate.passed_all != opponent.passed_all:
        outcome = Outcome.WIN if candidate.passed_all else Outcome.LOSS
        return Row(
            outcome=outcome,
            decided_by="checks",
            scored=True,
            reason=f"checks: candidate {_score(candidate)}, {opponent.arm} {_score(opponent)}",
        )
    same = "passed every check" if candidate.passed_all else "missed a check"
    if judge is None:
        return Row(
            outcome=Outcome.TIE,
            decided_by="checks-equal-no-judge",
            scored=True,
            reason=f"both arms {same} and the case has no judge rubric",
        )
    decision = judge()
    # A judge failure is a tie whatever ``winner`` says; only an agreed answer can win.
    outcome = _JUDGE_OUTCOME[decision.winner] if decision.cause == "judge" else Outcome.TIE
    return Row(
        outcome=outcome,
        decided_by=_JUDGE_LABELS[decision.cause],
        scored=True,
        reason=f"both arms {same}; judge: {decision.reason}",
        judge=decision,
    )


def _hole(candidate: ArmResult | None, opponent: ArmResult | None) -> Row:
    if candidate is None and opponent is None:
        decided_by: DecidedBy = "both-arms-failed"
        reason = "both arms died; the row is a hole"
    elif candidate is None:
        decided_by = "candidate-run-failed"
        reason = "the candidate arm died; the row is a hole"
    else:
        decided_by = "opponent-run-failed"
        reason = "the opponent arm died; the row is a hole"
    return Row(outcome=Outcome.TIE, decided_by=decided_by, scored=False, reason=reason)


def _score(result: ArmResult) -> str:
    return f"{result.checks_passed}/{result.checks_total}"
