"""GitHub annotations: escaping, the per-step cap, and locations in a real suite on disk."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trialrun.base.results import AgentRun, CaseResult, CheckFailure, Failure, RunResult, Status
from trialrun.base.visible import visible
from trialrun.config import load_suite
from trialrun.report.annotations import (
    MAX_ERRORS_PER_STEP,
    case_locations,
    case_message,
    escape_data,
    escape_property,
    github_annotations,
)

SUITE = """\
suite_name: demo
agent_command: ["python3", "agent.py"]
mode: replay
cases_path: cases
tool_registry: [search_docs]
"""

CALL_ORDER = CheckFailure(
    "call_order",
    "Tool call order not satisfied: lookup_order -> search_docs",
    "lookup_order -> search_docs",
    "search_docs",
)
PASS_RATE_GATE: dict[str, Any] = {
    "checks": [
        {
            "id": "min_pass_rate",
            "status": "fail",
            "threshold": 1.0,
            "baseline": 1.0,
            "current": 0.0,
        },
        {"id": "max_avg_wall_ms_delta_pct", "status": "skipped", "threshold": None},
    ]
}


def case(
    case_id: str,
    status: Status = "fail",
    *,
    failure: Failure | None = None,
    checks: tuple[CheckFailure, ...] = (),
) -> CaseResult:
    return CaseResult(
        case_id, status, AgentRun(case_id=case_id), check_failures=list(checks), failure=failure
    )


def run_of(*cases: CaseResult) -> RunResult:
    return RunResult("r1", "demo", "suite.yaml", ["python3"], "replay", list(cases), 0.0, 1.0)


def unescape(value: str) -> str:
    """What GitHub's runner does to a property value or message."""
    for encoded, raw in (("%0D", "\r"), ("%0A", "\n"), ("%3A", ":"), ("%2C", ","), ("%25", "%")):
        value = value.replace(encoded, raw)
    return value


# -- escaping ---------------------------------------------------------------------------------


def test_data_and_properties_are_escaped_per_github_rules() -> None:
    assert escape_data("100% done\r\nnext: a,b") == "100%25 done%0D%0Anext: a,b"
    assert escape_property("100% done\r\nnext: a,b") == "100%25 done%0D%0Anext%3A a%2Cb"
    assert escape_data("%0A") == "%250A"  # an already-encoded text stays literal


def test_control_bidi_characters_and_lone_surrogates_are_shown_as_escapes() -> None:
    assert escape_data("a\x1b[31mb\x00c\u202ed\ud800") == "a\\x1b[31mb\\x00c\\u202ed\\ud800"


@given(st.text())
def test_escaping_round_trips_through_the_runner(text: str) -> None:
    kept = visible(text)
    prop = escape_property(text)
    assert unescape(prop) == kept
    assert not set(prop) & {"\r", "\n", ":", ","}
    data = escape_data(text)
    assert unescape(data) == kept and "\n" not in data and "\r" not in data


def test_a_hostile_case_id_cannot_break_out_of_the_title() -> None:
    hostile = case("x,file=evil.py::y\ninjected", failure=Failure("task_error", "boom"))
    [line] = github_annotations(run_of(hostile), None, case_locations={})
    assert line == (
        "::error title=trialrun: x%2Cfile=evil.py%3A%3Ay%0Ainjected::FAIL: failure task_error: boom"
    )
    # The runner splits properties at "," and the message at the first "::" after the command.
    properties, message = line.removeprefix("::error ").split("::", 1)
    assert properties.split(",") == ["title=trialrun: x%2Cfile=evil.py%3A%3Ay%0Ainjected"]
    assert message == "FAIL: failure task_error: boom"


def test_messages_are_redacted() -> None:
    token = "ghp_" + "a" * 36
    leaking = case("t1", "error", failure=Failure("agent_crashed", f"token {token}", "error"))
    [line] = github_annotations(run_of(leaking), None, case_locations={})
    assert token not in line and "[REDACTED]" in line


# -- what is annotated ------------------------------------------------------------------------


def test_one_annotation_per_failing_case_at_its_file_and_line() -> None:
    failing = case("t2", failure=Failure("assertion_failed", "x"), checks=(CALL_ORDER,))
    lines = github_annotations(
        run_of(case("t1", "pass"), failing),
        None,
        case_locations={"t1": ("evals/cases/t1.yaml", 1), "t2": ("evals/cases/t2, v2.yaml", 3)},
    )
    assert lines == [
        "::error file=evals/cases/t2%2C v2.yaml,line=3,title=trialrun: t2::FAIL: assertion "
        "call_order: Tool call order not satisfied: lookup_order -> search_docs%0A  expected: "
        "lookup_order -> search_docs%0A  observed: search_docs"
    ]


def test_a_quarantined_failure_is_a_warning_and_an_expired_one_an_error_again() -> None:
    run = run_of(
        case("t1", failure=Failure("assertion_failed", "x"), checks=(CALL_ORDER,)),
        case("t2", failure=Failure("assertion_failed", "x"), checks=(CALL_ORDER,)),
    )
    entry = {"reason": "flakes", "owner": "ana", "expires": "2026-12-31"}
    run.quarantine = {"t1": {**entry, "expired": False}, "t2": {**entry, "expired": True}}
    lines = github_annotations(run, None, case_locations={})
    assert [line.split("::")[1] for line in lines] == [
        "error title=trialrun: t2",
        "warning title=trialrun: t1 (quarantined)",
    ]


