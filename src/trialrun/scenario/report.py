"""summary.json and report.html for scenario runs.

Each ``verify`` also keeps ``summary-<agent>.json`` in the output folder, so running the naive and
then the fixed agent into the same folder gives a before/after report.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from trialrun.base.fsutil import atomic_write_text
from trialrun.base.visible import visible


def write_reports(out: Path, summary: dict[str, Any]) -> list[Path]:
    """Write summary.json, summary-<agent>.json and report.html (every agent run into ``out``)."""
    out.mkdir(parents=True, exist_ok=True)
    text = json.dumps(summary, indent=2, sort_keys=True) + "\n"
    summary_path = out / "summary.json"
    atomic_write_text(summary_path, text)
    atomic_write_text(out / f"summary-{summary['agent']}.json", text)
    runs = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(out.glob("summary-*.json"))]
    report_path = out / "report.html"
    atomic_write_text(report_path, render_html(runs))
    return [summary_path, report_path]


def render_html(runs: list[dict[str, Any]]) -> str:
    """One page: a before/after table over agents, then each scenario's rules and action trace."""
    agents = [str(run["agent"]) for run in runs]
    ids: list[str] = []
    for run in runs:
        ids += [s["id"] for s in run["scenarios"] if s["id"] not in ids]
    by_agent = {str(run["agent"]): {s["id"]: s for s in run["scenarios"]} for run in runs}
    header = "".join(f"<th>{_escape(a)}</th>" for a in agents)
    rows = []
    for scenario_id in ids:
        cells = "".join(
            f"<td class='{_status_class(_status(by_agent[a].get(scenario_id)))}'>"
            f"{_escape(_status(by_agent[a].get(scenario_id)))}</td>"
            for a in agents
        )
        rows.append(f"<tr><td>{_escape(scenario_id)}</td>{cells}</tr>")
    totals = "".join(f"<td>{run['passed']}/{len(run['scenarios'])}</td>" for run in runs)
    sections = [_run_section(run) for run in runs]
    from trialrun.report.html import stylesheet

    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>Scenario report</title><style>\n{stylesheet()}</style>"
        "</head><body><header><h1>Scenario report</h1></header><main>"
        f"<table><tr><th>scenario</th>{header}</tr>{''.join(rows)}"
        f"<tr><th>passed</th>{totals}</tr></table>{''.join(sections)}</main></body></html>\n"
    )


def _status(entry: dict[str, Any] | None) -> str:
    return "not run" if entry is None else str(entry["status"])


_STATUS_CLASS = {"passed": "status-pass", "failed": "status-fail", "error": "status-error"}
"""The run report's class for each scenario status, so both pages colour them alike."""


def _status_class(status: str) -> str:
    return _STATUS_CLASS.get(status, "status-skipped")


def _run_section(run: dict[str, Any]) -> str:
    parts = [f"<h2>Agent {_escape(str(run['agent']))}</h2>"]
    for entry in run["scenarios"]:
        status = str(entry["status"])
        parts.append(
            f"<h3>{_escape(str(entry['id']))}: <span class='{_status_class(status)}'>"
            f"{_escape(status)}</span></h3><p>{_escape(str(entry.get('description', '')))}</p>"
        )
        if entry.get("error"):
            parts.append(f"<p class='warning'>{_escape(str(entry['error']))}</p>")
        if entry["violations"]:
            items = "".join(
                f"<li><b>{_escape(str(v['rule']))}</b>: {_escape(str(v['message']))}; effect "
                f"<code>{_escape(json.dumps(v['effect'], sort_keys=True))}</code></li>"
                for v in entry["violations"]
            )
            parts.append(f"<ul>{items}</ul>")
        trace = "".join(_action_row(a) for a in entry["actions"])
        parts.append(
            "<table><tr><th>tool</th><th>args</th><th>fault</th><th>agent saw</th>"
            f"<th>committed effect</th></tr>{trace}</table>"
        )
    return "".join(parts)


def _action_row(action: dict[str, Any]) -> str:
    seen = (
        json.dumps(action["result"], sort_keys=True)
        if action["ok"]
        else f"error: {action['error']}"
    )
    cells = [
        str(action["tool"]),
        json.dumps(action["args"], sort_keys=True),
        str(action["fault"] or ""),
        seen,
        str(action["effect_id"] or ""),
    ]
    return "<tr>" + "".join(f"<td>{_escape(c)}</td>" for c in cells) + "</tr>"


def _escape(text: str) -> str:
    # visible: html.escape leaves control and bidi characters in the page as they are.
    return html.escape(visible(text))
