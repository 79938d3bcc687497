"""``artifacts.rate_gate``: cases run K times gate on their pass rates and the uncertainty."""

from __future__ import annotations

from typing import Any

import hypothesis
import pytest
from hypothesis import strategies as st

from trialrun.artifacts.baseline import compute_regression
from trialrun.artifacts.rate_gate import rate_check, rates_of
from trialrun.base.proportions import wilson_interval


def repeated(case_id: str, passes: int, runs: int, status: str = "pass") -> dict[str, Any]:
    return {
        "id": case_id,
        "status": status,
        "runs": [{"status": "pass" if n < passes else "fail"} for n in range(runs)],
        "passes": passes,
        "pass_hat_k": {"k": runs, "all_passed": passes == runs, "estimate": 0.0},
    }


@pytest.mark.parametrize(
    ("before", "after", "regressed"),
    [
        ((9, 9), (3, 9), True),
        ((9, 9), (4, 9), False),
        ((9, 9), (9, 9), False),
        ((3, 9), (9, 9), False),  # better is never a regression
        ((20, 20), (12, 20), True),
        ((5, 10), (0, 10), False),  # conservative: 24%-76% and 0%-28% overlap
    ],
)
def test_a_regression_is_a_current_interval_wholly_below_the_baseline(
    before: tuple[int, int], after: tuple[int, int], regressed: bool
) -> None:
    check = rate_check({"c": before}, {"c": after})
    assert check is not None
    assert (check["status"] == "fail") is regressed
    assert check["cases"] == (["c"] if regressed else [])


@hypothesis.given(
    st.integers(1, 30).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))),
    st.integers(1, 30).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))),
)
def test_the_gate_is_exactly_interval_separation(
    before: tuple[int, int], after: tuple[int, int]
) -> None:
    check = rate_check({"c": before}, {"c": after})
    assert check is not None
    old, new = wilson_interval(*before), wilson_interval(*after)
    assert old is not None and new is not None
    assert (check["status"] == "fail") is (new.high < old.low)


def test_cases_without_rates_on_both_sides_are_not_compared() -> None:
    assert rate_check({"a": (9, 9)}, {"b": (0, 9)}) is None
    odd = [
        {"id": "no_hat", "status": "pass", "runs": [{}], "passes": 1},
        {"id": "bool", "status": "pass", "runs": [{}], "passes": True, "pass_hat_k": {}},
        {"id": "too_many", "status": "pass", "runs": [{}], "passes": 2, "pass_hat_k": {}},
        {"id": "no_list", "status": "pass", "runs": 3, "passes": 1, "pass_hat_k": {}},
        "not a case",
    ]
    assert rates_of({"cases": [*odd, repeated("ok", 2, 3)]}) == {"ok": (2, 3)}


def test_compute_regression_hands_rated_cases_to_the_rate_check() -> None:
    baseline = {"schema_version": 1, "cases": [repeated("a", 9, 9), {"id": "b", "status": "pass"}]}
    summary = {
        "schema_version": 1,
        "cases": [repeated("a", 0, 9, "fail"), {"id": "b", "status": "fail"}],
    }
    regression = compute_regression(baseline, summary, None, "baseline.json")
    checks = {check["id"]: check for check in regression["checks"]}
    assert checks["status_regressions"]["cases"] == ["b"]  # a single outcome: status as before
    assert checks["pass_rate_regressions"]["cases"] == ["a"]
    assert regression["passed"] is False
    # A run without rated cases gets no new check: its regression block is as it was.
    plain = compute_regression(
        {"cases": [{"id": "b", "status": "pass"}]}, {"cases": [{"id": "b", "status": "pass"}]},
        None, "baseline.json",
    )  # fmt: skip
    assert [check["id"] for check in plain["checks"]] == [
        "min_pass_rate",
        "max_avg_wall_ms_delta_pct",
        "max_p95_wall_ms_delta_pct",
        "status_regressions",
    ]
