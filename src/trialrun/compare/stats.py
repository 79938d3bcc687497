"""The numbers of ``trialrun compare``: net lift, verdict band, sign test, intervals, arm tallies.

Pure functions over small frozen dataclasses, so a receipt can be recomputed offline from its
rows. The seed's numbers reproduce the reference engine exactly: the band is decided on
cross-multiplied integers and the sign test on exact rationals, so no float rounding can move a
boundary. Beyond the seed (arms-and-statistics.md section 3), reported and never changing the
verdict: Tango's interval for net lift, Wilson intervals, a case-level sign-flip test, judge splits.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from decimal import ROUND_HALF_UP, Decimal
from enum import StrEnum
from fractions import Fraction
from typing import Literal

from trialrun.base.proportions import Z_95, Interval, wilson_interval


class Outcome(StrEnum):
    """A row's result from the candidate's side. The values are what every artifact writes
    (``receipt.json``, ``run.jsonl``, ``shard.json``, the report), so they never change."""

    WIN = "win"
    LOSS = "loss"
    TIE = "tie"

    @property
    def sign(self) -> int:
        """What the row adds to net lift: +1 for a win, -1 for a loss, 0 for a tie."""
        return _SIGNS[self]


_SIGNS = {Outcome.WIN: 1, Outcome.LOSS: -1, Outcome.TIE: 0}


Verdict = Literal["PASS", "NEUTRAL", "FAIL"]

EXACT_CASE_LIMIT = 20  # up to this many non-zero cases, enumerate every sign assignment
MONTE_CARLO_DRAWS = 20_000


@dataclass(frozen=True)
class RowOutcome:
    """One comparison row (case, rep, opponent); ``decided_by`` is its label (``checks``, ...).

    ``scored`` is False for a row an arm died on: an unscored hole, left out of every count.
    """

    case: str
    rep: int
    outcome: Outcome
    decided_by: str
    scored: bool = True

    def __post_init__(self) -> None:
        # Read back from a stored run as text; "draw" must fail here, not count as nothing.
        object.__setattr__(self, "outcome", Outcome(self.outcome))


@dataclass(frozen=True)
class Record:
    """Wins, losses and ties over the scored rows of one comparison."""

    wins: int
    losses: int
    ties: int

    def __post_init__(self) -> None:
        if min(self.wins, self.losses, self.ties) < 0:
            raise ValueError(
                f"expected non-negative counts, found {self.wins}W / {self.losses}L / {self.ties}T"
            )

    @property
    def total(self) -> int:
        return self.wins + self.losses + self.ties

    @classmethod
    def from_rows(cls, rows: Iterable[RowOutcome]) -> Record:
        counts = Counter(row.outcome for row in rows if row.scored)
        return cls(wins=counts[Outcome.WIN], losses=counts[Outcome.LOSS], ties=counts[Outcome.TIE])


def net_lift(record: Record) -> float:
    """``(wins - losses) / (wins + losses + ties)``; ties dilute; 0.0 when nothing was scored."""
    return (record.wins - record.losses) / record.total if record.total else 0.0


def verdict_band(record: Record | None) -> Verdict:
    """PASS at net lift >= +1/3, FAIL at <= -1/3, else NEUTRAL (also with no baseline rows).

    ``3 * (W - L) >= N`` is the same inequality as ``(W - L) / N >= 1/3`` without the division,
    so exactly +1/3 (1W / 0L / 2T) is a PASS and exactly -1/3 a FAIL.
    """
    if record is None or record.total == 0:
        return "NEUTRAL"
    margin = 3 * (record.wins - record.losses)
    if margin >= record.total:
        return "PASS"
    if margin <= -record.total:
        return "FAIL"
    return "NEUTRAL"


def sign_test_p(wins: int, losses: int) -> float:
    """Exact two-sided sign test with ties excluded: ``min(1, 2 * P(X <= min(W, L)))``.

    X ~ Binomial(W + L, 1/2). Doubling the smaller tail equals the minimum-likelihood two-sided
    p that scipy's ``binomtest`` reports, because the null is symmetric. Computed on exact
    rationals: 5 wins / 1 loss is exactly 7/32 = 0.21875.
    """
    if wins < 0 or losses < 0:
        raise ValueError(f"expected non-negative wins and losses, found {wins} and {losses}")
    decided = wins + losses  # with none decided, the doubled tail 2 * 1/1 caps at 1.0
    tail = sum(math.comb(decided, i) for i in range(min(wins, losses) + 1))
    return float(min(Fraction(1), Fraction(2 * tail, 2**decided)))


def tango_interval(record: Record, *, z: float = Z_95) -> Interval:
    """Tango's (1998) score interval for net lift, read as a paired difference of proportions.

    Wins are the discordant cell b (only the candidate passed), losses the cell c, ties the
    concordant cells; N = b + c + ties and the estimate is (b - c) / N. For a trial difference
    d, the restricted maximum-likelihood estimate q of the c-cell probability is the root of

        2N q^2 + (-b - c + (2N - b + c) d) q - c d (1 - d) = 0,

    kept inside the feasible range max(0, -d) <= q <= (1 - d) / 2, and the score statistic is

        Z(d) = (b - c - N d) / sqrt(N (2q + d (1 - d))).

    The interval is every d in [-1, 1] with |Z(d)| <= z. Z falls from +inf to -inf across the
    range and is 0 at the estimate, so each end is found by bisection. With no scored rows the
    interval is the whole range.
    """
    if record.total == 0:
        return Interval(-1.0, 1.0)
    estimate = net_lift(record)
    upper_rejected = _tango_score(record, 1.0) < -z
    lower_rejected = _tango_score(record, -1.0) > z
    high = (
        _bisect(lambda d: _tango_score(record, d) >= -z, estimate, 1.0) if upper_rejected else 1.0
    )
    low = _bisect(lambda d: _tango_score(record, d) > z, -1.0, estimate) if lower_rejected else -1.0
    return Interval(min(low, estimate), max(high, estimate))


def _tango_score(record: Record, difference: float) -> float:
    b, c, n = record.wins, record.losses, record.total
    linear = -b - c + (2 * n - b + c) * difference
    constant = -c * difference * (1 - difference)
    root = (math.sqrt(max(0.0, linear * linear - 8 * n * constant)) - linear) / (4 * n)
    # At d = -1 the quadratic's root leaves the simplex; the feasible value is the boundary.
    q = min(max(root, max(0.0, -difference)), (1 - difference) / 2)
    numerator = b - c - n * difference
    variance = n * (2 * q + difference * (1 - difference))
    if variance <= 0.0:
        return 0.0 if numerator == 0 else math.copysign(math.inf, numerator)
    return numerator / math.sqrt(variance)


def _bisect(is_left_side: Callable[[float], bool], left: float, right: float) -> float:
    """The boundary between points where ``is_left_side`` holds (left) and fails (right)."""
    for _ in range(200):
        middle = (left + right) / 2
        if middle in (left, right):
            break
        left, right = (middle, right) if is_left_side(middle) else (left, middle)
    return (left + right) / 2


@dataclass(frozen=True)
class CaseLevelTest:
    """The sign-flip (randomization) test over cases, the unit that generalizes to new tasks.

    Each case c scores ``D_c = (W_c - L_c) / n_c`` over its scored rows. Under the null that the
    candidate and the opponent are exchangeable on every case, each non-zero D_c is equally
    likely to carry either sign; ``p_value`` is the share of sign assignments whose
    ``|sum +-D_c|`` reaches the observed ``|sum D_c|``. ``clusters`` counts the non-zero cases;
    ``min_attainable_p = 2^(1 - clusters)``. ``method`` is ``exact`` (all assignments counted)
    or ``monte-carlo`` (``draws`` seeded assignments, p = (1 + hits) / (1 + draws)).
    """

    clusters: int
    p_value: float
    min_attainable_p: float
    method: Literal["exact", "monte-carlo"]
    draws: int | None = None


def case_sign_flip_test(
    rows: Iterable[RowOutcome],
    *,
    seed: int,
    exact_limit: int = EXACT_CASE_LIMIT,
    draws: int = MONTE_CARLO_DRAWS,
) -> CaseLevelTest:
    """Case-level sign-flip test over the scored rows of one comparison (see CaseLevelTest)."""
    scores = [score for score in _case_scores(rows).values() if score != 0]
    clusters = len(scores)
    if clusters == 0:
        return CaseLevelTest(clusters=0, p_value=1.0, min_attainable_p=1.0, method="exact")
    # Exact rationals scaled to integers: "reaches the observed sum" must not hinge on rounding.
    scale = math.lcm(*(score.denominator for score in scores))
    magnitudes = [abs(int(score * scale)) for score in scores]
    observed = abs(sum(int(score * scale) for score in scores))
    min_p = 2.0 ** (1 - clusters)
    if clusters <= exact_limit:
        sums: Counter[int] = Counter({0: 1})
        for magnitude in magnitudes:
            shifted: Counter[int] = Counter()
            for total, ways in sums.items():
                shifted[total + magnitude] += ways
                shifted[total - magnitude] += ways
            sums = shifted
        hits = sum(ways for total, ways in sums.items() if abs(total) >= observed)
        p_value = float(Fraction(hits, 2**clusters))
        return CaseLevelTest(clusters, p_value, min_p, "exact")
    if draws < 1:
        raise ValueError(f"expected at least 1 Monte Carlo draw, found {draws}")
    rng = random.Random(seed)
    flips = (sum(m if rng.getrandbits(1) else -m for m in magnitudes) for _ in range(draws))
    hits = sum(abs(flipped) >= observed for flipped in flips)
    return CaseLevelTest(clusters, (1 + hits) / (1 + draws), min_p, "monte-carlo", draws)


def _case_scores(rows: Iterable[RowOutcome]) -> dict[str, Fraction]:
    net: Counter[str] = Counter()
    count: Counter[str] = Counter()
    for row in (row for row in rows if row.scored):
        net[row.case] += row.outcome.sign
        count[row.case] += 1
    return {case: Fraction(net[case], rows_of_case) for case, rows_of_case in count.items()}


@dataclass(frozen=True)
class JudgeTally:
    """How the judge ended on the scored rows it decided, by ``decided_by`` label: ``judge`` is
    an agreement, ``judge-split`` a disagreement of the two orders, and every other ``judge-*``
    label (refused, unparseable, timeout, error) a failure, counted in ``failures`` by label."""

    judged: int
    agreed: int
    split: int
    failures: Mapping[str, int]

    @classmethod
    def from_rows(cls, rows: Iterable[RowOutcome]) -> JudgeTally:
        labels = Counter(
            r.decided_by for r in rows if r.scored and r.decided_by.startswith("judge")
        )
        failures = {k: n for k, n in sorted(labels.items()) if k not in ("judge", "judge-split")}
        return cls(sum(labels.values()), labels["judge"], labels["judge-split"], failures)

    def split_rate(self) -> float | None:
        """Share of judged rows whose two orders disagreed; None when nothing was judged."""
        return self.split / self.judged if self.judged else None

    def split_interval(self) -> Interval | None:
        return wilson_interval(self.split, self.judged)


@dataclass(frozen=True)
class ComparisonStats:
    """Every number of one ``candidate-vs-<opponent>`` comparison. ``sign_p`` is the receipt's:
    pinned to 1.0 when a session (suite) ran, as rows sharing one agent session are not
    independent; ``row_sign_p`` is unpinned. ``case_level`` is None when k = 1."""

    opponent: str
    record: Record
    net_lift: float
    sign_p: float
    row_sign_p: float
    net_lift_interval: Interval
    case_level: CaseLevelTest | None
    judge: JudgeTally


def comparison_stats(
    opponent: str, rows: Iterable[RowOutcome], *, session_ran: bool, seed: int
) -> ComparisonStats:
    """Roll one opponent's rows (scored and unscored) into its ComparisonStats."""
    row_list = list(rows)
    record = Record.from_rows(row_list)
    row_sign_p = sign_test_p(record.wins, record.losses)
    repeated = any(row.rep > 0 for row in row_list)
    case_level = case_sign_flip_test(row_list, seed=seed) if repeated else None
    if case_level is not None and session_ran:
        # The same shared session that pins the row test breaks case independence too.
        case_level = replace(case_level, p_value=1.0)
    return ComparisonStats(
        opponent=opponent,
        record=record,
        net_lift=net_lift(record),
        sign_p=1.0 if session_ran else row_sign_p,
        row_sign_p=row_sign_p,
        net_lift_interval=tango_interval(record),
        case_level=case_level,
        judge=JudgeTally.from_rows(row_list),
    )


