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
  parsers refuse.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from trialrun.base.junitxml import add_reason, junit_document, testcase, testsuite
from trialrun.base.results import CaseResult, RunResult
from trialrun.base.visible import visible
from trialrun.base.xmltext import xml_text
from trialrun.report.console import FailureDetail, clean, detail_lines, failure_details
from trialrun.report.summary import stderr_tail_of


def build_junit(run: RunResult) -> str:
    """The junit.xml text for ``run`` (with a trailing newline)."""
    suite = testsuite(
        run.suite_name,
        tests=len(run.cases),
        failures=sum(1 for case in run.cases if case.status == "fail"),
        errors=sum(1 for case in run.cases if case.status == "error"),
        seconds=sum(case.run.wall_ms for case in run.cases) / 1000,
    )
    for case in run.cases:
        suite.append(_testcase(case, run.suite_name))
    return junit_document(suite)


def _testcase(case: CaseResult, suite_name: str) -> ET.Element:
    element = testcase(None, case.case_id, suite_name, case.run.wall_ms / 1000)
    if case.passed:
        return element
    details = failure_details(case)
    kind = case.failure.kind if case.failure is not None else details[0].type
    tag = "error" if case.status == "error" else "failure"
    add_reason(element, tag, kind, _first_line(details), [_full_text(details)])
    stderr_tail = stderr_tail_of(case)
    if stderr_tail:
        ET.SubElement(element, "system-err").text = xml_text(clean(stderr_tail))
    return element


def _first_line(details: list[FailureDetail]) -> str:
    lines = visible(details[0].message).splitlines()
    return lines[0] if lines else details[0].type


def _full_text(details: list[FailureDetail]) -> str:
    # The console's layout: one labelled block per reason, with expected/observed.
    return "\n".join(line for detail in details for line in detail_lines(detail))
