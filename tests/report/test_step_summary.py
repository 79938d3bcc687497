"""The GitHub step summary: content, Markdown/HTML escaping, the 1 MiB cap, append semantics."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trialrun.artifacts.baseline import compute_regression
from trialrun.base.results import AgentRun, CaseResult, CheckFailure, Failure, RunResult, Status
from trialrun.report.step_summary import (
    STEP_SUMMARY_LIMIT,
    actions_run_url,
    append_step_summary,
    build_step_summary,
    markdown_text,
)
from trialrun.report.summary import build_summary

CALL_ORDER = CheckFailure(
    "call_order",
    "Tool call order not satisfied: lookup_order -> search_docs",
    "lookup_order -> search_docs",
    "search_docs",
)


def case(
    case_id: str,
    status: Status = "pass",
    *,
    failure: Failure | None = None,
    checks: tuple[CheckFailure, ...] = (),
) -> CaseResult:
    return CaseResult(
        case_id, status, AgentRun(case_id=case_id), check_failures=list(checks), failure=failure
    )


def run_of(*cases: CaseResult, interrupted: bool = False) -> RunResult:
    return RunResult(
        "20240101-000000-abcd",
        "demo",
        "suite.yaml",
        ["python3"],
        "replay",
        list(cases),
        0.0,
        1.0,
        interrupted=interrupted,
    )


def summarize(run: RunResult, regression: dict[str, Any] | None = None, **kwargs: Any) -> str:
    summary = build_summary(run, regression=regression, cwd=Path("/"))
    hint = kwargs.pop("artifacts_hint", "trialrun_out/demo/run1")
    return build_step_summary(run, summary, regression, artifacts_hint=hint, **kwargs)


def table_rows(text: str, header_start: str) -> list[list[str]]:
    """The cells of the table whose header row starts with ``header_start``, split as GFM does."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = re.split(r"(?<!\\)\|", line.strip())[1:-1]
        rows.append([cell.strip() for cell in cells])
    return rows


# -- content ----------------------------------------------------------------------------------


def test_a_passing_run_is_one_verdict_without_a_failure_table() -> None:
    text = summarize(run_of(case("t1"), case("t2")))
    assert text.startswith("## ✅ trialrun PASS: demo\n")
    assert "**PASS**: 2 cases: 2 passed, 0 failed, 0 errors (pass rate 100.0%)" in text
    assert "Failing cases" not in text
    assert "_No baseline comparison: regression gates not checked._" in text
    assert "written to trialrun\\_out/demo/run1" in text


def test_failing_cases_are_a_table_with_kind_expected_and_observed() -> None:
    failing = case("t2", "fail", failure=Failure("assertion_failed", "x"), checks=(CALL_ORDER,))
    broken = case("t3", "error", failure=Failure("agent_crashed", "Agent exited 1", "error"))
    text = summarize(run_of(case("t1"), failing, broken))
    assert text.startswith("## ❌ trialrun FAIL: demo\n")
    assert "3 cases: 1 passed, 1 failed, 1 error (pass rate 33.3%)" in text
    assert "### Failing cases (2)" in text
    assert table_rows(text, "| Case |") == [
        [
            "t2",
            "FAIL",
            "assertion: call\\_order",
            "Tool call order not satisfied: lookup\\_order -&gt; search\\_docs",
            "lookup\\_order -&gt; search\\_docs",
            "search\\_docs",
        ],
        ["t3", "ERROR", "failure: agent\\_crashed", "Agent exited 1", "", ""],
    ]


def test_regression_gates_and_case_changes_are_listed() -> None:
    baseline = build_summary(run_of(case("t1"), case("t2"), case("gone")), regression=None)
    run = run_of(case("t1"), case("t2", "fail", failure=Failure("task_error", "no")), case("new"))
    current = build_summary(run, regression=None)
    regression = compute_regression(
        baseline, current, {"min_pass_rate": 1.0}, "baselines/demo.json"
    )
    text = summarize(run, regression)
    assert "regression gates: 2 failed" in text
    assert "### Regression gates (baseline: baselines/demo.json)" in text
    gates = {row[0]: row[1] for row in table_rows(text, "| Check |")}
    assert gates == {
        "min\\_pass\\_rate": "❌ fail",
        "max\\_avg\\_wall\\_ms\\_delta\\_pct": "⏭️ skipped",
        "max\\_p95\\_wall\\_ms\\_delta\\_pct": "⏭️ skipped",
        "status\\_regressions": "❌ fail",
    }
    assert table_rows(text, "| Case | Baseline |") == [["t2", "pass", "fail"]]
    assert "**Missing cases (1):** gone" in text and "**New cases (1):** new" in text


def test_passing_gates_are_reported_as_such() -> None:
    baseline = build_summary(run_of(case("t1")), regression=None)
    regression = compute_regression(baseline, baseline, {"min_pass_rate": 1.0}, "b.json")
    text = summarize(run_of(case("t1")), regression)
    assert "**PASS**" in text and "regression gates: all passed" in text


