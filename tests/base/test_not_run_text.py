"""RunResult.not_run_text: how an interrupted run names the cases it did not run."""

from __future__ import annotations

from trialrun.base.results import AgentRun, CaseResult, RunResult


def _run(done: int, not_run: list[str]) -> RunResult:
    cases = [CaseResult(f"c{i}", "pass", AgentRun(case_id=f"c{i}")) for i in range(done)]
    return RunResult("r", "s", "suite.yaml", ["agent"], "replay", cases, 0.0, 0.0, True, not_run)


def test_counts_take_their_singular_and_plural() -> None:
    assert _run(0, ["a"]).not_run_text() == "1 of 1 case did not run (a)"
    assert _run(1, ["a", "b"]).not_run_text() == "2 of 3 cases did not run (a, b)"


def test_more_than_ten_ids_end_in_an_ellipsis() -> None:
    ids = [f"t{i}" for i in range(12)]
    text = _run(0, ids).not_run_text()
    assert text.startswith("12 of 12 cases did not run (t0, ") and text.endswith("t9, ...)")


def test_a_complete_run_says_nothing() -> None:
    assert _run(2, []).not_run_text() == ""
