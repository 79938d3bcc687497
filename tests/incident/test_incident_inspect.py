"""incident.inspect: HTML, JSON, trace and JUnit files telling violations from missing evidence."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from trialrun.incident.inspect import inspect_incident
from trialrun.incident.model import Incident, IncidentCall
from trialrun.incident.rules import Rule

REFUND = {"order_id": "A-1", "amount": 20}
ONE_REFUND_PER_ORDER = Rule("one-refund-per-order", "issue_refund", max_calls_per="order_id")
NO_BIG_REFUNDS = Rule("no-big-refunds", "issue_refund", forbid_when_arg={"amount": 500})


def incident(calls: list[IncidentCall], **overrides: Any) -> Incident:
    fields: dict[str, Any] = {
        "source_format": "langsmith",
        "source_file": "export.json",
        "input": {"ticket": "refund please"},
        "final_output": {"status": "refunded"},
        "calls": calls,
        "missing": [],
    }
    fields.update(overrides)
    return Incident(**fields)


DOUBLE_REFUND = [
    IncidentCall(0, "lookup_order", {"order_id": "A-1"}, True, {"status": "paid"}),
    IncidentCall(
        1, "issue_refund", REFUND, True, {"refund_id": "r1"}, None, "2026-01-01T00:00:00Z"
    ),
    IncidentCall(2, "issue_refund", REFUND, True, {"refund_id": "r2"}, duration_ms=12.5),
]


def junit(out: Path) -> ET.Element:
    return ET.fromstring((out / "junit.xml").read_text(encoding="utf-8"))


def cases_by_name(root: ET.Element) -> dict[str, ET.Element]:
    return {case.attrib["name"]: case for case in root.iter("testcase")}


def test_violated_rule_fails_its_testcase_and_others_pass(tmp_path: Path) -> None:
    rules = [ONE_REFUND_PER_ORDER, NO_BIG_REFUNDS]
    report = inspect_incident(incident(DOUBLE_REFUND), rules=rules, out_dir=tmp_path)
    assert report["verdict"] == "violated"
    assert report["inconclusive"] is False
    assert [(r["id"], r["passed"]) for r in report["rules"]] == [
        ("one-refund-per-order", False),
        ("no-big-refunds", True),
    ]
    assert report["violations"][0]["call_index"] == 2
    root = junit(tmp_path)
    assert (root.attrib["tests"], root.attrib["failures"], root.attrib["errors"]) == ("3", "1", "0")
    cases = cases_by_name(root)
    failure = cases["one-refund-per-order"].find("failure")
    assert failure is not None and failure.attrib["type"] == "rule_violation"
    assert cases["no-big-refunds"].find("failure") is None
    assert list(cases["capture complete"]) == []
    assert json.loads((tmp_path / "inspect.json").read_text(encoding="utf-8")) == report


def test_rules_holding_give_rules_pass(tmp_path: Path) -> None:
    report = inspect_incident(
        incident(DOUBLE_REFUND[:2]), rules=[ONE_REFUND_PER_ORDER], out_dir=tmp_path
    )
    assert report["verdict"] == "rules_pass"
    assert junit(tmp_path).attrib["failures"] == "0"
    assert "holds" in (tmp_path / "inspect.html").read_text(encoding="utf-8")


def test_missing_capture_errors_the_capture_testcase(tmp_path: Path) -> None:
    calls = [
        IncidentCall(0, "issue_refund", None, True, {"refund_id": "r1"}),
        IncidentCall(1, "issue_refund", REFUND, None),
    ]
    report = inspect_incident(
        incident(calls, missing=["final output"]), rules=[ONE_REFUND_PER_ORDER], out_dir=tmp_path
    )
    assert report["verdict"] == "inconclusive"
    assert report["capture_gaps"] == [
        "final output",
        "call 0 (issue_refund): arguments not captured",
        "call 1 (issue_refund): result not captured",
    ]
    root = junit(tmp_path)
    assert root.attrib["errors"] == "1"
    error = cases_by_name(root)["capture complete"].find("error")
    assert error is not None
    assert error.attrib["type"] == "inconclusive"
    assert error.attrib["message"] == "final output"
    assert "result not captured" in (error.text or "")
    page = (tmp_path / "inspect.html").read_text(encoding="utf-8")
    assert "Inconclusive evidence" in page and "not captured" in page


def test_trace_has_one_call_per_line_in_order(tmp_path: Path) -> None:
    inspect_incident(incident(DOUBLE_REFUND), rules=[], out_dir=tmp_path)
    lines = (tmp_path / "trace.jsonl").read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    assert [r["index"] for r in records] == [0, 1, 2]
    assert records[1]["started_at"] == "2026-01-01T00:00:00Z"
    assert records[2]["duration_ms"] == 12.5
    assert records[2]["result"] == {"refund_id": "r2"}


def test_html_escapes_agent_text_and_is_self_contained(tmp_path: Path) -> None:
    hostile = "<script>alert('x')</script>"
    calls = [IncidentCall(0, hostile, {"q": hostile}, False, None, error=f"boom {hostile}")]
    inspect_incident(
        incident(calls, source_file=hostile, input={"t": hostile}),
        rules=[Rule(hostile, hostile, forbid_when_arg={"q": hostile})],
        out_dir=tmp_path,
    )
    page = (tmp_path / "inspect.html").read_text(encoding="utf-8")
    assert "<script" not in page
    assert "&lt;script&gt;" in page
    assert "http://" not in page and "https://" not in page and "<link" not in page


def test_secrets_are_redacted_in_every_file(tmp_path: Path) -> None:
    calls = [IncidentCall(0, "login", {"password": "hunter2-secret"}, True, {"api_key": "k-999"})]
    inspect_incident(incident(calls), rules=[], out_dir=tmp_path)
    for name in ("inspect.html", "inspect.json", "trace.jsonl", "junit.xml"):
        text = (tmp_path / name).read_text(encoding="utf-8")
        assert "hunter2-secret" not in text and "k-999" not in text, name


def test_no_calls_and_no_rules_still_writes_every_file(tmp_path: Path) -> None:
    out = tmp_path / "nested" / "out"
    report = inspect_incident(incident([]), rules=[], out_dir=out)
    assert report["verdict"] == "rules_pass"
    assert (out / "trace.jsonl").read_text(encoding="utf-8") == ""
    assert cases_by_name(junit(out)).keys() == {"capture complete"}
    assert sorted(p.name for p in out.iterdir()) == [
        "inspect.html",
        "inspect.json",
        "junit.xml",
        "trace.jsonl",
    ]


@settings(max_examples=40)
@given(name=st.text(), message=st.text(), arg=st.text())
def test_any_text_gives_parseable_junit_and_writable_html(
    tmp_path_factory: Any, name: str, message: str, arg: str
) -> None:
    out = tmp_path_factory.mktemp("inspect")
    calls = [IncidentCall(0, name or "t", {"k": arg}, False, None, error=message)]
    rule = Rule(name or "r", name or "t", forbid_when_arg={"k": arg})
    report = inspect_incident(incident(calls), rules=[rule], out_dir=out)
    assert report["verdict"] == "violated"
    assert junit(out).attrib["failures"] == "1"
    assert (out / "inspect.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_lone_surrogates_from_the_agent_do_not_break_the_files(tmp_path: Path) -> None:
    calls = [IncidentCall(0, "search", {"q": "\ud800"}, False, None, error="bad \udfff")]
    inspect_incident(incident(calls), rules=[], out_dir=tmp_path)
    assert "\\ud800" in (tmp_path / "inspect.html").read_text(encoding="utf-8")
    assert json.loads((tmp_path / "trace.jsonl").read_text(encoding="utf-8"))["args"] == {
        "q": "\ud800"
    }
