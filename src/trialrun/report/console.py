"""What ``trialrun run`` prints: plain text, no rich (start-up time matters in every CI job).

Layout, top to bottom: the results table (Case, Status, Wall ms) and a count line; with a
baseline, the regression checks table, warnings and the case changes (status changes, missing and
new cases, which RunLedger computed but never printed); then RunLedger's failure block and gate
failures, in its layout, with one fix: the first line of each entry says what kind of failure it
is (``assertion: <type>`` for an assertion, ``budget: <field>`` for a budget, ``failure: <kind>``
for anything else), where the peer wrote ``assertion:`` for all of them.

Agent text is redacted, and its control and bidi characters are shown as escapes
(``base.visible``) before it is printed: a case id holding ``\x1b[31m`` prints those seven
characters, not red. GitHub annotations live in ``report/annotations.py``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trialrun.base.redact import redact_text
from trialrun.base.results import CaseResult, RunResult
from trialrun.base.visible import visible, visible_name
from trialrun.base.words import counted
from trialrun.config.paths import display_path
from trialrun.report.case_runs import runs_text
from trialrun.report.summary import stderr_tail_of

_VALUE_COLUMN = 13
"""Width of ``"  message:   "``: continuation lines of a message line up under its first line."""

_ASSERTION_LIKE = ("assertion_failed", "budget_exceeded")
_RULE_MAX = 40
CONSOLE_STDERR_LINES = 8


@dataclass(frozen=True)
class FailureDetail:
    """One reason a case did not pass, as printed in the failure block."""

    case_id: str
    label: str
    """``assertion``, ``budget`` or ``failure``."""
    type: str
    message: str
    expected: str | None = None
    observed: str | None = None

    def cleaned(self) -> FailureDetail:
        """The same detail with its hidden characters shown as escapes, for display."""
        return FailureDetail(
            case_id=visible_name(self.case_id),
            label=self.label,
            type=visible_name(self.type),
            message=visible(self.message),
            expected=visible(self.expected) if self.expected is not None else None,
            observed=visible(self.observed) if self.observed is not None else None,
        )


def failure_details(case: CaseResult) -> list[FailureDetail]:
    """The reasons ``case`` did not pass: a fault first, then every check that said no.

    Texts are redacted but otherwise raw; ``FailureDetail.cleaned`` prepares them for display.
    """
    if case.passed:
        return []
    details: list[FailureDetail] = []
    failure = case.failure
    if failure is not None and failure.kind not in _ASSERTION_LIKE:
        message = redact_text(failure.message)
        details.append(FailureDetail(case.case_id, "failure", failure.kind, message))
    for check in case.check_failures:
        is_budget = check.type.startswith("budget:")
        details.append(
            FailureDetail(
                case_id=case.case_id,
                label="budget" if is_budget else "assertion",
                type=check.type.removeprefix("budget:") if is_budget else check.type,
                message=redact_text(check.message),
                expected=redact_text(check.expected) if check.expected is not None else None,
                observed=redact_text(check.observed) if check.observed is not None else None,
            )
        )
    if not details:
        kind = failure.kind if failure is not None else "unknown"
        message = (
            failure.message if failure is not None else "Case failed without a recorded reason"
        )
        details.append(FailureDetail(case.case_id, "failure", kind, redact_text(message)))
    return details


def gate_failures(regression: dict[str, Any] | None) -> list[tuple[str, str]]:
    """``(check id, message)`` for every failing regression check, in check order."""
    if not regression:
        return []
    found: list[tuple[str, str]] = []
    for check in regression.get("checks") or []:
        if not isinstance(check, dict) or check.get("status") != "fail":
            continue
        gate = str(check.get("id"))
        threshold, baseline, current = (
            gate_value(gate, k, check.get(k)) for k in ("threshold", "baseline", "current")
        )
        if gate == "min_pass_rate":
            message = (
                f"Regression gate min_pass_rate failed: pass_rate {current} "
                f"< required {threshold} (baseline {baseline})"
            )
        elif gate == "status_regressions":
            cases = ", ".join(clean_name(str(case_id)) for case_id in check.get("cases") or [])
            count = check.get("current")
            verb = "passes" if count == 1 else "pass"
            message = (
                f"Regression gate status_regressions failed: "
                f"{counted(count, 'case') if isinstance(count, int) else count} passed in "
                f"the baseline and no longer {verb}: {cases}"
            )
            found.append((gate, message))
            continue
        elif gate == "pass_rate_regressions":  # its note names each case with both rates
            note = clean(str(check.get("note") or ""))
            found.append((gate, f"Regression gate pass_rate_regressions failed: {note}"))
            continue
        elif check.get("delta_pct") is not None:
            message = (
                f"Regression gate {gate} failed: change "
                f"{gate_value(gate, 'delta_pct', check['delta_pct'])} > allowed {threshold} "
                f"(baseline {baseline}, current {current})"
            )
        else:
            message = (
                f"Regression gate {gate} failed: current {current}, "
                f"threshold {threshold}, baseline {baseline}"
            )
        if check.get("note"):
            message = f"{message} ({clean(str(check['note']))})"
        found.append((gate, message))
    return found


def format_run(run: RunResult, summary: dict[str, Any], regression: dict[str, Any] | None) -> str:
    """The whole console report for a finished run (no trailing newline)."""
    lines = [f"trialrun results: {clean_name(run.suite_name)} ({run.mode}, run {run.run_id})"]
    marks = quarantine_marks(summary)
    if any(case.runs is not None for case in run.cases):
        lines += runs_table(run.cases, marks)
    else:
        rows = [
            [
                clean_name(case.case_id),
                case.status.upper() + marks.get(case.case_id, ""),
                str(case.run.wall_ms),
            ]
            for case in run.cases
        ]
        lines += table(["Case", "Status", "Wall ms"], rows, right_aligned={2})
    aggregates = summary.get("aggregates") or {}
    flaky = aggregates.get("cases_flaky", 0)
    lines.append(
        f"{aggregates.get('cases_pass', run.cases_passed)} passed, "
        f"{aggregates.get('cases_fail', 0)} failed, "
        f"{counted(aggregates.get('cases_error', 0), 'error')}"
        + (f", {flaky} flaky" if flaky else "")
        + f" (pass rate {run.pass_rate:.1%})"
    )
    if run.interrupted:
        not_run = clean(run.not_run_text()) or "every case it was given had finished"
        lines.append(f"INTERRUPTED: {not_run}; the counts cover the finished cases only")
    lines += [f"warning: {clean(str(w))}" for w in (summary.get("run") or {}).get("warnings") or []]
    blocks = (
        format_unused(run.cases),
        format_stale(run.cases),
        format_kept(run.cases),
        format_recordings(run.cases),
        [] if regression is None else format_regression(regression),
        format_tolerated(run.cases),
        format_failures(run.cases, gate_failures(regression)),
    )
    for block in blocks:
        if block:  # each block after a blank line; an empty one leaves no trace
            lines += ["", *block]
    return "\n".join(lines)


def quarantine_marks(summary: Mapping[str, Any]) -> dict[str, str]:
    """Case id -> `` (quarantined)`` or `` (quarantine expired)`` for the cases quarantine.yaml
    lists (from summary.json's per-case ``quarantine``)."""
    marks: dict[str, str] = {}
    for doc in summary.get("cases") or []:
        block = doc.get("quarantine") if isinstance(doc, Mapping) else None
        if isinstance(block, Mapping):
            expired = block.get("expired")
            marks[str(doc.get("id"))] = " (quarantine expired)" if expired else " (quarantined)"
    return marks


def runs_table(cases: Sequence[CaseResult], marks: Mapping[str, str]) -> list[str]:
    """The results table of a run whose cases ran more than once: a Runs column too."""
    rows = [
        [
            clean_name(case.case_id),
            case.status.upper() + marks.get(case.case_id, ""),
            str(case.run.wall_ms),
            runs_text(case),
        ]
        for case in cases
    ]
    return table(["Case", "Status", "Wall ms", "Runs"], rows, right_aligned={2})


def format_tolerated(cases: Sequence[CaseResult]) -> list[str]:
    """Flaky cases that do not fail the run (``flaky: warn``, or a met ``min_case_pass_rate``)."""
    tolerated = [case for case in cases if case.status == "flaky" and case.passed]
    if not tolerated:
        return []
    lines = [f"Flaky, not failing the run ({counted(len(tolerated), 'case')}):"]
    for case in tolerated:
        runs = case.runs
        why = "the suite says flaky: warn"
        if runs is not None and runs.min_pass_rate is not None:
            why = f"at least min_case_pass_rate {runs.min_pass_rate:g}"
        lines.append(f"  {clean_name(case.case_id)}: {runs_text(case)}; {why}")
    return lines


def format_recordings(cases: Sequence[CaseResult]) -> list[str]:
    """Record and update runs: a line per case whose recordings changed, then each recording
    whose answer changed (``report.recordings``)."""
    if not any(case.run.recording_review for case in cases):
        return []
    from trialrun.report.recordings import changed_lines, console_lines

    lines = [clean(line) for line in console_lines(cases)]
    changed = changed_lines(cases)
    if changed:
        lines += ["Changed recordings (see recordings-diff.json):"]
        lines += [f"  {clean(line)}" for line in changed]
    return lines


def format_kept(cases: Sequence[CaseResult]) -> list[str]:
    """Record mode: the cases whose failure kept their cassette as it was (nothing recorded)."""
    lines = [
        f"  {clean_name(case.case_id)}: "
        + (clean(display_path(case.cassette_path)) if case.cassette_path else "(no cassette)")
        for case in cases
        if case.run.recording_kept
    ]
    if not lines:
        return []
    heading = "Cassettes kept as they were (their case failed, so its recording was dropped):"
    return [heading, *lines]


def format_unused(cases: Sequence[CaseResult]) -> list[str]:
    """Per case, the recordings no call used: a stale cassette, or a call the agent stopped making.

    They do not fail the case (RunLedger never even reported them), so this is not in the
    failure block.
    """
    lines = [
        f"  {clean_name(case.case_id)}: {case.run.unused_recordings}"
        + (f" ({clean_name(names)})" if (names := unused_tools_text(case)) else "")
        for case in cases
        if case.run.unused_recordings
    ]
    return ["Unused recordings (they do not fail a case):", *lines] if lines else []


def format_stale(cases: Sequence[CaseResult]) -> list[str]:
    """Per case, its recordings older than ``max_recording_age_days`` or of a model the suite
    no longer asks for: a warning, since they still replay."""
    lines = [
        f"  {clean_name(case.case_id)}: {clean_name(stale)}"
        for case in cases
        for stale in case.run.stale_recordings
    ]
    return ["warning: stale recordings (they still replay):", *lines] if lines else []


def unused_tools_text(case: CaseResult) -> str:
    """``search_docs x2, fetch``: the tools of a case's unused recordings, in cassette order."""
    return counted_text(case.unused_recordings_by_tool())


def counted_text(counts: Mapping[str, int]) -> str:
    """``search_docs x2, fetch``: names with their count when it is more than one."""
    return ", ".join(name if count == 1 else f"{name} x{count}" for name, count in counts.items())


def format_regression(regression: dict[str, Any]) -> list[str]:
    """The regression checks table, warnings and case changes against the baseline."""
    lines = [f"Regression checks (baseline: {regression.get('baseline_path')})"]
    rows = [
        [
            str(check.get("id")),
            _CHECK_STATUS.get(str(check.get("status")), "?"),
            with_gate_hint(_details(check), check, regression.get("baseline_path")),
        ]
        for check in regression.get("checks") or []
    ]
    lines += table(["Check", "Status", "Details"], rows)
    lines += [f"Warning: {clean(str(warning))}" for warning in regression.get("warnings") or []]
    diffs = regression.get("case_diffs") or {}
    changes = [
        f"  {clean_name(str(c.get('id')))}: {c.get('baseline')} -> {c.get('current')}"
        for c in diffs.get("status_changed") or []
    ]
    for key, title in (("missing_in_current", "missing"), ("new_in_current", "new")):
        if diffs.get(key):
            changes.append(f"  {title}: {', '.join(clean_name(str(i)) for i in diffs[key])}")
    if changes:
        lines += ["", "Case changes vs baseline:", *changes]
    return lines


def format_failures(cases: Sequence[CaseResult], gates: Sequence[tuple[str, str]]) -> list[str]:
    """RunLedger's "Failures (N case):" block, then "Gate failures (N):"."""
    lines: list[str] = []
    failing = [case for case in cases if not case.passed]
    if failing:
        lines.append(f"Failures ({counted(len(failing), 'case')}):")
        for case in failing:
            lines += ["", f"{case.status.upper()} {clean_name(case.case_id)}"]
            if case.runs is not None:
                lines.append(_field("runs", runs_text(case)))
            for detail in failure_details(case):
                lines += detail_lines(detail)
            lines += _stderr_lines(case)
    if gates:
        if lines:
            lines.append("")
        lines.append(f"Gate failures ({len(gates)}):")
        lines += [f"  {gate}: {message}" for gate, message in gates]
    return lines


def _stderr_lines(case: CaseResult) -> list[str]:
    """For a fault, the last lines the agent wrote to stderr: usually the reason it broke."""
    if case.status != "error":
        return []
    tail = clean(stderr_tail_of(case)).splitlines()[-CONSOLE_STDERR_LINES:]
    if not tail:
        return []
    return [_field("stderr", f"(last {len(tail)} lines)"), *(f"    {line}" for line in tail)]


def detail_lines(raw: FailureDetail) -> list[str]:
    detail = raw.cleaned()
    lines = [_field(detail.label, detail.type), _field("message", detail.message)]
    if detail.expected is not None:
        lines.append(_field("expected", detail.expected))
    if detail.observed is not None:
        lines.append(_field("observed", detail.observed))
    return lines


def table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], *, right_aligned: set[int] | None = None
) -> list[str]:
    """Columns padded to their widest cell; a dashed rule under the headers."""
    right = right_aligned or set()
    widths = [max([len(h), *(len(row[i]) for row in rows)]) for i, h in enumerate(headers)]

    def render(cells: Sequence[str]) -> str:
        padded = [
            cell.rjust(widths[i]) if i in right else cell.ljust(widths[i])
            for i, cell in enumerate(cells)
        ]
        return "  ".join(padded).rstrip()

    rule = ["-" * min(w, _RULE_MAX) for w in widths]
    return [render(headers), render(rule), *(render(row) for row in rows)]


