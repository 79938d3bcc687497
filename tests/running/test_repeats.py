"""``running.repeats.combine``: one result for a case from its runs, and the gate on it."""

from __future__ import annotations

import sys
from pathlib import Path

import hypothesis
import pytest
from hypothesis import strategies as st

from builders import write_suite
from trialrun.base.results import AgentRun, CaseResult, Failure, Status
from trialrun.config import Suite, load_suite
from trialrun.running.repeats import ONCE, Repeats, combine


def suite_with(
    root: Path, settings: str = "", case_extra: dict[str, object] | None = None
) -> Suite:
    path = write_suite(
        root,
        name="s",
        agent=[sys.executable, "-c", "pass"],
        tools=["t"],
        cases={"c": {"input": {}, "cassette": "c.jsonl", **(case_extra or {})}},
        settings=settings,
    )
    return load_suite(path)


def result(status: Status) -> CaseResult:
    failure = None
    if status != "pass":
        failure = Failure("agent_crashed" if status == "error" else "assertion_failed", status)
        failure.status = "error" if status == "error" else "fail"
    return CaseResult("c", status, AgentRun("c"), failure=failure)


@pytest.fixture(scope="module")
def suites(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Suite]:
    def made(name: str, settings: str = "", extra: dict[str, object] | None = None) -> Suite:
        return suite_with(tmp_path_factory.mktemp(name), settings, extra)

    return {
        "fail": made("fail"),
        "warn": made("warn", "flaky: warn\n"),
        "rate": made("rate", "min_case_pass_rate: 0.5\n"),
        "case_rate": made("case_rate", "min_case_pass_rate: 0.9\n", {"min_case_pass_rate": 0.5}),
    }


def test_one_run_comes_out_as_it_went_in(suites: dict[str, Suite]) -> None:
    suite = suites["fail"]
    only = result("fail")
    assert combine([only], Repeats(repeat=5), suite, suite.cases[0]) is only
    assert combine([only], ONCE, suite, suite.cases[0]) is only


STATUSES: list[Status] = ["pass", "fail", "error"]


@hypothesis.given(
    statuses=st.lists(st.sampled_from(STATUSES), min_size=2, max_size=12),
    policy=st.sampled_from(["fail", "warn", "rate", "case_rate"]),
)
def test_status_and_blocking_follow_the_runs(
    suites: dict[str, Suite], statuses: list[Status], policy: str
) -> None:
    suite = suites[policy]
    runs = [result(status) for status in statuses]
    combined = combine(runs, Repeats(repeat=len(runs)), suite, suite.cases[0])
    assert combined.runs is not None
    assert [run.status for run in combined.runs.runs] == statuses
    passes = statuses.count("pass")
    assert combined.runs.passes == passes
    minimum = 0.5 if policy in ("rate", "case_rate") else None
    assert combined.runs.min_pass_rate == minimum
    if passes == len(statuses):
        expected, blocking = "pass", False
    elif passes == 0:
        expected = "error" if set(statuses) == {"error"} else "fail"
        blocking = True
    elif minimum is not None:
        below = passes / len(statuses) < minimum
        expected, blocking = ("fail" if below else "flaky"), below
    else:
        expected, blocking = "flaky", policy == "fail"
    assert (combined.status, combined.runs.blocking) == (expected, blocking)
    assert combined.passed is not blocking
    # The details shown are those of the first failing run, else of the first run.
    first_failing = next((run for run in runs if run.status != "pass"), runs[0])
    assert combined.run is first_failing.run


def test_retries_carry_no_rate_gate_and_count_the_retries(suites: dict[str, Suite]) -> None:
    suite = suites["rate"]
    combined = combine(
        [result("fail"), result("fail"), result("pass")], Repeats(retries=3), suite, suite.cases[0]
    )
    assert combined.runs is not None
    assert (combined.status, combined.runs.retries, combined.runs.min_pass_rate) == (
        "flaky",
        2,
        None,
    )


def test_below_the_minimum_the_case_fails_naming_both_rates(suites: dict[str, Suite]) -> None:
    suite = suites["rate"]
    runs = [result("pass"), result("fail"), result("fail"), result("fail")]
    combined = combine(runs, Repeats(repeat=4), suite, suite.cases[0])
    assert combined.status == "fail"
    assert combined.failure is not None
    assert combined.failure.kind == "pass_rate_below_minimum"
    assert combined.failure.message == (
        "passed 1 of 4 runs (25%), expected at least min_case_pass_rate 0.5; "
        "first failing run: fail"
    )


def test_repeat_and_retries_are_checked() -> None:
    with pytest.raises(ValueError, match="found both"):
        Repeats(repeat=2, retries=1)
    with pytest.raises(ValueError, match="repeat >= 1"):
        Repeats(repeat=0)


@pytest.mark.parametrize(
    ("settings", "fragment"),
    [
        ("min_case_pass_rate: 0\n", "min_case_pass_rate"),
        ("min_case_pass_rate: 1.5\n", "min_case_pass_rate"),
        ("flaky: sometimes\n", "flaky"),
    ],
)
def test_bad_gate_keys_are_refused_where_they_are(
    tmp_path: Path, settings: str, fragment: str
) -> None:
    from trialrun.errors import ConfigError

    with pytest.raises(ConfigError) as caught:
        suite_with(tmp_path, settings)
    assert fragment in str(caught.value)
    assert "suite.yaml:6" in str(caught.value)
