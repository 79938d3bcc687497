"""Console output: tables, the peer's failure block with the right labels, annotations."""

from __future__ import annotations

from pathlib import Path

from trialrun.artifacts.baseline import compute_regression, load_baseline, read_summary
from trialrun.base.results import AgentRun, CaseResult, CheckFailure, Failure, RunResult, Status
from trialrun.report.console import (
    failure_details,
    format_failures,
    format_regression,
    format_run,
    gate_failures,
    gate_value,
)
from trialrun.report.summary import build_summary

CALL_ORDER = CheckFailure(
    "call_order",
    "Tool call order not satisfied: lookup_order -> search_docs",
    "lookup_order -> search_docs",
    "search_docs",
)
MISMATCH = (
    'Cassette mismatch.\nRequested tool: search_docs\nRequested args: {"q":"x"}\n'
    "No cassette entries found."
)
PASS_RATE_GATE = {
    "checks": [
        {"id": "min_pass_rate", "status": "fail", "threshold": 1.0, "baseline": 1.0, "current": 0.0}
    ]
}


def case(
    case_id: str,
    status: Status = "pass",
    *,
    wall_ms: int = 10,
    failure: Failure | None = None,
    checks: tuple[CheckFailure, ...] = (),
) -> CaseResult:
    run = AgentRun(case_id=case_id, wall_ms=wall_ms)
    return CaseResult(case_id, status, run, check_failures=list(checks), failure=failure)


def run_of(*cases: CaseResult) -> RunResult:
    return RunResult(
        "r1", "demo", "suite.yaml", ["python3", "a.py"], "replay", list(cases), 0.0, 1.0
    )


def test_failure_block_matches_the_peer_layout() -> None:
    failing = case(
        "t1",
        "fail",
        failure=Failure("assertion_failed", CALL_ORDER.message),
        checks=(CALL_ORDER,),
    )
    text = "\n".join(format_failures([case("t0"), failing], gate_failures(PASS_RATE_GATE)))
    assert text == (
        "Failures (1 case):\n"
        "\n"
        "FAIL t1\n"
        "  assertion: call_order\n"
        "  message:   Tool call order not satisfied: lookup_order -> search_docs\n"
        "  expected:  lookup_order -> search_docs\n"
        "  observed:  search_docs\n"
        "\n"
        "Gate failures (1):\n"
        "  min_pass_rate: Regression gate min_pass_rate failed: pass_rate 0.0% < required "
        "100.0% (baseline 100.0%)"
    )


def test_labels_say_what_kind_of_failure_it_is() -> None:
    budget = CheckFailure(
        "budget:max_tool_calls",
        "Budget exceeded: max_tool_calls limit=1 actual=3",
        "max_tool_calls <= 1",
        "3",
    )
    cases = [
        case("b", "fail", failure=Failure("budget_exceeded", budget.message), checks=(budget,)),
        case("m", "error", failure=Failure("cassette_mismatch", MISMATCH, "error")),
    ]
    text = "\n".join(format_failures(cases, []))
    assert text == (
        "Failures (2 cases):\n"
        "\n"
        "FAIL b\n"
        "  budget:    max_tool_calls\n"
        "  message:   Budget exceeded: max_tool_calls limit=1 actual=3\n"
        "  expected:  max_tool_calls <= 1\n"
        "  observed:  3\n"
        "\n"
        "ERROR m\n"
        "  failure:   cassette_mismatch\n"
        "  message:   Cassette mismatch.\n"
        "             Requested tool: search_docs\n"
        '             Requested args: {"q":"x"}\n'
        "             No cassette entries found."
    )


def test_a_fault_with_budget_information_lists_both() -> None:
    budget = CheckFailure("budget:max_wall_ms", "Budget exceeded: max_wall_ms limit=1 actual=9")
    faulted = case(
        "t", "error", failure=Failure("timeout", "Case timed out", "error"), checks=(budget,)
    )
    assert [(d.label, d.type) for d in failure_details(faulted)] == [
        ("failure", "timeout"),
        ("budget", "max_wall_ms"),
    ]
    unexplained = failure_details(case("u", "fail"))
    assert [(d.type, d.message) for d in unexplained] == [
        ("unknown", "Case failed without a recorded reason")
    ]
    assert failure_details(case("p")) == []