def fmt_number(value: object) -> str:
    """A number as people read it: ``52``, ``0.3``, ``12.25`` (no float noise); None as ``n/a``."""
    if value is None:
        return "n/a"
    if isinstance(value, float):
        if value.is_integer():
            return str(int(value))
        return f"{value:.2f}".rstrip("0").rstrip(".")
    return str(value)


def gate_value(check_id: str, key: str, value: object) -> str:
    """One regression-check value in its unit.

    summary.json keeps fractions (the pass rate, a wall-time change); people read percentages:
    a pass rate is ``92.0%`` and its change ``-8.0 pts``, a wall gate's change and limit are
    ``+12.5%`` and its times ``52 ms``.
    """
    if not isinstance(value, int | float) or isinstance(value, bool):
        return fmt_number(value)
    if check_id == "min_pass_rate":
        return f"{value * 100:+.1f} pts" if key == "delta" else f"{value:.1%}"
    if check_id.endswith("_delta_pct"):
        if key in ("delta_pct", "threshold"):
            return f"{value * 100:+.1f}%"
        if key in ("baseline", "current"):
            return f"{fmt_number(value)} ms"
    return fmt_number(value)


def clean(text: str) -> str:
    """Redacted, its control and bidi characters shown as escapes (newlines and tabs stay)."""
    return visible(redact_text(text))


