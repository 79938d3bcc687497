"""junit.xml: the peer's single-testsuite shape, without its inversion."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from trialrun.base.results import AgentRun, CaseResult, CheckFailure, Failure, RunResult, Status
from trialrun.base.xmltext import XML_DECLARATION, xml_text
from trialrun.report.junit import build_junit


def case(
    case_id: str,
    status: Status = "pass",
    wall_ms: int = 100,
    failure: Failure | None = None,
    checks: tuple[CheckFailure, ...] = (),
    stderr: str = "",
) -> CaseResult:
    run = AgentRun(case_id=case_id, wall_ms=wall_ms, stderr_tail=stderr)
    return CaseResult(case_id, status, run, check_failures=list(checks), failure=failure)


def run_of(*cases: CaseResult, name: str = "golden") -> RunResult:
    return RunResult(
        "r1", name, "suite.yaml", ["python", "agent.py"], "replay", list(cases), 0.0, 1.0
    )


GOLDEN_RUN = run_of(
    case("case_a", wall_ms=100),
    case(
        "case_b",
        "fail",
        wall_ms=200,
        failure=Failure("assertion_failed", "missing field"),
        checks=(
            CheckFailure("required_fields", "missing field", "fields present: x", "missing: x"),
        ),
    ),
)


def test_golden_run_exact_bytes() -> None:
    assert build_junit(GOLDEN_RUN) == (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<testsuite name="golden" tests="2" failures="1" errors="0" time="0.300">'
        '<testcase name="case_a" classname="golden" time="0.100" />'
        '<testcase name="case_b" classname="golden" time="0.200">'
        '<failure message="missing field" type="assertion_failed">'
        "  assertion: required_fields\n"
        "  message:   missing field\n"
        "  expected:  fields present: x\n"
        "  observed:  missing: x"
        "</failure></testcase></testsuite>\n"
    )


def test_keeps_the_peer_shape(peer_fixtures: Path) -> None:
    peer = ET.fromstring((peer_fixtures / "upstream/tests/golden/junit.xml").read_text())
    ours = ET.fromstring(build_junit(GOLDEN_RUN).removeprefix(XML_DECLARATION))
    assert ours.tag == peer.tag == "testsuite"
    assert set(peer.attrib) <= set(ours.attrib)
    assert {k: ours.attrib[k] for k in peer.attrib} == peer.attrib
    for peer_case, our_case in zip(peer, ours, strict=True):
        assert {k: our_case.attrib[k] for k in peer_case.attrib} == peer_case.attrib
        assert [child.tag for child in peer_case] == [child.tag for child in our_case]
    # The peer put the reason in message= and the kind in the body; we put them back.
    peer_failure, our_failure = peer[1][0], ours[1][0]
    assert peer_failure.text == our_failure.get("type") == "assertion_failed"
    assert peer_failure.get("message") == our_failure.get("message")


def test_multiline_reason_first_line_in_message_full_text_in_body(peer_fixtures: Path) -> None:
    peer = ET.fromstring(
        (peer_fixtures / "generated-0.2.3/probe-runs/mismatch_text/junit.xml").read_text()
    )
    reason = peer[0][0].get("message") or ""
    run = run_of(case("t1", "fail", 17, failure=Failure("cassette_mismatch", reason)))
    failure = ET.fromstring(build_junit(run).removeprefix(XML_DECLARATION))[0][0]
    assert failure.tag == "failure"
    assert failure.get("message") == "Cassette mismatch."
    assert failure.get("type") == "cassette_mismatch"
    body = failure.text or ""
    assert body.startswith("  failure:   cassette_mismatch\n  message:   Cassette mismatch.\n")
    assert 'Requested args: {"limit":5,"q":"reset pasword"}' in body
    assert "score=0.98" in body


def test_faults_are_errors_with_stderr() -> None:
    crashed = case(
        "t1",
        "error",
        failure=Failure("agent_crashed", "Agent exited with code 1", "error", "Traceback\nBoom"),
    )
    root = ET.fromstring(build_junit(run_of(crashed)).removeprefix(XML_DECLARATION))
    assert root.get("errors") == "1" and root.get("failures") == "0"
    testcase = root[0]
    assert [child.tag for child in testcase] == ["error", "system-err"]
    assert testcase[0].get("type") == "agent_crashed"
    assert testcase[1].text == "Traceback\nBoom"


def test_budget_check_failures_are_listed() -> None:
    budget = CheckFailure(
        "budget:max_tool_calls",
        "Budget exceeded: max_tool_calls limit=1 actual=3",
        "max_tool_calls <= 1",
        "3",
    )
    failed = case(
        "t1", "fail", failure=Failure("budget_exceeded", budget.message), checks=(budget,)
    )
    failure = ET.fromstring(build_junit(run_of(failed)).removeprefix(XML_DECLARATION))[0][0]
    assert failure.get("type") == "budget_exceeded"
    assert "  budget:    max_tool_calls\n" in (failure.text or "")


def test_failing_case_without_a_recorded_reason() -> None:
    failure = ET.fromstring(build_junit(run_of(case("t1", "fail"))).removeprefix(XML_DECLARATION))[
        0
    ][0]
    assert failure.get("message") == "Case failed without a recorded reason"
    assert failure.get("type") == "unknown"


def test_secrets_in_agent_text_are_redacted() -> None:
    token = "ghp_" + "b" * 36
    leaked = case("t1", "error", failure=Failure("task_error", f"leak {token}", "error", token))
    assert token not in build_junit(run_of(leaked))


def test_control_characters_are_shown_as_escapes_and_illegal_ones_never_written() -> None:
    nasty = "a\x00b\x1b[31mc\ud800d\ufffee\tf"
    assert xml_text(nasty) == "a\\x00b\\x1b[31mc\\ud800de\tf"
    bad = case(nasty, "error", failure=Failure("agent_error", nasty, "error", nasty))
    text = build_junit(run_of(bad, name=nasty))
    text.encode("utf-8")
    root = ET.fromstring(text.removeprefix(XML_DECLARATION))
    assert root.get("name") == "a\\x00b\\x1b[31mc\\ud800de\\tf"  # a name stays on one line


@given(st.text(), st.text(), st.text())
def test_any_text_gives_parseable_xml(case_id: str, message: str, stderr: str) -> None:
    bad = case(case_id or "x", "fail", failure=Failure("agent_error", message, "fail", stderr))
    text = build_junit(run_of(bad, name=message))
    root = ET.fromstring(text.removeprefix(XML_DECLARATION).encode("utf-8"))
    assert root.get("tests") == "1"
