"""Row decisions of ``trialrun compare``: the four rules, holes, and when the judge is called."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trialrun.compare.judge import JudgeCause, JudgeDecision, JudgeWinner
from trialrun.compare.rows import ArmResult, Row, decide_row
from trialrun.compare.stats import Outcome, Record, RowOutcome


def arm(name: str, passed: int, total: int = 3) -> ArmResult:
    return ArmResult(arm=name, checks_passed=passed, checks_total=total)


def decision(winner: JudgeWinner = "candidate", cause: JudgeCause = "judge") -> JudgeDecision:
    return JudgeDecision(
        winner=winner,
        reason="scripted",
        agreed=cause == "judge",
        split=cause == "judge-split",
        errors=(),
        raw_answers=(),
        cause=cause,
    )


class CountingJudge:
    def __init__(self, answer: JudgeDecision) -> None:
        self.answer = answer
        self.calls = 0

    def __call__(self) -> JudgeDecision:
        self.calls += 1
        return self.answer


@pytest.mark.parametrize(
    ("candidate", "opponent", "decided_by"),
    [
        (None, None, "both-arms-failed"),
        (None, arm("baseline", 3), "candidate-run-failed"),
        (arm("candidate", 3), None, "opponent-run-failed"),
    ],
)
def test_a_dead_arm_is_an_unscored_hole_and_the_judge_is_not_asked(
    candidate: ArmResult | None, opponent: ArmResult | None, decided_by: str
) -> None:
    judge = CountingJudge(decision("candidate"))
    row = decide_row(candidate, opponent, judge)
    assert (row.outcome, row.decided_by, row.scored) == ("tie", decided_by, False)
    assert row.judge is None
    assert judge.calls == 0


@pytest.mark.parametrize(
    ("candidate_passed", "opponent_passed", "outcome"), [(3, 2, "win"), (0, 3, "loss")]
)
def test_checks_decide_when_exactly_one_arm_passed_everything(
    candidate_passed: int, opponent_passed: int, outcome: str
) -> None:
    judge = CountingJudge(decision("opponent"))
    row = decide_row(arm("candidate", candidate_passed), arm("baseline", opponent_passed), judge)
    assert (row.outcome, row.decided_by, row.scored) == (outcome, "checks", True)
    assert judge.calls == 0
    assert f"candidate {candidate_passed}/3" in row.reason
    assert f"baseline {opponent_passed}/3" in row.reason


def test_disjoint_partial_passes_count_as_equal() -> None:
    row = decide_row(arm("candidate", 2), arm("baseline", 1), None)
    assert (row.outcome, row.decided_by, row.scored) == ("tie", "checks-equal-no-judge", True)
    assert "missed a check" in row.reason


def test_equal_results_without_a_rubric_tie() -> None:
    row = decide_row(arm("candidate", 3), arm("incumbent", 3), None)
    assert (row.outcome, row.decided_by, row.scored) == ("tie", "checks-equal-no-judge", True)
    assert "passed every check" in row.reason


@pytest.mark.parametrize(
    ("winner", "outcome"), [("candidate", "win"), ("opponent", "loss"), ("tie", "tie")]
)
def test_equal_results_with_a_rubric_go_to_the_judge_once(
    winner: JudgeWinner, outcome: str
) -> None:
    answer = decision(winner)
    judge = CountingJudge(answer)
    row = decide_row(arm("candidate", 1), arm("baseline", 0), judge)
    assert (row.outcome, row.decided_by, row.scored) == (outcome, "judge", True)
    assert row.judge is answer
    assert judge.calls == 1


def test_cases_without_checks_go_straight_to_the_judge() -> None:
    judge = CountingJudge(decision("candidate"))
    row = decide_row(arm("candidate", 0, 0), arm("baseline", 0, 0), judge)
    assert (row.outcome, row.decided_by) == ("win", "judge")


@pytest.mark.parametrize(
    "cause", ["judge-split", "judge-unparseable", "judge-refused", "judge-timeout", "judge-error"]
)
def test_every_judge_failure_is_a_scored_tie_labelled_with_its_cause(cause: JudgeCause) -> None:
    # Even a decision that (wrongly) names a winner cannot win a row when the judge failed.
    row = decide_row(
        arm("candidate", 3), arm("baseline", 3), CountingJudge(decision("candidate", cause))
    )
    assert (row.outcome, row.decided_by, row.scored) == ("tie", cause, True)


def test_arm_result_rejects_impossible_counts() -> None:
    with pytest.raises(
        ValueError, match=r"candidate: expected 0 <= checks_passed <= checks_total, found 4/3"
    ):
        ArmResult(arm="candidate", checks_passed=4, checks_total=3)
    with pytest.raises(ValueError, match="found -1/3"):
        ArmResult(arm="candidate", checks_passed=-1, checks_total=3)


def test_outcomes_are_typed_values_that_serialise_as_their_words() -> None:
    row = decide_row(arm("candidate", 3), arm("baseline", 2), None)
    assert row.outcome is Outcome.WIN
    assert json.dumps({"outcome": row.outcome}) == '{"outcome": "win"}'
    assert f"{row.outcome}" == "win"
    assert [outcome.value for outcome in Outcome] == ["win", "loss", "tie"]
    assert [outcome.sign for outcome in Outcome] == [1, -1, 0]


def test_a_row_read_back_as_text_becomes_the_typed_value_and_a_stray_word_is_refused() -> None:
    # Stored runs (shard.json, run.jsonl) hold the words; a row made from them is typed again.
    loss: Any = "loss"
    draw: Any = "draw"
    assert Row(outcome=loss, decided_by="checks", scored=True, reason="").outcome is Outcome.LOSS
    assert RowOutcome("c", 0, loss, "checks").outcome is Outcome.LOSS
    with pytest.raises(ValueError, match="'draw'"):
        Row(outcome=draw, decided_by="checks", scored=True, reason="")
    with pytest.raises(ValueError, match="'draw'"):
        Record.from_rows([RowOutcome("c", 0, draw, "checks")])


counts = st.integers(min_value=0, max_value=5).flatmap(
    lambda total: st.tuples(st.integers(min_value=0, max_value=total), st.just(total))
)
maybe_arm = st.none() | counts


@given(candidate=maybe_arm, opponent=maybe_arm, has_rubric=st.booleans())
def test_rules_are_antisymmetric_and_call_the_judge_only_on_equal_results(
    candidate: tuple[int, int] | None, opponent: tuple[int, int] | None, has_rubric: bool
) -> None:
    # Swapping the arms must mirror the outcome; the judge runs only for live, equal arms.
    forward = CountingJudge(decision("candidate"))
    backward = CountingJudge(decision("opponent"))
    a = ArmResult("candidate", *candidate) if candidate else None
    b = ArmResult("baseline", *opponent) if opponent else None
    row: Row = decide_row(a, b, forward if has_rubric else None)
    mirrored = decide_row(b, a, backward if has_rubric else None)
    mirror = {"win": "loss", "loss": "win", "tie": "tie"}
    assert mirrored.outcome == mirror[row.outcome]
    assert row.scored == (a is not None and b is not None)
    equal_live = a is not None and b is not None and a.passed_all == b.passed_all
    assert forward.calls == (1 if equal_live and has_rubric else 0)