def clean_name(text: str) -> str:
    """A case id, suite or tool name as ``clean`` shows text, on one line (``\\n`` escaped)."""
    return visible_name(redact_text(text))


_CHECK_STATUS = {"pass": "PASS", "fail": "FAIL", "skipped": "SKIP"}
CHECK_RATES = "pass_rate_regressions"
"""The baseline gate of cases run with ``--repeat`` (``artifacts.rate_gate``)."""


def with_gate_hint(text: str, check: dict[str, Any], baseline_path: object) -> str:
    """``text``, then what to do about a gate that was set but skipped because the baseline
    lacks its metric.

    Baselines promoted before a gate existed, or by another tool, may not carry the metric; a
    fresh promote from a current run brings it in. ``text`` alone for every other check.
    """
    if check.get("status") != "skipped" or check.get("threshold") is None:
        return text
    if check.get("baseline") is not None:
        return text
    target = clean_name(str(baseline_path)) if baseline_path else "BASELINE"
    hint = (
        "Re-promote the baseline to bring the metric in: "
        f"trialrun baseline promote --from RUN_DIR --to {target}"
    )
    return f"{text} {hint}" if text else hint


def _details(check: dict[str, Any]) -> str:
    parts = [
        f"{key}={gate_value(str(check['id']), key, check[key])}"
        for key in ("baseline", "current", "delta", "delta_pct", "threshold")
        if key in check
        and not (key == "baseline" and check["id"] in ("status_regressions", CHECK_RATES))
    ]
    text = " ".join(parts)
    return f"{text} ({clean(str(check['note']))})" if check.get("note") else text


def _field(label: str, value: str) -> str:
    head = f"  {label}:".ljust(_VALUE_COLUMN)
    continuation = "\n" + " " * _VALUE_COLUMN
    return head + continuation.join(value.splitlines() or [""])