def test_the_artifacts_link_points_at_the_workflow_run() -> None:
    url = actions_run_url(
        {
            "GITHUB_SERVER_URL": "https://github.com/",
            "GITHUB_REPOSITORY": "acme/agents",
            "GITHUB_RUN_ID": "4242",
        }
    )
    assert url == "https://github.com/acme/agents/actions/runs/4242"
    text = summarize(run_of(case("t1")), run_url=url)
    assert "[workflow run page](https://github.com/acme/agents/actions/runs/4242)" in text


def test_no_link_without_all_three_variables_or_with_a_non_http_server() -> None:
    full = {"GITHUB_SERVER_URL": "https://x", "GITHUB_REPOSITORY": "a/b", "GITHUB_RUN_ID": "1"}
    for missing in full:
        assert actions_run_url({k: v for k, v in full.items() if k != missing}) is None
    assert actions_run_url({**full, "GITHUB_SERVER_URL": "javascript:alert(1)"}) is None
    text = summarize(run_of(case("t1")), artifacts_hint=None, run_url=None)
    assert "Artifacts" not in text


def test_a_hostile_run_url_cannot_close_the_link() -> None:
    text = summarize(run_of(case("t1")), run_url="https://x/a) <img src=y>")
    assert "(https://x/a%29%20%3Cimg%20src=y%3E)" in text


def test_an_interrupted_run_says_so() -> None:
    text = summarize(run_of(case("t1"), interrupted=True))
    assert "❌ trialrun FAIL" in text and "The run was interrupted" in text


# -- escaping ---------------------------------------------------------------------------------


HOSTILE_ID = "evil|id\n## heading <script>alert(1)</script> `code` [x](javascript:y) $x$"


def test_hostile_case_ids_and_messages_stay_inside_their_cells() -> None:
    failure = Failure("task_error", "line one\r\nline | two <b>bold</b> **strong** ~~del~~")
    text = summarize(run_of(case(HOSTILE_ID, "fail", failure=failure)))
    [row] = table_rows(text, "| Case |")
    assert len(row) == 6
    assert row[0] == (
        "evil\\|id<br>## heading &lt;script&gt;alert(1)&lt;/script&gt; \\`code\\` "
        "\\[x\\](javascript:y) \\$x\\$"
    )
    assert row[3] == (
        "line one<br>line \\| two &lt;b&gt;bold&lt;/b&gt; \\*\\*strong\\*\\* \\~\\~del\\~\\~"
    )
    assert "<script>" not in text and "<b>" not in text
    assert not any(line.startswith("## heading") for line in text.splitlines())


def test_hostile_suite_names_and_paths_are_escaped_too() -> None:
    run = run_of(case("t1"))
    run.suite_name = "<img src=x onerror=alert(1)>"
    text = summarize(run, artifacts_hint="out/<b>|x")
    assert "<img" not in text and "<b>" not in text
    assert "written to out/&lt;b&gt;\\|x" in text


def test_agent_text_is_redacted() -> None:
    token = "ghp_" + "z" * 36
    failing = case("t1", "fail", checks=(CheckFailure("tool_args", "bad", f"key {token}", "x"),))
    text = summarize(run_of(failing))
    assert token not in text and "key \\[REDACTED\\]" in text


def test_a_secret_at_the_cut_of_a_long_cell_is_redacted_whole() -> None:
    token = "ghp_" + "q" * 36
    long_message = "x" * 290 + " " + token
    failing = case("t1", "fail", failure=Failure("task_error", "short"))
    failing.check_failures = [CheckFailure("tool_args", "bad", long_message, None)]
    text = summarize(run_of(failing))
    assert "ghp_" not in text and "qqqq" not in text


def test_a_summary_without_aggregates_falls_back_to_the_run() -> None:
    run = run_of(case("t1"), case("t2", "fail", failure=Failure("task_error", "no")))
    text = build_step_summary(run, {}, None, artifacts_hint=None)
    assert "**FAIL**: 2 cases: 1 passed, 1 failed, 0 errors (pass rate 50.0%)" in text


@given(st.text())
def test_escaped_text_is_one_inert_line(text: str) -> None:
    escaped = markdown_text(text)
    assert "\n" not in escaped and "\r" not in escaped
    assert "<" not in escaped.replace("<br>", "")
    assert ">" not in escaped.replace("<br>", "")
    assert not re.search(r"(?<!\\)[|`*_\[\]~$]", escaped.replace("\\\\", ""))
    assert not re.search("[\ud800-\udfff]", escaped)
    escaped.encode("utf-8")  # never raises


def test_escaping_keeps_the_readable_text() -> None:
    plain = markdown_text("a & b < c | d\ne")
    assert html.unescape(plain.replace("\\|", "|").replace("<br>", "\n")) == "a & b < c | d\ne"


# -- the 1 MiB cap ----------------------------------------------------------------------------