@dataclass(frozen=True)
class ArmSample:
    """One arm's run on one (case, rep): how many of the case's checks it passed.

    ``died``: the run failed after its retry or timed out, so its checks say nothing.
    """

    case: str
    rep: int
    arm: str
    checks_passed: int
    checks_total: int
    died: bool = False

    def __post_init__(self) -> None:
        if not 0 <= self.checks_passed <= self.checks_total:
            where = f"{self.case} rep {self.rep} arm {self.arm}"
            found = f"{self.checks_passed} of {self.checks_total}"
            raise ValueError(f"{where}: expected 0 <= passed <= total checks, found {found}")


@dataclass(frozen=True)
class CaseRunTally:
    """Case-runs where an arm passed every check, over those where that can be said."""

    passed: int
    total: int

    def interval(self) -> Interval | None:
        return wilson_interval(self.passed, self.total)


def _counted_samples(samples: Iterable[ArmSample], rows: Iterable[RowOutcome]) -> list[ArmSample]:
    """Live samples of a (case, rep) that has at least one scored row, with checks to judge."""
    scored = {(row.case, row.rep) for row in rows if row.scored}
    return [
        sample
        for sample in samples
        if not sample.died and sample.checks_total > 0 and (sample.case, sample.rep) in scored
    ]


def arm_scores(samples: Iterable[ArmSample], rows: Iterable[RowOutcome]) -> dict[str, float | None]:
    """Each arm's mean fraction of checks passed over its counted samples, in ``samples`` order.

    An arm whose every sample was dead, unscored or check-less maps to None ("n/a"), never to 0.
    """
    sample_list = list(samples)
    fractions: dict[str, list[Fraction]] = {sample.arm: [] for sample in sample_list}
    for sample in _counted_samples(sample_list, rows):
        fractions[sample.arm].append(Fraction(sample.checks_passed, sample.checks_total))
    return {
        arm: float(sum(values, Fraction(0)) / len(values)) if values else None
        for arm, values in fractions.items()
    }


