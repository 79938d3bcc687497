"""The one way trialrun builds a junit.xml: run reports, shard merges, incident and verify evidence.

Every file has a single ``<testsuite name tests failures errors time>`` root (times in seconds
with three decimals), ``<testcase name classname time>`` children and, on a case that did not
pass, one ``<failure>`` or ``<error>`` whose ``message`` is the first reason and whose text holds
them all. Text goes through :func:`xml_text` (names through :func:`xml_name`): nothing XML 1.0
forbids reaches a parser, and control and bidi characters are shown as escapes.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence

from trialrun.base.xmltext import XML_DECLARATION, xml_name, xml_text


def seconds_text(seconds: float) -> str:
    return f"{seconds:.3f}"


def testsuite(name: str, *, tests: int, failures: int, errors: int, seconds: float) -> ET.Element:
    return ET.Element(
        "testsuite",
        {
            "name": xml_name(name),
            "tests": str(tests),
            "failures": str(failures),
            "errors": str(errors),
            "time": seconds_text(seconds),
        },
    )


def testcase(suite: ET.Element | None, name: str, classname: str, seconds: float) -> ET.Element:
    """A ``<testcase>``, appended to ``suite`` unless that is None."""
    attributes = {
        "name": xml_name(name),
        "classname": xml_name(classname),
        "time": seconds_text(seconds),
    }
    if suite is None:
        return ET.Element("testcase", attributes)
    return ET.SubElement(suite, "testcase", attributes)


def add_reason(
    case: ET.Element, tag: str, kind: str, message: str, lines: Sequence[str]
) -> ET.Element:
    """``<failure>`` or ``<error>`` (``tag``) of ``case``: ``message`` and ``kind`` as its
    attributes, ``lines`` joined as its text."""
    reason = ET.SubElement(case, tag, {"message": xml_text(message), "type": xml_name(kind)})
    reason.text = xml_text("\n".join(lines))
    return reason


def junit_document(suite: ET.Element) -> str:
    """The file's text: declaration, the suite, a trailing newline."""
    return XML_DECLARATION + ET.tostring(suite, encoding="unicode") + "\n"