def test_wall_and_status_gate_messages(peer_fixtures: Path) -> None:
    probe = peer_fixtures / "generated-0.2.3/probe-runs/reg_gate"
    summary = read_summary(probe / "summary.json")
    baseline = load_baseline(probe / "baseline_b2.json")
    baseline["cases"][0]["status"] = "pass"
    summary["cases"][0]["status"] = "error"
    regression = compute_regression(baseline, summary, summary["policy_snapshot"], "b2.json")
    assert gate_failures(regression) == [
        (
            "max_avg_wall_ms_delta_pct",
            "Regression gate max_avg_wall_ms_delta_pct failed: change +1500.0% > allowed +5.0% "
            "(baseline 1 ms, current 16 ms)",
        ),
        (
            "max_p95_wall_ms_delta_pct",
            "Regression gate max_p95_wall_ms_delta_pct failed: change +1500.0% > allowed +5.0% "
            "(baseline 1 ms, current 16 ms)",
        ),
        (
            "status_regressions",
            "Regression gate status_regressions failed: 1 case passed in the baseline and no "
            "longer passes: t1",
        ),
    ]
    assert gate_failures(None) == []


def test_regression_table_warnings_and_case_changes(peer_fixtures: Path) -> None:
    probe = peer_fixtures / "generated-0.2.3/probe-runs/reg_gate"
    summary = read_summary(probe / "summary.json")
    regression = compute_regression(
        load_baseline(probe / "baseline_b2.json"), summary, summary["policy_snapshot"], "b2.json"
    )
    lines = format_regression(regression)
    assert lines[0] == "Regression checks (baseline: b2.json)"
    assert lines[1].split() == ["Check", "Status", "Details"]
    assert lines[3] == (
        "min_pass_rate              PASS    "
        "baseline=100.0% current=100.0% delta=+0.0 pts threshold=50.0%"
    )
    assert lines[4] == (
        "max_avg_wall_ms_delta_pct  FAIL    "
        "baseline=1 ms current=16 ms delta_pct=+1500.0% threshold=+5.0%"
    )
    assert lines[6] == "status_regressions         PASS    current=0 threshold=0"
    assert (
        lines[7]
        == "Warning: Baseline schema_version does not match current summary schema_version."
    )
    assert lines[8:] == ["", "Case changes vs baseline:", "  missing: t_gone"]


def test_format_run_puts_it_together() -> None:
    failing = case("t2", "fail", wall_ms=1234, failure=Failure("task_error", "gave up"))
    run = run_of(case("t1"), failing)
    baseline = {
        "schema_version": 1,
        "cases": [{"id": "t1", "status": "pass"}, {"id": "t2", "status": "pass"}],
    }
    first = build_summary(run, regression=None)
    regression = compute_regression(baseline, first, None, "b.json")
    text = format_run(run, build_summary(run, regression=regression), regression)
    lines = text.splitlines()
    assert lines[:6] == [
        "trialrun results: demo (replay, run r1)",
        "Case  Status  Wall ms",
        "----  ------  -------",
        "t1    PASS         10",
        "t2    FAIL       1234",
        "1 passed, 1 failed, 0 errors (pass rate 50.0%)",
    ]
    assert lines[-12:] == [
        "",
        "Case changes vs baseline:",
        "  t2: pass -> fail",
        "",
        "Failures (1 case):",
        "",
        "FAIL t2",
        "  failure:   task_error",
        "  message:   gave up",
        "",
        "Gate failures (1):",
        "  status_regressions: Regression gate status_regressions failed: 1 case passed in "
        "the baseline and no longer passes: t2",
    ]


def test_gate_values_read_as_people_read_them() -> None:
    assert gate_value("min_pass_rate", "current", 0.5) == "50.0%"
    assert gate_value("min_pass_rate", "delta", -0.25) == "-25.0 pts"
    assert gate_value("max_p95_wall_ms_delta_pct", "delta_pct", 0.125) == "+12.5%"
    assert gate_value("max_p95_wall_ms_delta_pct", "threshold", 0.25) == "+25.0%"
    assert gate_value("max_p95_wall_ms_delta_pct", "current", 52.0) == "52 ms"
    assert gate_value("max_p95_wall_ms_delta_pct", "current", 52.25) == "52.25 ms"
    assert gate_value("status_regressions", "current", 2) == "2"
    assert gate_value("some_gate", "current", 0.1 + 0.2) == "0.3"
    assert gate_value("min_pass_rate", "baseline", None) == "n/a"


