"""The views of a case run more than once: summary keys, console, report.html and JUnit."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from trialrun.base.results import AgentRun, CaseResult, CaseRuns, Failure, RunResult, Status
from trialrun.report.case_runs import runs_text
from trialrun.report.console import format_run
from trialrun.report.html import render_html
from trialrun.report.junit import build_junit
from trialrun.report.summary import build_summary

PAYLOAD = "<script>alert(1)</script>"


def one_run(status: Status, message: str = "nope", stderr: str = "") -> CaseResult:
    run = AgentRun("c", wall_ms=7, stderr_tail=stderr)
    if status == "pass":
        return CaseResult("c", "pass", run)
    kind = "agent_crashed" if status == "error" else "assertion_failed"
    return CaseResult("c", status, run, failure=Failure(kind, message, status, stderr))


def case_of(runs: list[CaseResult], status: Status, *, repeat: int, blocking: bool) -> CaseResult:
    shown = next((run for run in runs if run.status != "pass"), runs[0])
    record = CaseRuns(runs, repeat, 0 if repeat > 1 else len(runs) - 1, None, blocking)
    return CaseResult("c", status, shown.run, failure=shown.failure, runs=record)


def run_of(case: CaseResult) -> RunResult:
    return RunResult("r", "s", "suite.yaml", ["agent"], "replay", [case], 0.0, 1.0)


def test_a_retried_case_has_flaky_error_and_failure_children_in_run_order() -> None:
    runs = [one_run("error", "crashed", "trace line"), one_run("fail"), one_run("pass")]
    case = case_of(runs, "flaky", repeat=1, blocking=False)
    root = ET.fromstring(build_junit(run_of(case)))
    (testcase,) = root.iter("testcase")
    assert [child.tag for child in testcase] == ["flakyError", "flakyFailure"]
    assert testcase[0].get("type") == "agent_crashed"
    assert testcase[0].findtext("system-err") == "trace line"
    assert (root.get("failures"), root.get("errors")) == ("0", "0")
    assert runs_text(case) == "passed on retry 2"


def test_a_failing_case_has_one_failure_and_a_rerun_failure_per_other_run() -> None:
    runs = [one_run("fail", "first"), one_run("fail", "second"), one_run("error", "third")]
    case = case_of(runs, "fail", repeat=1, blocking=True)
    root = ET.fromstring(build_junit(run_of(case)))
    (testcase,) = root.iter("testcase")
    assert [child.tag for child in testcase] == ["failure", "rerunFailure", "rerunError"]
    assert testcase[0].get("message") == "first"
    assert [child.get("message") for child in testcase[1:]] == ["second", "third"]
    assert root.get("failures") == "1"


def test_summary_console_and_page_show_runs_and_escape_the_agents_text() -> None:
    runs = [one_run("pass"), one_run("fail", PAYLOAD), one_run("pass"), one_run("pass")]
    case = case_of(runs, "flaky", repeat=4, blocking=True)
    run = run_of(case)
    summary = build_summary(run, regression=None)
    (doc,) = summary["cases"]
    assert (doc["passes"], doc["pass_rate"], doc["blocking"]) == (3, 0.75, True)
    assert [entry["run"] for entry in doc["runs"]] == [1, 2, 3, 4]
    assert doc["pass_hat_k"] == {"k": 4, "all_passed": False, "estimate": 0.75**4}
    assert summary["run"]["exit_status"] == "failed"
    text = format_run(run, summary, None)
    assert "3/4 passed (75%, 95% CI 30%-95%)" in text
    assert "0 errors, 1 flaky" in text
    page = render_html(run, summary)
    assert PAYLOAD not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "fails the run (flaky: fail)" in page
    assert 'data-filter="flaky"' in page


def test_a_run_of_cases_run_once_has_no_runs_column_or_flaky_filter() -> None:
    run = run_of(one_run("pass"))
    summary = build_summary(run, regression=None)
    assert "Runs" not in format_run(run, summary, None)
    assert 'data-filter="flaky"' not in render_html(run, summary)
