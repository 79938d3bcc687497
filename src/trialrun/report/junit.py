"""junit.xml: one ``<testsuite>`` root, one ``<testcase>`` per case, readable by every CI parser.

RunLedger's shape is kept (a single ``<testsuite name tests failures time>`` root, times in
seconds with three decimals, the suite time being the sum of the case times) with these fixes:

* an XML declaration, a ``classname`` (the suite name) and an ``errors`` count;
* the peer's inversion is undone: ``message`` holds the first line of the reason, ``type`` the
  failure kind, and the element text the full explanation (every check with expected/observed);
* a fault of the harness or the agent (case status ``error``) is an ``<error>``, not a
  ``<failure>``; the agent's stderr tail goes to ``<system-err>``;
* agent text is redacted, and characters XML 1.0 cannot carry (control characters, lone
  surrogates, U+FFFE/U+FFFF) are removed first: ElementTree would write them and produce a file
  parsers refuse;
* a case run more than once (``--repeat``, ``--retries``) is marked as Maven Surefire marks a
  rerun test, which Jenkins, GitLab and the JUnit readers of CI services understand: a flaky case
  that does not fail the run passes, with a ``<flakyFailure>`` (``<flakyError>``) per failed run;
  a failing case has its ``<failure>`` (``<error>``) and a ``<rerunFailure>`` (``<rerunError>``)
  per other failed run; a flaky case that fails the run has a ``<failure type="flaky">`` and
  its ``<flakyFailure>`` children;
* a failing case that quarantine.yaml excuses does not gate, so CI must not read it as a failure:
  it is ``<skipped>`` with the entry (owner, expiry, reason) as its message and the failure's full
  text in ``<system-out>``, and the suite counts it in ``skipped``.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

from trialrun.base.junitxml import add_reason, junit_document, testcase, testsuite
from trialrun.base.results import CaseResult, RunResult
from trialrun.base.visible import visible
from trialrun.base.xmltext import xml_name, xml_text
from trialrun.report.case_runs import runs_text
from trialrun.report.console import FailureDetail, clean, detail_lines, failure_details
from trialrun.report.summary import stderr_tail_of


def build_junit(run: RunResult) -> str:
    """The junit.xml text for ``run`` (with a trailing newline)."""
    gating = [case for case in run.cases if run.excused(case) is None]
    suite = testsuite(
        run.suite_name,
        tests=len(run.cases),
        failures=sum(1 for case in gating if not case.passed and case.status != "error"),
        errors=sum(1 for case in gating if case.status == "error"),
        seconds=sum(case.run.wall_ms for case in run.cases) / 1000,
    )
    if len(gating) < len(run.cases):
        suite.set("skipped", str(len(run.cases) - len(gating)))
    for case in run.cases:
        entry = run.excused(case)
        if entry is None:
            suite.append(_testcase(case, run.suite_name))
        else:
            suite.append(_quarantined_testcase(case, run.suite_name, entry))
    return junit_document(suite)


def _quarantined_testcase(case: CaseResult, suite_name: str, entry: dict[str, Any]) -> ET.Element:
    element = testcase(None, case.case_id, suite_name, case.run.wall_ms / 1000)
    message = (
        f"quarantined until {entry.get('expires')} (owner {entry.get('owner')}): "
        f"{entry.get('reason')}. Status {case.status}: {_first_line(failure_details(case))}"
    )
    ET.SubElement(element, "skipped", {"message": xml_text(message)})
    ET.SubElement(element, "system-out").text = xml_text(_full_text(failure_details(case)))
    stderr_tail = stderr_tail_of(case)
    if stderr_tail:
        ET.SubElement(element, "system-err").text = xml_text(clean(stderr_tail))
    return element


def _testcase(case: CaseResult, suite_name: str) -> ET.Element:
    element = testcase(None, case.case_id, suite_name, case.run.wall_ms / 1000)
    if case.runs is not None:
        return _rerun_testcase(element, case)
    if case.passed:
        return element
    _add_failure(element, case)
    return element


def _add_failure(element: ET.Element, case: CaseResult) -> None:
    details = failure_details(case)
    kind = case.failure.kind if case.failure is not None else details[0].type
    tag = "error" if case.status == "error" else "failure"
    add_reason(element, tag, kind, _first_line(details), [_full_text(details)])
    stderr_tail = stderr_tail_of(case)
    if stderr_tail:
        ET.SubElement(element, "system-err").text = xml_text(clean(stderr_tail))


def _rerun_testcase(element: ET.Element, case: CaseResult) -> ET.Element:
    """Surefire's marks of a rerun test (module docstring); each run's reason in its own."""
    assert case.runs is not None
    flaky = case.status == "flaky"
    if flaky and not case.passed:
        reason = f"flaky: {runs_text(case)}; the suite's flaky policy is fail"
        add_reason(element, "failure", "flaky", reason, [reason])
    elif not case.passed:
        _add_failure(element, case)
    for run in case.runs.runs:
        if run.status == "pass" or (
            not flaky and run.run is case.run and case.failure is run.failure
        ):
            continue  # a pass, or the run whose reason the case's <failure> already gives
        prefix = "flaky" if flaky else "rerun"
        tag = prefix + ("Error" if run.status == "error" else "Failure")
        details = failure_details(run)
        kind = run.failure.kind if run.failure is not None else details[0].type
        child = ET.SubElement(
            element, tag, {"message": xml_text(_first_line(details)), "type": xml_name(kind)}
        )
        ET.SubElement(child, "stackTrace").text = xml_text(_full_text(details))
        stderr_tail = stderr_tail_of(run)
        if stderr_tail:
            ET.SubElement(child, "system-err").text = xml_text(clean(stderr_tail))
    return element


def _first_line(details: list[FailureDetail]) -> str:
    lines = visible(details[0].message).splitlines()
    return lines[0] if lines else details[0].type


def _full_text(details: list[FailureDetail]) -> str:
    # The console's layout: one labelled block per reason, with expected/observed.
    return "\n".join(line for detail in details for line in detail_lines(detail))