def test_five_thousand_long_failures_fit_under_one_mebibyte() -> None:
    message = "assertion text with <html> and | pipes " * 200
    failing = [
        case(
            f"case-{i:04}",
            "fail",
            failure=Failure("assertion_failed", message),
            checks=(CheckFailure("tool_args", message, message, message),),
        )
        for i in range(5000)
    ]
    text = summarize(run_of(*failing))
    size = len(text.encode("utf-8"))
    assert size < STEP_SUMMARY_LIMIT
    assert size > STEP_SUMMARY_LIMIT * 0.9  # the budget is used, not wasted
    rows = table_rows(text, "| Case |")
    more = re.search(r"_and (\d+) more failing cases: see the run artifacts\._", text)
    assert more is not None and len(rows) + int(more.group(1)) == 5000
    assert [row[0] for row in rows[:2]] == ["case-0000", "case-0001"]
    assert text.rstrip().endswith(".")  # the artifacts line survives the cut


def test_a_tiny_budget_still_gives_a_valid_bounded_summary() -> None:
    failing = [case(f"t{i}", "fail", failure=Failure("task_error", "x" * 500)) for i in range(50)]
    text = summarize(run_of(*failing), max_bytes=2000)
    assert len(text.encode("utf-8")) < 2000
    assert "_and " in text and "more failing cases" in text


def test_a_huge_suite_name_is_cut_to_the_limit() -> None:
    run = run_of(case("t1", "fail", failure=Failure("task_error", "x")))
    run.suite_name = "n" * 5000
    text = summarize(run, max_bytes=1000)
    assert len(text.encode("utf-8")) < 1000 and "summary truncated" in text


# -- appending --------------------------------------------------------------------------------


def test_append_adds_after_what_earlier_steps_wrote(tmp_path: Path) -> None:
    target = tmp_path / "step_summary.md"
    append_step_summary(target, "## first")
    append_step_summary(target, "## second ✅\n")
    assert target.read_text(encoding="utf-8") == "## first\n\n## second ✅\n"


def test_append_separates_from_an_unterminated_earlier_write(tmp_path: Path) -> None:
    target = tmp_path / "step_summary.md"
    target.write_text("earlier text", encoding="utf-8")
    append_step_summary(target, "## trialrun\n")
    assert target.read_text(encoding="utf-8") == "earlier text\n\n## trialrun\n"


def test_append_writes_lone_surrogates_as_valid_utf8(tmp_path: Path) -> None:
    target = tmp_path / "s.md"
    append_step_summary(target, "bad \ud800 text\n")
    assert target.read_bytes().decode("utf-8") == "bad ? text\n"


def test_an_unwritable_path_warns_instead_of_raising(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    append_step_summary(tmp_path / "missing-dir" / "summary.md", "x")
    append_step_summary(tmp_path, "x")  # a directory
    errors = capsys.readouterr().err.splitlines()
    assert len(errors) == 2
    assert all(
        line.startswith("warning: cannot write the GitHub step summary to ") for line in errors
    )


def test_a_refused_write_warns_and_leaves_the_file_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "summary.md"
    target.write_text("kept\n", encoding="utf-8")

    def refuse(self: Path, *args: Any, **kwargs: Any) -> Any:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "open", refuse)
    append_step_summary(target, "x")
    monkeypatch.undo()
    assert target.read_text(encoding="utf-8") == "kept\n"
    assert capsys.readouterr().err == (
        f"warning: cannot write the GitHub step summary to {target}: Permission denied\n"
    )


def unused_case(case_id: str, names: list[str]) -> CaseResult:
    result = case(case_id)
    result.run.unused_recordings = len(names)
    result.run.unused_recording_tools = names
    return result


def test_unused_recordings_are_one_escaped_line_naming_cases_and_recordings() -> None:
    names = ["search_docs", "search_docs", "mcp:docs/fetch<b>", "model:gpt-4o"]
    text = summarize(run_of(unused_case("t1", names), case("t2"), unused_case("t3", ["x"])))
    [line] = [line for line in text.splitlines() if "Unused recordings" in line]
    assert line == (
        "**Unused recordings** (they do not fail a case): "
        r"t1: 4 (search\_docs x2, mcp:docs/fetch&lt;b&gt;, model:gpt-4o); t3: 1 (x)."
    )
    assert text.index(line) < text.index("No baseline comparison")


def test_the_unused_recordings_line_names_a_few_cases_and_counts_the_rest() -> None:
    cases = [unused_case(f"t{n}", ["lookup"]) for n in range(25)]
    [line] = [line for line in summarize(run_of(*cases)).splitlines() if "Unused" in line]
    assert line.count("(lookup)") == 20
    assert line.endswith("t19: 1 (lookup); and 5 more cases.")


def test_a_gate_skipped_for_a_missing_baseline_metric_says_to_re_promote_here_too() -> None:
    run = run_of(case("t1"))
    baseline = {"schema_version": 1, "cases": [{"id": "t1", "status": "pass"}]}
    regression = compute_regression(
        baseline, build_summary(run, regression=None), {"max_p95_wall_ms_delta_pct": 0.2}, "b.json"
    )
    text = summarize(run, regression)
    row = next(line for line in text.splitlines() if "max\\_p95\\_wall" in line)
    assert "Re-promote the baseline to bring the metric in: trialrun baseline promote" in row
