"""The numbers of trialrun compare: seed and reference values, failure paths, properties."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trialrun.compare.stats import (
    ArmSample,
    CaseRunTally,
    Interval,
    JudgeTally,
    Record,
    RowOutcome,
    arm_scores,
    case_runs_passed,
    case_sign_flip_test,
    comparison_stats,
    format_net_lift,
    format_sign_p,
    net_lift,
    sign_test_p,
    tango_interval,
    verdict_band,
    wilson_interval,
)

counts = st.integers(min_value=0, max_value=40)


def rows_for(case: str, outcomes: str, decided_by: str = "checks") -> list[RowOutcome]:
    """'WLT' -> one row per letter, reps 0.. in order."""
    names = {"W": "win", "L": "loss", "T": "tie"}
    return [
        RowOutcome(case, rep, names[letter], decided_by)  # type: ignore[arg-type]
        for rep, letter in enumerate(outcomes)
    ]


# --- the seed's printed report (seeds/003): 5W/1L/3T and 2W/1L/6T over 9 comparisons ---


def test_seed_candidate_vs_baseline_line() -> None:
    record = Record(5, 1, 3)
    assert sign_test_p(5, 1) == 0.21875  # exact 7/32
    assert format_sign_p(sign_test_p(5, 1)) == "0.219"  # seed: "sign test p=0.219"
    assert format_net_lift(record) == "+44%"  # seed: "+44% net lift"
    assert verdict_band(record) == "PASS"  # seed: "verdict: PASS"


def test_seed_candidate_vs_incumbent_line() -> None:
    record = Record(2, 1, 6)
    assert format_sign_p(sign_test_p(2, 1)) == "1.000"  # seed: "p=1.000"
    assert format_net_lift(record) == "+11%"  # seed: "+11% net lift"
    assert verdict_band(record) == "NEUTRAL"  # reference 1.6 test vector


def test_seed_prose_examples() -> None:
    # seed: "three wins from three cases is p=0.250"; "five wins and five ties is +50%"
    assert sign_test_p(3, 0) == 0.25
    assert net_lift(Record(5, 0, 5)) == 0.5


def test_reference_engine_vectors() -> None:
    # arms-and-statistics.md 1.6 (stats.test.ts) and R11
    assert sign_test_p(10, 0) == 2 / 1024
    assert round(net_lift(Record(5, 1, 3)), 3) == 0.444
    assert verdict_band(Record(1, 0, 2)) == "PASS"  # exactly +1/3
    assert verdict_band(Record(0, 1, 2)) == "FAIL"  # exactly -1/3
    assert verdict_band(Record(2, 1, 6)) == "NEUTRAL"


def test_reference_sign_test_conventions() -> None:
    # arms-and-statistics.md 3.1: six straight wins are the minimum for p < 0.05
    assert sign_test_p(6, 0) == 0.03125
    assert sign_test_p(5, 0) == 0.0625
    assert sign_test_p(12, 3) == 0.03515625  # 3.3 R1 table: 0.035


def test_band_with_no_rows_or_no_baseline_is_neutral() -> None:
    assert verdict_band(None) == "NEUTRAL"
    assert verdict_band(Record(0, 0, 0)) == "NEUTRAL"
    assert net_lift(Record(0, 0, 0)) == 0.0
    assert sign_test_p(0, 0) == 1.0


def test_negative_counts_are_refused() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        Record(-1, 0, 0)
    with pytest.raises(ValueError, match="found -2 and 1"):
        sign_test_p(-2, 1)


# --- Tango interval: arms-and-statistics.md 3.3 R1 table (and 0.0 worked example) ---


@pytest.mark.parametrize(
    ("wins", "losses", "ties", "low", "high"),
    [
        (5, 1, 3, -0.095, 0.768),
        (2, 1, 6, -0.302, 0.488),
        (3, 0, 0, -0.123, 1.000),
        (3, 0, 6, -0.066, 0.646),
        (6, 0, 3, 0.168, 0.879),
        (12, 3, 12, 0.056, 0.559),
    ],
)
def test_tango_interval_matches_reference_table(
    wins: int, losses: int, ties: int, low: float, high: float
) -> None:
    interval = tango_interval(Record(wins, losses, ties))
    assert round(interval.low, 3) == low
    assert round(interval.high, 3) == high


def test_tango_interval_edges() -> None:
    assert tango_interval(Record(0, 0, 0)) == Interval(-1.0, 1.0)
    all_losses = tango_interval(Record(0, 3, 0))
    assert all_losses.low == -1.0 and round(all_losses.high, 3) == 0.123
    all_ties = tango_interval(Record(0, 0, 5))
    assert all_ties.low < 0 < all_ties.high


# --- Wilson: arms-and-statistics.md 3.3 R2 and 1.10 item 7 ---


@pytest.mark.parametrize(
    ("successes", "total", "low", "high"),
    [
        (5, 9, 0.27, 0.81),
        (2, 9, 0.06, 0.55),
        (4, 9, 0.19, 0.73),
        (5, 5, 0.57, 1.00),
        (5, 6, 0.44, 0.97),
    ],
)
def test_wilson_matches_reference(successes: int, total: int, low: float, high: float) -> None:
    interval = wilson_interval(successes, total)
    assert interval is not None
    assert (round(interval.low, 2), round(interval.high, 2)) == (low, high)


def test_wilson_empty_and_invalid() -> None:
    assert wilson_interval(0, 0) is None
    zero = wilson_interval(0, 4)
    assert zero is not None and zero.low == 0.0 and zero.high > 0
    with pytest.raises(ValueError, match="found 5 of 4"):
        wilson_interval(5, 4)
    assert CaseRunTally(0, 0).interval() is None


# --- case-level sign-flip test ---


def test_case_level_reference_split() -> None:
    # arms-and-statistics.md 3.2: A = W,W,W; B = W,W,L; C = T,T,T. Two non-zero cases, D = 1
    # and 1/3; |1 + 1/3| is reached only by all-plus and all-minus: p = 2/4; min p = 2^(1-2).
    rows = rows_for("A", "WWW") + rows_for("B", "WWL") + rows_for("C", "TTT")
    test = case_sign_flip_test(rows, seed=0)
    assert (test.clusters, test.p_value, test.min_attainable_p, test.method) == (
        2,
        0.5,
        0.5,
        "exact",
    )


def test_case_level_min_attainable_matches_reference() -> None:
    # arms-and-statistics.md 3.2: 0.25 for 3 cases, 0.0625 for 5, 0.0156 for 7
    for cases, expected in [(3, 0.25), (5, 0.0625), (7, 0.015625)]:
        rows = [row for c in range(cases) for row in rows_for(f"c{c}", "WW")]
        test = case_sign_flip_test(rows, seed=0)
        assert test.p_value == test.min_attainable_p == expected


def test_case_level_ignores_unscored_rows_and_zero_cases() -> None:
    dead = RowOutcome("A", 1, "loss", "candidate-run-failed", scored=False)
    rows = [*rows_for("A", "W"), dead, *rows_for("B", "WL")]
    test = case_sign_flip_test(rows, seed=0)
    assert test.clusters == 1 and test.p_value == 1.0
    empty = case_sign_flip_test(rows_for("A", "TT"), seed=0)
    assert (empty.clusters, empty.p_value, empty.min_attainable_p) == (0, 1.0, 1.0)


def test_case_level_monte_carlo_is_seeded_and_close_to_exact() -> None:
    rows = [row for c in range(24) for row in rows_for(f"c{c:02}", "WWL" if c % 3 else "LLW")]
    exact = case_sign_flip_test(rows, seed=0, exact_limit=30)
    first = case_sign_flip_test(rows, seed=7, draws=4000)
    again = case_sign_flip_test(rows, seed=7, draws=4000)
    assert first == again and first.method == "monte-carlo" and first.draws == 4000
    assert exact.method == "exact" and abs(first.p_value - exact.p_value) < 0.05
    with pytest.raises(ValueError, match="found 0"):
        case_sign_flip_test(rows, seed=7, draws=0)


# --- one comparison rolled up ---


def test_comparison_stats_pins_sign_p_when_a_session_ran() -> None:
    rows = rows_for("a", "WWWWW") + rows_for("b", "LTTT")
    plain = comparison_stats("baseline", rows, session_ran=False, seed=1)
    pinned = comparison_stats("baseline", rows, session_ran=True, seed=1)
    assert plain.record == Record(5, 1, 3) and plain.sign_p == plain.row_sign_p == 0.21875
    assert pinned.sign_p == 1.0 and pinned.row_sign_p == 0.21875
    assert plain.case_level is not None and pinned.case_level is not None
    assert pinned.case_level.p_value == 1.0
    assert plain.net_lift_interval == tango_interval(Record(5, 1, 3))


def test_comparison_stats_without_repetitions_has_no_case_level() -> None:
    rows = [RowOutcome(f"c{i}", 0, "win", "checks") for i in range(3)]
    stats = comparison_stats("incumbent", rows, session_ran=False, seed=0)
    assert stats.case_level is None and stats.sign_p == 0.25


def test_judge_tally_counts_labels_and_split_rate() -> None:
    rows = [
        RowOutcome("a", 0, "win", "judge"),
        RowOutcome("a", 1, "tie", "judge-split"),
        RowOutcome("b", 0, "tie", "judge-refused"),
        RowOutcome("b", 1, "tie", "judge-split"),
        RowOutcome("c", 0, "win", "checks"),
        RowOutcome("c", 1, "tie", "judge-error", scored=False),
    ]
    tally = JudgeTally.from_rows(rows)
    assert (tally.judged, tally.agreed, tally.split) == (4, 1, 2)
    assert dict(tally.failures) == {"judge-refused": 1}
    assert tally.split_rate() == 0.5
    assert tally.split_interval() == wilson_interval(2, 4)
    assert JudgeTally.from_rows([]).split_rate() is None


# --- arm scores and case-runs passed ---


def test_arm_scores_and_case_runs_skip_holes() -> None:
    rows = [
        RowOutcome("a", 0, "win", "checks"),
        RowOutcome("b", 0, "tie", "checks-equal-no-judge"),
        RowOutcome("c", 0, "tie", "opponent-run-failed", scored=False),
    ]
    samples = [
        ArmSample("a", 0, "baseline", 1, 2),
        ArmSample("a", 0, "candidate", 2, 2),
        ArmSample("b", 0, "baseline", 0, 0),  # no checks: says nothing
        ArmSample("b", 0, "candidate", 1, 3),
        ArmSample("c", 0, "candidate", 3, 3),  # its row was unscored
        ArmSample("c", 0, "baseline", 0, 3, died=True),
        ArmSample("c", 0, "incumbent", 0, 1, died=True),
    ]
    assert arm_scores(samples, rows) == {
        "baseline": 0.5,
        "candidate": (1 + 1 / 3) / 2,
        "incumbent": None,
    }
    assert case_runs_passed(samples, rows) == {
        "baseline": CaseRunTally(0, 1),
        "candidate": CaseRunTally(1, 2),
        "incumbent": CaseRunTally(0, 0),
    }


def test_arm_sample_refuses_impossible_counts() -> None:
    with pytest.raises(ValueError, match=r"a rep 0 arm candidate: .* found 3 of 2"):
        ArmSample("a", 0, "candidate", 3, 2)


# --- printing ---


def test_format_rounds_halves_up_not_to_even() -> None:
    # 5W / 0L gives p = 0.0625, an exact half at three decimals: Python rounds it to even,
    # the reference (JavaScript toFixed) up.
    assert format(0.0625, ".3f") == "0.062"
    assert format_sign_p(sign_test_p(5, 0)) == "0.063"
    assert format_sign_p(1.0) == "1.000"
    assert format_net_lift(Record(1, 0, 7)) == "+13%"  # 12.5
    assert format_net_lift(Record(0, 1, 7)) == "-13%"
    assert format_net_lift(Record(0, 0, 0)) == "+0%"


# --- properties ---


@given(counts, counts)
def test_sign_p_is_a_probability_and_symmetric(wins: int, losses: int) -> None:
    p = sign_test_p(wins, losses)
    assert 0.0 < p <= 1.0
    assert p == sign_test_p(losses, wins)


@given(counts, counts, counts)
def test_tango_interval_contains_estimate(wins: int, losses: int, ties: int) -> None:
    record = Record(wins, losses, ties)
    interval = tango_interval(record)
    assert -1.0 <= interval.low <= interval.high <= 1.0
    assert interval.contains(net_lift(record))


@given(counts, st.integers(min_value=1, max_value=60))
def test_wilson_contains_rate(successes: int, total: int) -> None:
    successes = min(successes, total)
    interval = wilson_interval(successes, total)
    assert interval is not None and 0.0 <= interval.low <= interval.high <= 1.0
    assert interval.contains(successes / total)


RANK = {"FAIL": 0, "NEUTRAL": 1, "PASS": 2}


@given(counts, counts, counts)
def test_band_is_monotonic(wins: int, losses: int, ties: int) -> None:
    here = RANK[verdict_band(Record(wins, losses, ties))]
    assert RANK[verdict_band(Record(wins + 1, losses, ties))] >= here
    if losses:
        assert RANK[verdict_band(Record(wins, losses - 1, ties + 1))] >= here
    if ties:
        assert RANK[verdict_band(Record(wins + 1, losses, ties - 1))] >= here


@given(counts, counts, counts)
def test_band_agrees_with_exact_thirds(wins: int, losses: int, ties: int) -> None:
    record = Record(wins, losses, ties)
    if record.total == 0:
        return
    lift_times_three = 3 * (wins - losses)
    expected = (
        "PASS"
        if lift_times_three >= record.total
        else "FAIL"
        if lift_times_three <= -record.total
        else "NEUTRAL"
    )
    assert verdict_band(record) == expected
    assert math.isclose(net_lift(record), (wins - losses) / record.total)


@given(st.lists(st.sampled_from("WLT"), min_size=1, max_size=5), st.integers(1, 8))
def test_case_level_p_is_a_probability(outcomes: list[str], cases: int) -> None:
    rows = [
        row for c in range(cases) for row in rows_for(f"c{c}", "".join(outcomes[c % 2 :]) or "W")
    ]
    test = case_sign_flip_test(rows, seed=3)
    assert test.min_attainable_p <= test.p_value <= 1.0
