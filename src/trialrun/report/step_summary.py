"""The GitHub job summary: a Markdown view of a finished run for ``$GITHUB_STEP_SUMMARY``.

Layout, top to bottom: the verdict (so it shows first on the pull request), the failing cases as
a table (kind, message, expected, observed), one line naming the cases with unused recordings
(they do not fail a case), the regression gates and the case changes against the baseline, and
where the artifacts are. GitHub renders HTML in summaries, so every text that
comes from the agent or the suite is redacted and escaped: HTML ``<``, ``>`` and ``&`` become
entities, Markdown punctuation is backslash-escaped, ``|`` cannot end a table cell and newlines
become ``<br>``. GitHub refuses a step summary over 1 MiB, so the failing-case table stops when
the budget is spent and says how many cases it left out.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import quote

from trialrun.base.redact import redact_text
from trialrun.base.results import CaseResult, RunResult
from trialrun.base.visible import visible
from trialrun.base.words import counted
from trialrun.report.console import (
    FailureDetail,
    failure_details,
    gate_value,
    unused_tools_text,
    with_gate_hint,
)
from trialrun.report.summary import exit_status

STEP_SUMMARY_LIMIT = 1024 * 1024
"""GitHub's limit for one step's summary, in bytes; the result always stays below it."""
MAX_CELL_CHARS = 300
"""Per table cell: the summary points at the problem; the artifacts hold the full text."""
MAX_LISTED_CHANGES = 50
MAX_LISTED_UNUSED = 20
"""Cases named on the unused-recordings line; summary.json and report.html have them all."""
_FOOTER_ALLOWANCE = 200
"""Bytes kept back from the failing-case table for its "and N more" line."""

# What can start inline markup in GitHub Markdown: emphasis, code, links and images (via "["),
# strikethrough, math ("$"), and "|" which would end a table cell. Block syntax ("#", "-", ...)
# cannot start mid-line, and the text never holds a raw newline.
_MARKDOWN_PUNCTUATION = re.compile(r"([\\`*_\[\]|~$])")
_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_GATE_STATUS = {"pass": "✅ pass", "fail": "❌ fail", "skipped": "⏭️ skipped"}
_HEADERS = ("Case", "Status", "Kind", "Message", "Expected", "Observed")


def build_step_summary(
    run: RunResult,
    summary: dict[str, Any],
    regression: dict[str, Any] | None,
    *,
    artifacts_hint: str | None,
    run_url: str | None = None,
    max_bytes: int = STEP_SUMMARY_LIMIT,
) -> str:
    """The Markdown summary of ``run`` (pure: the caller appends it to the summary file).

    ``artifacts_hint`` is where the run's artifacts are (a path); ``run_url`` the workflow run's
    page (see ``actions_run_url``), where uploaded artifacts can be downloaded. The result
    encodes to fewer than ``max_bytes`` UTF-8 bytes.
    """
    head = _verdict(run, summary, regression)
    tail = [
        *_unused_section(run.cases),
        *_regression_section(regression),
        *_artifacts_section(artifacts_hint, run_url),
    ]
    fixed = _utf8_size("\n".join([*head, *tail])) + 1
    failing_section = _failing_section(run.cases, budget=max_bytes - 1 - fixed - _FOOTER_ALLOWANCE)
    text = "\n".join([*head, *failing_section, *tail]) + "\n"
    if _utf8_size(text) >= max_bytes:  # only a huge suite name or gate list gets here
        cut = text.encode("utf-8", "replace")[: max_bytes - 64].decode("utf-8", "ignore")
        text = cut.rsplit("\n", 1)[0] + "\n\n_(summary truncated to fit GitHub's limit)_\n"
    return text


def append_step_summary(path: Path, text: str) -> None:
    """Append ``text`` to the step summary file (GitHub joins what the steps wrote).

    Never raises: a summary that cannot be written must not fail the run; it warns on stderr.
    """
    body = text if text.endswith("\n") else text + "\n"
    try:
        with path.open("a+b") as handle:
            handle.write((_separator(handle) + body).encode("utf-8", "replace"))
    except OSError as exc:
        reason = exc.strerror or str(exc)
        print(f"warning: cannot write the GitHub step summary to {path}: {reason}", file=sys.stderr)


def _separator(handle: BinaryIO) -> str:
    """A blank line between our Markdown and what an earlier step or command wrote."""
    end = handle.seek(0, os.SEEK_END)
    if end == 0:
        return ""
    handle.seek(end - 1)
    return "\n" if handle.read(1) == b"\n" else "\n\n"


def actions_run_url(env: Mapping[str, str]) -> str | None:
    """The workflow run's page from ``GITHUB_SERVER_URL``, ``GITHUB_REPOSITORY``, ``GITHUB_RUN_ID``.

    None unless all three are set and the server is an http(s) URL.
    """
    server = env.get("GITHUB_SERVER_URL", "").rstrip("/")
    repository = env.get("GITHUB_REPOSITORY", "")
    run_id = env.get("GITHUB_RUN_ID", "")
    if not (server and repository and run_id) or not server.startswith(("https://", "http://")):
        return None
    return f"{quote(server, safe=':/')}/{quote(repository, safe='/')}/actions/runs/{quote(run_id)}"


def markdown_text(text: str) -> str:
    """Agent or suite text, redacted and made inert for GitHub Markdown, on one line (so usable
    in a table cell)."""
    return _inert(redact_text(text))


def _inert(text: str) -> str:
    text = visible(text)
    text = "".join(_HTML.get(char, char) for char in text)
    text = _MARKDOWN_PUNCTUATION.sub(r"\\\1", text)
    lines = text.replace("\r\n", "\n").replace("\r", "\n").replace("\t", " ").split("\n")
    return "<br>".join(lines)


def _verdict(
    run: RunResult, summary: dict[str, Any], regression: dict[str, Any] | None
) -> list[str]:
    status = _section(summary, "run").get("exit_status") or exit_status(run, regression)
    passed = status == "success"
    aggregates = _section(summary, "aggregates")
    total = _count(aggregates, "cases_total", len(run.cases))
    errors = _count(aggregates, "cases_error", _with_status(run, "error"))
    counts = (
        f"{counted(total, 'case')}: "
        f"{_count(aggregates, 'cases_pass', run.cases_passed)} passed, "
        f"{_count(aggregates, 'cases_fail', _with_status(run, 'fail'))} failed, "
        f"{counted(errors, 'error')}"
    )
    rate = aggregates.get("pass_rate", run.pass_rate)
    rate_text = f"{rate:.1%}" if isinstance(rate, int | float) else "n/a"
    gates = ""
    if regression is not None:
        checks = [c for c in regression.get("checks") or [] if isinstance(c, dict)]
        failed = sum(1 for check in checks if check.get("status") == "fail")
        gates = f"; regression gates: {'all passed' if not failed else f'{failed} failed'}"
    lines = [
        f"## {'✅' if passed else '❌'} trialrun {'PASS' if passed else 'FAIL'}: "
        f"{markdown_text(run.suite_name)}",
        "",
        f"**{'PASS' if passed else 'FAIL'}**: {counts} "
        f"(pass rate {rate_text}){gates}. Mode {markdown_text(run.mode)}, "
        f"run {markdown_text(run.run_id)}.",
    ]
    if run.interrupted:
        not_run = f" {markdown_text(run.not_run_text())}." if run.cases_not_run else ""
        lines += [
            "",
            f"⚠️ The run was interrupted:{not_run} The summary covers the cases that finished.",
        ]
    return lines


def _failing_section(cases: Sequence[CaseResult], *, budget: int) -> list[str]:
    failing = [case for case in cases if not case.passed]
    if not failing:
        return []
    header = [
        "",
        f"### Failing cases ({len(failing)})",
        "",
        _row(_HEADERS),
        _row(["---"] * len(_HEADERS)),
    ]
    spent = _utf8_size("\n".join(header))
    rows: list[str] = []
    shown = 0
    for case in failing:
        case_rows = [_detail_row(case, detail) for detail in failure_details(case)]
        cost = sum(_utf8_size(row) + 1 for row in case_rows)
        if spent + cost > budget:
            break
        rows += case_rows
        spent += cost
        shown += 1
    more = len(failing) - shown
    footer = ["", f"_and {more} more failing cases: see the run artifacts._"] if more else []
    return (
        [*header, *rows, *footer] if rows else ["", f"### Failing cases ({len(failing)})", *footer]
    )


def _detail_row(case: CaseResult, detail: FailureDetail) -> str:
    return _row(
        [
            _cell(case.case_id),
            case.status.upper(),
            _cell(f"{detail.label}: {detail.type}"),
            _cell(detail.message),
            _cell(detail.expected) if detail.expected is not None else "",
            _cell(detail.observed) if detail.observed is not None else "",
        ]
    )


def _unused_section(cases: Sequence[CaseResult]) -> list[str]:
    """``t1: 3 (search_docs x2, mcp:docs/fetch); t4: 1 (model:gpt-4o)``, a few cases at most."""
    listed = [case for case in cases if case.run.unused_recordings]
    if not listed:
        return []
    parts = [
        _cell(
            f"{case.case_id}: {case.run.unused_recordings}"
            + (f" ({names})" if (names := unused_tools_text(case)) else "")
        )
        for case in listed[:MAX_LISTED_UNUSED]
    ]
    more = len(listed) - MAX_LISTED_UNUSED
    extra = f"; and {more} more cases" if more > 0 else ""
    return ["", f"**Unused recordings** (they do not fail a case): {'; '.join(parts)}{extra}."]


def _regression_section(regression: dict[str, Any] | None) -> list[str]:
    if regression is None:
        return ["", "_No baseline comparison: regression gates not checked._"]
    lines = [
        "",
        f"### Regression gates (baseline: {markdown_text(str(regression.get('baseline_path')))})",
        "",
        _row(["Check", "Status", "Baseline", "Current", "Threshold", "Note"]),
        _row(["---"] * 6),
    ]
    for check in regression.get("checks") or []:
        if not isinstance(check, dict):
            continue
        lines.append(
            _row(
                [
                    _cell(str(check.get("id"))),
                    _GATE_STATUS.get(str(check.get("status")), "?"),
                    _cell(gate_value(str(check.get("id")), "baseline", check.get("baseline"))),
                    _cell(gate_value(str(check.get("id")), "current", check.get("current"))),
                    _cell(gate_value(str(check.get("id")), "threshold", check.get("threshold"))),
                    _cell(
                        with_gate_hint(
                            str(check.get("note") or ""), check, regression.get("baseline_path")
                        )
                    ),
                ]
            )
        )
    lines += [f"- ⚠️ {_cell(str(w))}" for w in (regression.get("warnings") or [])[:10]]
    return lines + _case_changes(regression.get("case_diffs") or {})


def _case_changes(diffs: dict[str, Any]) -> list[str]:
    changed = [c for c in diffs.get("status_changed") or [] if isinstance(c, dict)]
    lines: list[str] = []
    if changed:
        lines += ["", "**Case changes vs baseline**", "", _row(["Case", "Baseline", "Current"])]
        lines.append(_row(["---"] * 3))
        lines += [
            _row(
                [
                    _cell(str(c.get("id"))),
                    _cell(str(c.get("baseline"))),
                    _cell(str(c.get("current"))),
                ]
            )
            for c in changed[:MAX_LISTED_CHANGES]
        ]
        if len(changed) > MAX_LISTED_CHANGES:
            lines += ["", f"_and {len(changed) - MAX_LISTED_CHANGES} more status changes._"]
    for key, title in (("missing_in_current", "Missing"), ("new_in_current", "New")):
        ids = [str(case_id) for case_id in diffs.get(key) or []]
        if ids:
            listed = ", ".join(_cell(case_id) for case_id in ids[:MAX_LISTED_CHANGES])
            extra = (
                f" and {len(ids) - MAX_LISTED_CHANGES} more"
                if len(ids) > MAX_LISTED_CHANGES
                else ""
            )
            lines += ["", f"**{title} cases ({len(ids)}):** {listed}{extra}"]
    return lines


def _artifacts_section(artifacts_hint: str | None, run_url: str | None) -> list[str]:
    parts = []
    if artifacts_hint:
        parts.append(f"written to {markdown_text(artifacts_hint)}")
    if run_url:
        # Percent-encoded so that no character of it can close the link or open HTML.
        target = quote(run_url, safe=":/?#=&%@+")
        parts.append(f"uploaded ones are on the [workflow run page]({target})")
    if not parts:
        return []
    return [
        "",
        f"**Artifacts** (summary.json, junit.xml, report.html, receipt): {'; '.join(parts)}.",
    ]


def _cell(text: str) -> str:
    # Redacted before it is shortened: a secret cut in half would no longer be recognised.
    redacted = redact_text(text)
    if len(redacted) > MAX_CELL_CHARS:
        redacted = redacted[: MAX_CELL_CHARS - 1] + "…"
    return _inert(redacted)


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _utf8_size(text: str) -> int:
    return len(text.encode("utf-8", "replace"))


def _section(document: dict[str, Any], key: str) -> dict[str, Any]:
    value = document.get(key)
    return value if isinstance(value, dict) else {}


def _count(aggregates: dict[str, Any], key: str, fallback: int) -> int:
    value = aggregates.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else fallback


def _with_status(run: RunResult, status: str) -> int:
    return sum(1 for case in run.cases if case.status == status)
