"""report.html: self-contained, and nothing the agent produced can become markup."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from htmlpage import PAYLOADS, parse
from trialrun.artifacts.baseline import compute_regression
from trialrun.base.results import (
    AgentRun,
    CaseResult,
    CheckFailure,
    Failure,
    RunResult,
    ToolCall,
)
from trialrun.report.html import (
    EVENT_CHARS_MAX,
    EVENTS_PER_CASE_MAX,
    FILTER_SCRIPT,
    ONE_LINE_CHARS_MAX,
    case_view,
    pretty_json,
    render_html,
)
from trialrun.report.summary import build_summary


def xss_run(peer_fixtures: Path) -> RunResult:
    probe = peer_fixtures / "generated-0.2.3/probe-runs/xss"
    events = [json.loads(line) for line in (probe / "run.jsonl").read_text().splitlines()]
    summary = json.loads((probe / "summary.json").read_text())
    output: dict[str, Any] = next(e["output"] for e in events if e["type"] == "final_output")
    output["comment"] = PAYLOADS[2]
    reason = summary["cases"][0]["failure_reason"]
    agent_run = AgentRun(
        case_id="t1",
        output=output,
        tool_calls=[ToolCall("c0", "search_docs", {"q": "reset password"}, True, {"hits": ["a"]})],
        wall_ms=16,
        events=events,
        stderr_tail=f"stderr {PAYLOADS[0]} {PAYLOADS[2]}",
    )
    case = CaseResult(
        case_id=f"t1{PAYLOADS[2]}",
        status="fail",
        run=agent_run,
        assertions_total=1,
        check_failures=[CheckFailure("required_fields", reason, PAYLOADS[1], PAYLOADS[0])],
        failure=Failure("assertion_failed", reason),
    )
    return RunResult(
        run_id="20261202-092135-a3fbb3",
        suite_name=f"xss {PAYLOADS[1]}",
        suite_path="suite.yaml",
        agent_command=["python3", "agent.py"],
        mode="replay",
        cases=[case],
        started_at=1796203295.0,
        finished_at=1796203295.5,
    )


@pytest.fixture
def xss_page(peer_fixtures: Path) -> str:
    run = xss_run(peer_fixtures)
    first = build_summary(run, regression=None)
    baseline = {"schema_version": 1, "cases": [{"id": f"t1{PAYLOADS[2]}", "status": "pass"}]}
    regression = compute_regression(baseline, first, None, f"b{PAYLOADS[0]}.json")
    return render_html(run, build_summary(run, regression=regression))


def test_no_payload_becomes_markup(xss_page: str) -> None:
    page = parse(xss_page)
    assert "img" not in page.tags
    assert page.tags.count("script") == 1
    assert page.scripts == [FILTER_SCRIPT]
    assert page.comments == []
    assert not [name for name, _ in page.attributes if name.startswith("on")]
    for payload in PAYLOADS:
        assert payload not in xss_page


def test_payloads_are_shown_as_text(xss_page: str) -> None:
    text = "".join(parse(xss_page).text)
    assert "Missing required fields: missing_<img src=x onerror=alert(document.domain)>" in text
    assert '"reply": "</script><script>alert(2)</script>"' in text
    assert "t1<!--<script>" in text


def test_page_is_self_contained_and_the_csp_allows_only_our_script(xss_page: str) -> None:
    digest = base64.b64encode(hashlib.sha256(FILTER_SCRIPT.encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in xss_page
    assert "default-src 'none'" in xss_page
    assert "http://" not in xss_page and "https://" not in xss_page
    assert "innerHTML" not in xss_page and "<link" not in xss_page


def test_shows_regression_checks_and_case_changes(xss_page: str) -> None:
    text = " ".join(" ".join(parse(xss_page).text).split())
    for check_id in ("min_pass_rate", "max_avg_wall_ms_delta_pct", "status_regressions"):
        assert check_id in text
    assert "Regression checks: failed" in text
    assert "t1<!--<script>: pass → fail" in text
    assert "passed in the baseline, now: t1<!--<script> (fail)" in text


def test_shows_case_details(xss_page: str) -> None:
    text = " ".join(" ".join(parse(xss_page).text).split())
    for expected in ("assertion_failed", "required_fields", "Agent stderr (tail)", "tool_result"):
        assert expected in text
    assert "Trace (6 events)" in text


def test_secrets_are_redacted(peer_fixtures: Path) -> None:
    run = xss_run(peer_fixtures)
    token = "ghp_" + "c" * 36
    run.cases[0].run.events.append(
        {"type": "log", "message": token, "data": {"password": "hunter2"}}
    )
    page = render_html(run, build_summary(run, regression=None))
    assert token not in page and "hunter2" not in page


def test_case_views_prepared_as_cases_finish_give_the_same_page(peer_fixtures: Path) -> None:
    run = xss_run(peer_fixtures)
    summary = build_summary(run, regression=None)
    prepared = [case_view(index, case) for index, case in enumerate(run.cases, start=1)]
    assert render_html(run, summary, prepared) == render_html(run, summary)


def test_only_events_the_runner_redacted_skip_the_second_redaction(peer_fixtures: Path) -> None:
    run = xss_run(peer_fixtures)
    token = "ghp_" + "d" * 36
    run.cases[0].run.events.append({"type": "log", "message": token})
    summary = build_summary(run, regression=None)
    assert token not in render_html(run, summary)
    # A run whose events the runner marked redacted is trusted as it is (the runner redacted
    # them before anything else saw them); this one was marked falsely, which shows the flag.
    run.cases[0].run.events_redacted = True
    assert token in render_html(run, summary)


def test_big_events_and_long_traces_are_capped(peer_fixtures: Path) -> None:
    run = xss_run(peer_fixtures)
    events = run.cases[0].run.events
    events[:] = [{"type": "log", "message": "x" * (EVENT_CHARS_MAX * 2)}]
    events += [{"type": "log", "message": str(i)} for i in range(EVENTS_PER_CASE_MAX + 10)]
    page = render_html(run, build_summary(run, regression=None))
    assert "truncated: 20,000 of" in page
    assert "11 more events not shown" in page
    assert len(page) < 400_000


def test_short_json_is_one_line_and_long_json_is_indented() -> None:
    short = {"type": "tool_call", "args": {"q": "reset password"}}
    assert pretty_json(short) == ('{"type": "tool_call", "args": {"q": "reset password"}}', None)
    fits = {"message": "x" * (ONE_LINE_CHARS_MAX - len('{"message": ""}'))}
    assert pretty_json(fits)[0] == json.dumps(fits, ensure_ascii=False)
    long = {"message": fits["message"] + "x", "n": [1]}
    assert pretty_json(long)[0] == json.dumps(long, ensure_ascii=False, indent=2)
    assert pretty_json({"message": "\ud800"})[0] == '{"message": "\\ud800"}'


def test_lone_surrogates_do_not_break_encoding(peer_fixtures: Path) -> None:
    run = xss_run(peer_fixtures)
    run.cases[0].failure = Failure("task_error", "bad \ud800 text", "error")
    run.cases[0].run.events.append({"type": "log", "message": "\udfff"})
    page = render_html(run, build_summary(run, regression=None))
    page.encode("utf-8")
    assert "bad \\ud800 text" in page and "\\udfff" in page


def test_a_run_without_cases_or_baseline_renders(peer_fixtures: Path) -> None:
    run = xss_run(peer_fixtures)
    run.cases.clear()
    page = parse(render_html(run, build_summary(run, regression=None)))
    assert "Regression checks" not in "".join(page.text)
    assert page.tags.count("script") == 1


def test_unused_recordings_name_their_tools(peer_fixtures: Path) -> None:
    run = xss_run(peer_fixtures)
    run.cases[0].run.unused_recordings = 2
    run.cases[0].run.unused_recording_tools = ["search_docs", f"fetch{PAYLOADS[0]}"]
    page = render_html(run, build_summary(run, regression=None))
    text = " ".join(" ".join(parse(page).text).split())
    assert f"Unused recordings 2 (search_docs, fetch{PAYLOADS[0]})" in text
    assert PAYLOADS[0] not in page  # shown as text, never as markup


# -- compiled templates kept between runs ------------------------------------------------------


def _fresh_environment(directory: Path) -> Any:
    from trialrun.report.html import template_environment

    template_environment.cache_clear()  # as a new process would
    return template_environment(directory)


def test_compiled_templates_are_kept_in_the_cache_folder_and_follow_their_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    templates = tmp_path / "templates"
    templates.mkdir()
    (templates / "page.j2").write_text("<p>{{ text }}</p>")
    first = _fresh_environment(templates).get_template("page.j2").render(text="<b>")
    assert first == "<p>&lt;b&gt;</p>"
    kept = list((tmp_path / "cache" / "trialrun" / "templates").iterdir())
    assert len(kept) == 1
    # A later run uses the compiled code instead of compiling again...
    import jinja2

    def no_compiling(*_: Any, **__: Any) -> None:
        raise AssertionError("compiled a template the cache holds")

    monkeypatch.setattr(jinja2.Environment, "compile", no_compiling)
    assert _fresh_environment(templates).get_template("page.j2").render(text="<b>") == first
    monkeypatch.undo()
    # ...but never once its source changed.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    (templates / "page.j2").write_text("<div>{{ text }}</div>")
    fresh = _fresh_environment(templates).get_template("page.j2").render(text="x")
    assert fresh == "<div>x</div>"


def test_a_cache_folder_that_cannot_be_written_only_means_compiling_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    templates = tmp_path / "templates"
    templates.mkdir()
    (templates / "page.j2").write_text("{{ 1 + 1 }}")
    assert _fresh_environment(templates).get_template("page.j2").render() == "2"
    # A full disk (or a read-only home) when the compiled code is written.
    import jinja2

    def disk_full(*_: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(jinja2.FileSystemBytecodeCache, "dump_bytecode", disk_full)
    assert _fresh_environment(templates).get_template("page.j2").render() == "2"