def test_every_reason_of_a_case_is_in_its_one_annotation() -> None:
    checks = (CALL_ORDER, CheckFailure("required_fields", "Missing required fields: x"))
    failing = case("t1", failure=Failure("assertion_failed", "joined"), checks=checks)
    assert case_message(failing).splitlines() == [
        "FAIL: assertion call_order: Tool call order not satisfied: lookup_order -> search_docs",
        "  expected: lookup_order -> search_docs",
        "  observed: search_docs",
        "assertion required_fields: Missing required fields: x",
    ]


def test_a_huge_message_is_shortened() -> None:
    failing = case("t1", "error", failure=Failure("agent_crashed", "x" * 100_000, "error"))
    assert len(case_message(failing)) <= 4000
    assert case_message(failing).endswith("…")


def test_failing_gates_become_errors_and_passing_runs_say_nothing() -> None:
    assert github_annotations(run_of(case("t1", "pass")), None, case_locations={}) == []
    lines = github_annotations(run_of(case("t1", "pass")), PASS_RATE_GATE, case_locations={})
    assert lines == [
        "::error title=trialrun: gate min_pass_rate::Regression gate min_pass_rate failed: "
        "pass_rate 0.0%25 < required 100.0%25 (baseline 100.0%25)"  # % is escaped
    ]


def test_at_most_ten_errors_then_one_warning_with_the_count() -> None:
    failing = [case(f"t{i:02}", failure=Failure("task_error", "no")) for i in range(25)]
    lines = github_annotations(run_of(*failing), None, case_locations={})
    assert len(lines) == MAX_ERRORS_PER_STEP + 1
    assert all(line.startswith("::error ") for line in lines[:10])
    assert "trialrun: t09::" in lines[9]  # the first ten, in run order
    assert lines[10].startswith("::warning title=trialrun::15 more failing cases are not annotated")


def test_gates_are_never_crowded_out_by_cases() -> None:
    failing = [case(f"t{i:02}", failure=Failure("task_error", "no")) for i in range(25)]
    lines = github_annotations(run_of(*failing), PASS_RATE_GATE, case_locations={})
    errors = [line for line in lines if line.startswith("::error")]
    assert len(errors) == MAX_ERRORS_PER_STEP
    assert errors[-1].startswith("::error title=trialrun: gate min_pass_rate::")
    assert "16 more failing cases" in lines[9]


def test_one_left_out_case_reads_in_the_singular() -> None:
    failing = [case(f"t{i:02}", failure=Failure("task_error", "no")) for i in range(11)]
    lines = github_annotations(run_of(*failing), None, case_locations={})
    assert "1 more failing case is not annotated" in lines[-1]


# -- locations in a real suite ----------------------------------------------------------------


def write(root: Path, name: str, text: str) -> Path:
    target = root / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    return target


@pytest.fixture
def suite_dir(tmp_path: Path) -> Path:
    write(tmp_path, "evals/demo/suite.yaml", SUITE)
    write(tmp_path, "evals/demo/cases/a.yaml", "id: a\ninput: {}\ncassette: c/a.jsonl\n")
    write(
        tmp_path,
        "evals/demo/cases/b.yaml",
        "# yaml-language-server: $schema=x.json\n# triage\n\ninput:\n  q: 1\n"
        "cassette: c/b.jsonl\nid: b-case\n",
    )
    write(tmp_path, "evals/demo/cases/c.yml", '{"id": "c", "input": {}, "cassette": "c.jsonl"}\n')
    return tmp_path / "evals" / "demo"


def test_locations_are_the_case_file_and_its_id_line(suite_dir: Path) -> None:
    workspace = suite_dir.parent.parent
    locations = case_locations(load_suite(suite_dir), workspace=workspace)
    assert locations == {
        "a": ("evals/demo/cases/a.yaml", 1),
        "b-case": ("evals/demo/cases/b.yaml", 7),
        "c": ("evals/demo/cases/c.yml", 1),
    }


def test_locations_default_to_github_workspace_then_cwd(
    suite_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    suite = load_suite(suite_dir)
    monkeypatch.setenv("GITHUB_WORKSPACE", str(suite_dir.parent))
    assert case_locations(suite)["a"] == ("demo/cases/a.yaml", 1)
    monkeypatch.delenv("GITHUB_WORKSPACE")
    monkeypatch.chdir(suite_dir)
    assert case_locations(suite)["a"] == ("cases/a.yaml", 1)


def test_a_case_outside_the_workspace_keeps_its_absolute_path(
    suite_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    file, line = case_locations(load_suite(suite_dir), workspace=elsewhere)["b-case"]
    assert file == (suite_dir / "cases" / "b.yaml").resolve().as_posix() and line == 7


def test_a_case_file_changed_after_loading_points_at_line_one(suite_dir: Path) -> None:
    suite = load_suite(suite_dir)
    (suite_dir / "cases" / "b.yaml").write_text("id: [unclosed\n", encoding="utf-8")
    (suite_dir / "cases" / "a.yaml").unlink()
    locations = case_locations(suite, workspace=suite_dir)
    assert locations["b-case"] == ("cases/b.yaml", 1)
    assert locations["a"] == ("cases/a.yaml", 1)


def test_annotations_point_at_the_suite_on_disk(suite_dir: Path) -> None:
    suite = load_suite(suite_dir)
    failing = case("b-case", failure=Failure("cassette_mismatch", "Cassette mismatch.\nno entry"))
    run = run_of(case("a", "pass"), failing)
    locations = case_locations(suite, workspace=suite_dir.parent.parent)
    [line] = github_annotations(run, None, case_locations=locations)
    assert line == (
        "::error file=evals/demo/cases/b.yaml,line=7,title=trialrun: b-case::"
        "FAIL: failure cassette_mismatch: Cassette mismatch.%0Ano entry"
    )
