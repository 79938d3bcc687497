"""report.html: one self-contained page (inline CSS, a few lines of inline JS, no network).

Each case has a timeline of its tool calls, and a run with a baseline shows what changed against
it (``report.comparison``); ``render_diff_html`` renders that view alone for ``trialrun diff
--html``. Figures are inline SVG drawn by the templates from numbers (``report.figures``): no
script draws anything. The colours follow ``prefers-color-scheme`` and print on white.

Security model (RunLedger interpolated agent text into ``innerHTML``: a stored XSS, and
``<!--<script>`` in an output blanked its report):

* every value is rendered server-side by jinja2 with ``autoescape=True`` set explicitly; trace
  events and outputs are JSON (on one line when short, indented otherwise) shown as escaped text
  in ``<pre>``; nothing is embedded as data for scripts and the script never builds markup;
* the only script is a fixed status filter; a Content-Security-Policy allows exactly that script
  (by its SHA-256), inline styles, and nothing else: no network, no inline event handlers;
* agent text is redacted; every string a template prints passes through ``base.visible``
  (jinja2's ``finalize``), which shows control and bidi characters as escapes (``\\x1b``,
  ``\\u202e``: autoescape neutralises neither) and lone surrogates as ``\\udxxx``, so the page
  always encodes as UTF-8.

Big runs stay reasonable: each event's JSON is cut at ``EVENT_CHARS_MAX`` characters and each
case shows at most ``EVENTS_PER_CASE_MAX`` events, with a note saying what was left out.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trialrun.base.fsutil import escape_lone_surrogates
from trialrun.base.redact import redact_shared, redact_text
from trialrun.base.results import CaseResult, RunResult
from trialrun.base.visible import visible_value
from trialrun.base.words import counted
from trialrun.report.case_runs import runs_view
from trialrun.report.console import (
    clean,
    failure_details,
    gate_value,
    unused_tools_text,
    with_gate_hint,
)
from trialrun.report.summary import stderr_tail_of
from trialrun.report.timeline import timeline_view

if TYPE_CHECKING:
    import jinja2
    import markupsafe

    from trialrun.report.history_view import PastRun

TEMPLATE_DIR = Path(__file__).parent / "templates"
TEMPLATE_NAME = "report.html.j2"
DIFF_TEMPLATE_NAME = "diff.html.j2"
EVENT_CHARS_MAX = 20_000
EVENTS_PER_CASE_MAX = 500
# Under two lines of the report's box at full width: a short event reads best as one line, and
# json's C encoder writes it, where ``indent`` needs the much slower pure-Python encoder.
ONE_LINE_CHARS_MAX = 240
_ONE_LINE = json.JSONEncoder(ensure_ascii=False).encode
_INDENTED = json.JSONEncoder(ensure_ascii=False, indent=2).encode
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")

FILTER_SCRIPT = """
document.querySelectorAll("[data-filter]").forEach(function (button) {
  button.addEventListener("click", function () {
    var wanted = button.getAttribute("data-filter");
    document.querySelectorAll("[data-status]").forEach(function (element) {
      element.hidden = wanted !== "all" && element.getAttribute("data-status") !== wanted;
    });
    document.querySelectorAll("[data-filter]").forEach(function (other) {
      other.setAttribute("aria-pressed", String(other === button));
    });
  });
});
"""


def _recordings_view(run: RunResult) -> dict[str, Any] | None:
    """Record and update runs: per case what happened to its recordings, and the review's rows
    (every recording that is not identical)."""
    if not any(
        case.run.recording_review is not None or case.run.recording_kept for case in run.cases
    ):
        return None  # a replay run: the module is not even imported
    from trialrun.report.recordings import case_recordings, html_rows

    cases = [
        {"id": case.case_id, "counts": counts}
        for case in run.cases
        if (counts := case_recordings(case)) is not None
    ]
    if not cases:
        return None
    return {"cases": cases, "rows": html_rows(run.cases)}


def render_html(
    run: RunResult,
    summary: dict[str, Any],
    case_views: Sequence[dict[str, Any]] | None = None,
    comparison: dict[str, Any] | None = None,
    history: Sequence[PastRun] | None = None,
) -> str:
    """The report page for ``run``; ``summary`` supplies aggregates and the regression block.

    ``history``: the suite's earlier runs, oldest first (``artifacts.history``), for each case's
    strip of outcomes; None or empty: the page has no history column.

    ``case_views``: what ``case_view`` gave for each of ``run.cases``, when the caller prepared
    them as the cases finished (the run's tail then only assembles the page).
    ``comparison``: ``report.comparison.comparison_view`` of the baseline against this run, when
    the run had a baseline (it replaces the plain list of regression checks).
    """
    from markupsafe import Markup

    if case_views is None:
        case_views = [case_view(index, case) for index, case in enumerate(run.cases, start=1)]
    changes: dict[str, dict[str, Any]] = {}
    if comparison is not None:
        # The run report shows each case's changes in its own details, linked from the list.
        anchors = {view["id"]: view["anchor"] for view in case_views}
        listed = [
            {**change, "link": anchors.get(change["id"], "")} for change in comparison["cases"]
        ]
        comparison = {**comparison, "cases": listed}
        changes = {change["id"]: change for change in listed}
    case_views = _with_history_and_marks(run, summary, case_views, history)
    template = load_template()
    digest = base64.b64encode(hashlib.sha256(FILTER_SCRIPT.encode("utf-8")).digest()).decode()
    page = template.render(
        suite=run.suite_name,
        suite_path=run.suite_path,
        run_id=run.run_id,
        mode=run.mode,
        status=(summary.get("run") or {}).get("exit_status", "unknown"),
        generated_at=summary.get("generated_at", ""),
        interrupted=run.interrupted,
        not_run=run.not_run_text(),
        kpis=_kpis(summary),
        regression=_regression_view(summary.get("regression")),
        comparison=comparison,
        changes=changes,
        cases=case_views,
        history=bool(history),
        warnings=[clean(str(w)) for w in (summary.get("run") or {}).get("warnings") or []],
        recordings=_recordings_view(run),
        script=Markup(FILTER_SCRIPT),
        script_hash=f"sha256-{digest}",
    )
    return _LONE_SURROGATE.sub("\ufffd", page)


def _with_history_and_marks(
    run: RunResult,
    summary: dict[str, Any],
    views: Sequence[dict[str, Any]],
    history: Sequence[PastRun] | None,
) -> list[dict[str, Any]]:
    """Each case view with its quarantine mark and, given earlier runs, its history strip."""
    from trialrun.report.console import quarantine_marks
    from trialrun.report.history_view import case_history

    marks = quarantine_marks(summary)
    when = str((summary.get("run") or {}).get("started_at") or "")
    return [
        {
            **view,
            "mark": marks.get(view["id"], ""),
            "history": case_history(
                view["id"], view["status"], history, run_id=run.run_id, when=when
            )
            if history
            else None,
        }
        for view in views
    ]


def render_diff_html(comparison: dict[str, Any], *, title: str, notes: Sequence[str]) -> str:
    """The page of ``trialrun diff --html``: the baseline view of report.html for two runs.

    It has no script at all: its Content-Security-Policy allows inline styles and nothing else.
    """
    page = (
        _environment()
        .get_template(DIFF_TEMPLATE_NAME)
        .render(title=title, notes=[clean(note) for note in notes], comparison=comparison)
    )
    return _LONE_SURROGATE.sub("\ufffd", page)


def load_template() -> jinja2.Template:
    """The compiled report template (cached: the first call pays for jinja2 and compiling)."""
    return _environment().get_template(TEMPLATE_NAME)


def _environment() -> jinja2.Environment:
    return template_environment(TEMPLATE_DIR)


@lru_cache(maxsize=4)
def template_environment(directory: Path) -> jinja2.Environment:
    """The jinja2 environment of every HTML page: autoescaped, strict about undefined names.

    One per template directory (the run pages', the compare page's), built on first use:
    jinja2 costs import time, and only the commands that write a page pay for it.
    """
    import jinja2

    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(directory)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        finalize=visible_value,
        bytecode_cache=_bytecode_cache(),
    )
    # Pages word counts as the console does: ``{{ n | counted("error") }}`` -> ``1 error``.
    environment.filters["counted"] = counted
    environment.filters["words"] = breakable_words
    return environment


def stylesheet() -> str:
    """The CSS every trialrun page shares (light and dark), for a page built without jinja2."""
    return (TEMPLATE_DIR / "_style.css.j2").read_text(encoding="utf-8")


def breakable_words(text: object) -> markupsafe.Markup:
    """``text`` escaped, with a line-break chance after each underscore (``<wbr>``).

    For names such as ``max_tool_errors`` in a narrow column styled ``td.words``: they wrap
    at spaces and underscores, never inside a word. None is shown as nothing.
    """
    import markupsafe

    shown = "" if text is None else str(text)
    return markupsafe.Markup(str(markupsafe.escape(shown)).replace("_", "_<wbr>"))


def _bytecode_cache() -> jinja2.BytecodeCache | None:
    """Compiled templates kept between runs, in the user's cache folder; None if it cannot be.

    Compiling the report's templates is a noticeable part of every run that writes a page. The
    cache checks each template's source before using its entry, and a cache folder that cannot
    be written only means compiling again.
    """
    import jinja2

    class QuietCache(jinja2.FileSystemBytecodeCache):
        def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
            with contextlib.suppress(OSError):  # a full disk or a read-only home
                super().dump_bytecode(bucket)

    try:
        root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
        directory = Path(root) / "trialrun" / "templates"
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    except (OSError, RuntimeError):  # RuntimeError: no home directory to be found
        return None
    # jinja2 compiles ``finalize`` into the template's code, and a cache entry is keyed by the
    # template's source only: entries of a build without it must never be loaded.
    return QuietCache(str(directory), pattern="__trialrun_visible_%s.cache")


def pretty_json(
    value: Any, *, limit: int = EVENT_CHARS_MAX, redacted: bool = False
) -> tuple[str, str | None]:
    """Redacted JSON text cut at ``limit`` characters, and the note saying so.

    The text is one line when it fits in ``ONE_LINE_CHARS_MAX`` characters, else indented by 2.
    Lone surrogates are written as ``\\udxxx`` escapes (as ``fsutil.dumps_json`` does).
    ``redacted``: the value is known to be redacted already (the runner's events).
    """
    shown = value if redacted else redact_shared(value)  # only read: no copy when clean
    text = _ONE_LINE(shown)
    if len(text) > ONE_LINE_CHARS_MAX:
        text = _INDENTED(shown)
    text = escape_lone_surrogates(text)
    if len(text) <= limit:
        return text, None
    return text[:limit], f"truncated: {limit:,} of {len(text):,} characters shown"


def _kpis(summary: dict[str, Any]) -> list[dict[str, str]]:
    aggregates = summary.get("aggregates") or {}
    metrics = aggregates.get("metrics") or {}

    def stat(metric: str, field: str, unit: str = "") -> str:
        value = (metrics.get(metric) or {}).get(field)
        if value is None:
            return "n/a"
        # Costs are fractions of a cent: keep significant digits rather than one decimal.
        return f"{value:.4g}{unit}" if metric == "cost_usd" else f"{value:,.1f}{unit}"

    rate = aggregates.get("pass_rate")
    return [
        {"label": "Pass rate", "value": "n/a" if rate is None else f"{rate:.1%}"},
        {"label": "Cases pass", "value": str(aggregates.get("cases_pass", 0))},
        {"label": "Cases fail", "value": str(aggregates.get("cases_fail", 0))},
        {"label": "Cases error", "value": str(aggregates.get("cases_error", 0))},
        *(
            [{"label": "Cases flaky", "value": str(aggregates["cases_flaky"])}]
            if "cases_flaky" in aggregates
            else []
        ),
        {"label": "p95 wall", "value": stat("wall_ms", "p95", " ms")},
        {"label": "Avg wall", "value": stat("wall_ms", "mean", " ms")},
        {"label": "p95 tool calls", "value": stat("tool_calls", "p95")},
        {"label": "Avg tool calls", "value": stat("tool_calls", "mean")},
        {"label": "Avg tokens out", "value": stat("tokens_out", "mean")},
        {"label": "Avg cost (USD)", "value": stat("cost_usd", "mean")},
    ]


def _regression_view(regression: dict[str, Any] | None) -> dict[str, Any] | None:
    if regression is None:
        return None
    checks = []
    for check in regression.get("checks") or []:
        gate = str(check.get("id"))
        delta_key = "delta" if "delta" in check else "delta_pct"
        checks.append(
            {
                "id": gate,
                "status": str(check.get("status")),
                "threshold": gate_value(gate, "threshold", check.get("threshold")),
                "baseline": gate_value(gate, "baseline", check.get("baseline")),
                "current": gate_value(gate, "current", check.get("current")),
                "delta": gate_value(gate, delta_key, check.get(delta_key)),
                "note": with_gate_hint(
                    str(check.get("note") or ""), check, regression.get("baseline_path")
                ),
            }
        )
    diffs = regression.get("case_diffs") or {}
    return {
        "baseline_path": str(regression.get("baseline_path", "")),
        "passed": bool(regression.get("passed")),
        "checks": checks,
        "warnings": [str(w) for w in regression.get("warnings") or []],
        "status_changed": list(diffs.get("status_changed") or []),
        "missing": [str(i) for i in diffs.get("missing_in_current") or []],
        "new": [str(i) for i in diffs.get("new_in_current") or []],
    }


def case_view(index: int, case: CaseResult) -> dict[str, Any]:
    """What the page shows of one case (``index`` counts from 1, in run order)."""
    run = case.run
    events = run.events[:EVENTS_PER_CASE_MAX]
    output_text, output_note = pretty_json(run.output) if run.output is not None else (None, None)
    return {
        "anchor": f"case-{index}",
        "id": case.case_id,
        "status": case.status,
        "wall_ms": run.wall_ms,
        "tool_calls": run.tool_call_count,
        "tool_errors": run.tool_errors,
        "tokens_in": _number(run.usage.tokens_in),
        "tokens_out": _number(run.usage.tokens_out),
        "cost_usd": _number(run.usage.cost_usd),
        "unused_recordings": run.unused_recordings,
        "unused_tools": unused_tools_text(case),
        "stale_recordings": list(run.stale_recordings),
        "failure_kind": case.failure.kind if case.failure else None,
        "warnings": [redact_text(warning) for warning in run.warnings],
        "failure_message": clean(case.failure.message) if case.failure else None,
        "runs": runs_view(case),
        "details": [detail.cleaned() for detail in failure_details(case)],
        "stderr_tail": clean(stderr_tail_of(case)),
        "output": output_text,
        "output_note": output_note,
        "timeline": timeline_view(case),
        "events": [_event_view(event, run.events_redacted) for event in events],
        "events_note": (
            f"{len(run.events) - len(events):,} more events not shown"
            if len(run.events) > len(events)
            else None
        ),
    }


def _event_view(event: dict[str, Any], redacted: bool) -> dict[str, Any]:
    text, note = pretty_json(event, redacted=redacted)
    return {"type": str(event.get("type", "event")), "json": text, "note": note}


def _number(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)