def test_counts_take_the_singular_for_one() -> None:
    crashed = case("t2", "error", failure=Failure("task_error", "boom", "error"))
    run = run_of(case("t1"), crashed)
    text = format_run(run, build_summary(run, regression=None), None)
    assert "1 passed, 0 failed, 1 error (pass rate 50.0%)" in text.splitlines()


def test_passing_run_has_no_failure_block() -> None:
    text = format_run(run_of(case("t1")), build_summary(run_of(case("t1")), regression=None), None)
    assert "Failures" not in text and "Gate failures" not in text and "Regression" not in text


def test_agent_text_is_redacted_and_its_terminal_controls_shown_as_escapes() -> None:
    token = "ghp_" + "d" * 36
    nasty = case(
        "t\x1b[2J1", "error", failure=Failure("task_error", f"{token}\x1b[31m red\r", "error")
    )
    text = "\n".join(format_failures([nasty], []))
    assert token not in text and "\x1b" not in text and "\r" not in text
    assert "ERROR t\\x1b[2J1" in text and "[REDACTED]\\x1b[31m red\\r" in text


def test_a_faulty_agent_shows_the_end_of_its_stderr() -> None:
    traceback = "\n".join(f"frame {i}" for i in range(20)) + "\nRuntimeError: boom \x1b[31m"
    failure = Failure("agent_crashed", "Agent exited with code 1", "error", stderr_tail=traceback)
    run = AgentRun(case_id="t1", failure=failure, stderr_tail=traceback)
    case = CaseResult(case_id="t1", status="error", run=run, failure=failure)
    text = "\n".join(format_failures([case], []))
    assert "RuntimeError: boom \\x1b[31m" in text and "\x1b" not in text
    assert "frame 13" in text and "frame 12" not in text  # only the last lines


def test_a_failing_check_does_not_print_stderr() -> None:
    failure = Failure("assertion_failed", "Missing required fields: x", "fail", stderr_tail="noise")
    run = AgentRun(case_id="t1", failure=failure, stderr_tail="noise")
    case = CaseResult(case_id="t1", status="fail", run=run, failure=failure)
    assert "noise" not in "\n".join(format_failures([case], []))


def unused_case(case_id: str, tools: list[str], *, count: int | None = None) -> CaseResult:
    run = AgentRun(case_id=case_id, wall_ms=10)
    run.unused_recordings = len(tools) if count is None else count
    run.unused_recording_tools = tools
    return CaseResult(case_id, "pass", run)


def test_unused_recordings_are_listed_per_case_with_their_tools() -> None:
    run = run_of(
        unused_case("t1", ["search_docs", "fetch", "search_docs"]),
        case("t2"),
        unused_case("t3", ["fetch"]),
    )
    lines = format_run(run, build_summary(run, regression=None), None).splitlines()
    start = lines.index("Unused recordings (they do not fail a case):")
    assert lines[start - 1 : start + 3] == [
        "",
        "Unused recordings (they do not fail a case):",
        "  t1: 3 (search_docs x2, fetch)",
        "  t3: 1 (fetch)",
    ]
    assert "Failures" not in "\n".join(lines)


def test_unused_recordings_without_tool_names_show_the_count() -> None:
    run = run_of(unused_case("t1", [], count=2))
    text = format_run(run, build_summary(run, regression=None), None)
    assert "\n  t1: 2\n" in text + "\n"


def test_a_run_that_used_every_recording_says_nothing_about_them() -> None:
    text = format_run(run_of(case("t1")), build_summary(run_of(case("t1")), regression=None), None)
    assert "Unused" not in text


def test_a_gate_skipped_for_a_missing_baseline_metric_says_to_re_promote() -> None:
    baseline = {"schema_version": 1, "cases": [{"id": "t1", "status": "pass"}]}
    run = run_of(case("t1"))
    regression = compute_regression(
        baseline, build_summary(run, regression=None), {"max_avg_wall_ms_delta_pct": 0.1}, "b.json"
    )
    row = next(line for line in format_regression(regression) if "max_avg_wall" in line)
    assert "SKIP" in row
    assert "Re-promote the baseline to bring the metric in: trialrun baseline promote" in row
    assert row.endswith("--from RUN_DIR --to b.json")
    unset = next(line for line in format_regression(regression) if "max_p95_wall" in line)
    assert "Re-promote" not in unset  # skipped because no threshold is set: nothing to re-promote
