"""``trialrun incident inspect``: the call sequence and what the business rules say about it.

Four files land in ``out_dir``: ``inspect.html`` (self-contained, every value escaped),
``inspect.json`` (the same facts for machines, also returned), ``trace.jsonl`` (one call per
line) and ``junit.xml`` (one testcase per rule plus one for capture completeness, so CI shows
"the rule was broken" apart from "the evidence is incomplete").

The incident was redacted on import; it is redacted again here because an ``incident.json`` can
be written by hand, and redaction of redacted data changes nothing.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trialrun.base.fsutil import atomic_write_text, dumps_json, escape_lone_surrogates
from trialrun.base.junitxml import add_reason, junit_document, testcase, testsuite
from trialrun.base.redact import redact
from trialrun.base.visible import visible
from trialrun.incident.model import (
    Incident,
    IncidentCall,
    capture_gaps,
    is_inconclusive,
    source_name,
)
from trialrun.incident.rules import Rule, check_rules

HTML_FILE = "inspect.html"
JSON_FILE = "inspect.json"
TRACE_FILE = "trace.jsonl"
JUNIT_FILE = "junit.xml"
CAPTURE_TESTCASE = "capture complete"


def inspect_incident(incident: Incident, *, rules: Sequence[Rule], out_dir: Path) -> dict[str, Any]:
    """Write the four inspection files into ``out_dir`` and return the ``inspect.json`` report."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    calls = [call_record(call) for call in incident.calls]
    violations = check_rules(incident.calls, list(rules))
    report = build_report(incident, calls, rules, violations)
    atomic_write_text(out_dir / TRACE_FILE, trace_text(calls))
    atomic_write_text(out_dir / JUNIT_FILE, junit_text(report))
    atomic_write_text(out_dir / HTML_FILE, html_text(report))
    atomic_write_text(out_dir / JSON_FILE, dumps_json(report) + "\n")
    return report


def call_record(call: IncidentCall) -> dict[str, Any]:
    """A call as plain, redacted JSON data (one ``trace.jsonl`` line)."""
    redacted: dict[str, Any] = redact(call.to_json())
    return redacted


def build_report(
    incident: Incident,
    calls: list[dict[str, Any]],
    rules: Sequence[Rule],
    violations: list[dict[str, Any]],
) -> dict[str, Any]:
    inconclusive = is_inconclusive(incident)
    rule_results = []
    for rule in rules:
        broken = [v for v in violations if v.get("rule") == rule.id]
        rule_results.append({"id": rule.id, "passed": not broken, "violations": broken})
    if violations:
        verdict = "violated"
    elif inconclusive:
        verdict = "inconclusive"
    else:
        verdict = "rules_pass"
    return {
        "schema_version": 1,
        "verdict": verdict,
        "source_format": incident.source_format,
        "source_file": source_name(incident.source_file),
        "inconclusive": inconclusive,
        "capture_gaps": capture_gaps(incident),
        "input": redact(incident.input),
        "final_output": redact(incident.final_output),
        "calls": calls,
        "rules": rule_results,
        "violations": violations,
        "recorded_violations": redact(incident.violations),
        # Names only: the report travels with its siblings, not with the folder they sat in.
        "files": {name: name for name in (HTML_FILE, JSON_FILE, TRACE_FILE, JUNIT_FILE)},
    }


def trace_text(calls: list[dict[str, Any]]) -> str:
    return "".join(dumps_json(call, indent=None) + "\n" for call in calls)


def junit_text(report: dict[str, Any]) -> str:
    rule_results: list[dict[str, Any]] = report["rules"]
    failures = sum(1 for rule in rule_results if not rule["passed"])
    inconclusive = bool(report["inconclusive"])
    suite = testsuite(
        "incident",
        tests=len(rule_results) + 1,
        failures=failures,
        errors=1 if inconclusive else 0,
        seconds=0,
    )
    capture = testcase(suite, CAPTURE_TESTCASE, "incident", 0)
    if inconclusive:
        gaps: list[str] = report["capture_gaps"] or ["capture incomplete"]
        add_reason(capture, "error", "inconclusive", gaps[0], gaps)
    for rule in rule_results:
        case = testcase(suite, rule["id"], "incident.rules", 0)
        if not rule["passed"]:
            messages = [str(v.get("message", "")) for v in rule["violations"]]
            add_reason(case, "failure", "rule_violation", messages[0], messages)
    return junit_document(suite)


