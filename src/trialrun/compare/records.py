"""The plain records of a compare run: arm samples, decided rows, holes and trigger probes.

They sit below everything that reads them: ``outcome`` rolls them up and ``health`` counts the
failed commands in them, and neither may import the other to name them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from trialrun.compare.rows import Row
from trialrun.compare.stats import RowOutcome

__all__ = [
    "ArmSampleResult",
    "ArmStatus",
    "CompareRow",
    "Hole",
    "HoleKind",
    "SampleEfficiency",
    "TriggerOutcome",
    "TriggerProbe",
    "trigger_outcome",
]

HoleKind = Literal["arm-died", "not-run", "environment-skip", "dropped"]
ArmStatus = Literal["ok", "failed", "timeout"]


@dataclass(frozen=True)
class SampleEfficiency:
    """What the agent reported about one session (stream-json ``result`` event); None = absent."""

    turns: float | None = None
    duration_ms: float | None = None
    cost_usd: float | None = None
    tokens: float | None = None


@dataclass(frozen=True)
class ArmSampleResult:
    """One arm's run of one (case, rep): its status and each check's (name, passed).

    For a session, the engine gives one sample per sub-case and attaches the session's
    ``efficiency`` to one of them only, so a shared session is counted once in the means.
    """

    case: str
    rep: int
    arm: str
    status: ArmStatus
    checks: tuple[tuple[str, bool], ...] = ()
    efficiency: SampleEfficiency | None = None
    attempts: int = 1
    error: str | None = None
    """Why a dead arm died (for the broken-setup line); None for a live one."""
    unrunnable: tuple[tuple[str, str], ...] = ()
    """``(check name, detail)`` of each ``command_succeeds`` whose command could not be run."""

    @property
    def died(self) -> bool:
        return self.status != "ok"

    @property
    def passed_all(self) -> bool | None:
        """The all-or-nothing verdict; None when it cannot be said (dead arm, no checks)."""
        if self.died or not self.checks:
            return None
        return all(passed for _, passed in self.checks)


@dataclass(frozen=True)
class CompareRow:
    """One decided row: case, repetition, opponent and the decision from ``rows.decide_row``."""

    case: str
    rep: int
    opponent: str
    row: Row

    def as_row_outcome(self) -> RowOutcome:
        return RowOutcome(
            case=self.case,
            rep=self.rep,
            outcome=self.row.outcome,
            decided_by=self.row.decided_by,
            scored=self.row.scored,
        )


@dataclass(frozen=True)
class Hole:
    """Something expected that produced no scored row. ``rep`` None means every repetition."""

    case: str
    rep: int | None
    kind: HoleKind
    detail: str
    arm: str | None = None


@dataclass(frozen=True)
class TriggerProbe:
    """One trigger prompt: should the subject be used, and was it (None: the call errored)."""

    prompt: str
    should_trigger: bool
    fired: bool | None
    error: str | None = None

    @property
    def wrong(self) -> bool:
        return self.fired is not None and self.fired != self.should_trigger


@dataclass(frozen=True)
class TriggerOutcome:
    """Recall and precision of the trigger eval. An errored call counts in neither cell of its
    row (the seed counted an errored should-trigger prompt as a miss but an errored
    should-not-trigger prompt as nothing, which flatters precision); it is counted in
    ``errored`` instead and named in the report."""

    probes: tuple[TriggerProbe, ...]
    tp: int
    fn: int
    fp: int
    tn: int
    errored: int

    @property
    def recall(self) -> float | None:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else None

    @property
    def precision(self) -> float | None:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else None


def trigger_outcome(probes: Iterable[TriggerProbe]) -> TriggerOutcome:
    probe_list = tuple(probes)

    def count(should: bool, fired: bool) -> int:
        return sum(1 for p in probe_list if p.should_trigger is should and p.fired is fired)

    return TriggerOutcome(
        probes=probe_list,
        tp=count(True, True),
        fn=count(True, False),
        fp=count(False, True),
        tn=count(False, False),
        errored=sum(1 for probe in probe_list if probe.fired is None),
    )