def case_runs_passed(
    samples: Iterable[ArmSample], rows: Iterable[RowOutcome]
) -> dict[str, CaseRunTally]:
    """Per arm, passed / total over the counted case-runs (the app's "Quality")."""
    sample_list = list(samples)
    passed: Counter[str] = Counter()
    total: Counter[str] = Counter()
    for sample in _counted_samples(sample_list, rows):
        total[sample.arm] += 1
        passed[sample.arm] += sample.checks_passed == sample.checks_total
    return {
        sample.arm: CaseRunTally(passed[sample.arm], total[sample.arm]) for sample in sample_list
    }


def format_sign_p(p_value: float) -> str:
    """Three decimals with exact halves rounded up, as the reference prints: 0.0625 -> ``0.063``.

    Python's own formatting rounds that exactly representable half to even (``0.062``).
    """
    return str(Decimal(p_value).quantize(Decimal("0.001"), rounding=ROUND_HALF_UP))


def format_net_lift(record: Record) -> str:
    """Whole percent with a sign, halves away from zero: 5W / 1L / 3T -> ``+44%``."""
    percent = 100 * net_lift(record)
    whole = Decimal(percent).quantize(Decimal(1), rounding=ROUND_HALF_UP)
    return f"{'+' if percent >= 0 else '-'}{abs(whole)}%"