_STYLE = (
    "body{font-family:system-ui,sans-serif;margin:2em;color:#222}"
    "table{border-collapse:collapse;width:100%}td,th{border:1px solid #ccc;padding:4px;"
    "vertical-align:top;text-align:left}pre{margin:0;white-space:pre-wrap;word-break:break-all}"
    ".fail{color:#b00020}.pass{color:#1b7a2f}.warn{color:#a66300}"
)


def html_text(report: dict[str, Any]) -> str:
    verdict_class = {"violated": "fail", "inconclusive": "warn"}.get(report["verdict"], "pass")
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8"><title>Incident inspection</title>',
        f"<style>{_STYLE}</style></head><body>",
        "<h1>Incident inspection</h1>",
        f'<p>Verdict: <strong class="{verdict_class}">{_esc(report["verdict"])}</strong></p>',
        f"<p>Source: {_esc(report['source_file'])} ({_esc(report['source_format'])})</p>",
        "<h2>Capture</h2>",
        _gaps_html(report["capture_gaps"]),
        "<h2>Business rules</h2>",
        _rules_html(report["rules"]),
        "<h2>Calls</h2>",
        _calls_html(report["calls"]),
        "<h2>Input</h2>",
        f"<pre>{_json_html(report['input'])}</pre>",
        "<h2>Final output</h2>",
        f"<pre>{_json_html(report['final_output'])}</pre>",
        "</body></html>",
    ]
    # Agent text may hold lone surrogates; shown as escapes they cannot break the UTF-8 file.
    return escape_lone_surrogates("\n".join(parts) + "\n")


def _gaps_html(gaps: list[str]) -> str:
    if not gaps:
        return '<p class="pass">Arguments and results were captured for every call.</p>'
    items = "".join(f"<li>{_esc(gap)}</li>" for gap in gaps)
    return f'<p class="warn">Inconclusive evidence:</p><ul>{items}</ul>'


def _rules_html(rules: list[dict[str, Any]]) -> str:
    if not rules:
        return "<p>No rules given.</p>"
    rows = []
    for rule in rules:
        if rule["passed"]:
            outcome = '<span class="pass">holds</span>'
        else:
            messages = "".join(f"<li>{_esc(v.get('message', ''))}</li>" for v in rule["violations"])
            outcome = f'<span class="fail">violated</span><ul>{messages}</ul>'
        rows.append(f"<tr><td>{_esc(rule['id'])}</td><td>{outcome}</td></tr>")
    return "<table><tr><th>Rule</th><th>Outcome</th></tr>" + "".join(rows) + "</table>"


def _calls_html(calls: list[dict[str, Any]]) -> str:
    header = (
        "<tr><th>#</th><th>Tool</th><th>Arguments</th><th>Outcome</th>"
        "<th>Started</th><th>ms</th></tr>"
    )
    rows = []
    for call in calls:
        if call["ok"] is None:
            outcome = '<span class="warn">not captured</span>'
        elif call["ok"]:
            outcome = f"<pre>{_json_html(call['result'])}</pre>"
        else:
            outcome = f'<span class="fail">error:</span> {_esc(call["error"])}'
        args = (
            '<span class="warn">not captured</span>'
            if call["args"] is None
            else f"<pre>{_json_html(call['args'])}</pre>"
        )
        rows.append(
            f"<tr><td>{_esc(call['index'])}</td><td>{_esc(call['name'])}</td><td>{args}</td>"
            f"<td>{outcome}</td><td>{_esc(call['started_at'] or '')}</td>"
            f"<td>{_esc('' if call['duration_ms'] is None else call['duration_ms'])}</td></tr>"
        )
    return "<table>" + header + "".join(rows) + "</table>"


def _json_html(value: Any) -> str:
    return _esc(dumps_json(value))


def _esc(value: Any) -> str:
    # visible: html.escape leaves control and bidi characters in the page as they are.
    return html.escape(visible(value) if isinstance(value, str) else json.dumps(value), quote=True)
