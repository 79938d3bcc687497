"""The baseline view of report.html, for a run against its baseline or for two finished runs.

``baseline_comparison`` is what ``trialrun run`` (and ``trialrun merge``) put in report.html when
a baseline was given; ``diff_html`` is the page ``trialrun diff RUN_A RUN_B --html OUT`` writes:
the same view with run A as the baseline and run B as the run. Both read the tool sequences from
the summaries (``cases[].tool_sequence``); for runs whose summary predates that key, ``diff``
takes them from run.jsonl.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from trialrun.artifacts.baseline import compute_regression, read_summary
from trialrun.artifacts.diffing import (
    DEFAULT_WALL_THRESHOLD_MS,
    DEFAULT_WALL_THRESHOLD_PCT,
    RunDiff,
    RunTrace,
)
from trialrun.report.comparison import comparison_view


def baseline_comparison(
    baseline: dict[str, Any],
    summary: dict[str, Any],
    regression: dict[str, Any],
) -> dict[str, Any]:
    """The view of ``summary`` against ``baseline``, with the gates ``regression`` applied."""
    return comparison_view(
        baseline,
        summary,
        regression=regression,
        before_label=f"baseline {regression.get('baseline_path', '')}".strip(),
        after_label="this run",
        wall_threshold_pct=DEFAULT_WALL_THRESHOLD_PCT,
        wall_threshold_ms=DEFAULT_WALL_THRESHOLD_MS,
    )


def diff_html(diff: RunDiff, path_a: Path, path_b: Path) -> str:
    """The ``trialrun diff --html`` page for the runs ``diff`` compared (A before, B now).

    The regression gates are run B's suite's (its summary's ``policy_snapshot``), applied with
    run A as the baseline, as ``trialrun run --baseline`` would have with A promoted.
    """
    from trialrun.report.html import render_diff_html

    before = _with_sequences(read_summary(path_a), diff.a)
    after = _with_sequences(read_summary(path_b), diff.b)
    regression = compute_regression(before, after, after.get("policy_snapshot"), diff.a.label)
    view = comparison_view(
        before,
        after,
        regression=regression,
        before_label=f"A: {_describe(diff.a)}",
        after_label=f"B: {_describe(diff.b)}",
        wall_threshold_pct=diff.wall_threshold_pct,
        wall_threshold_ms=diff.wall_threshold_ms,
    )
    title = f"{_describe(diff.a)} → {_describe(diff.b)}"
    return render_diff_html(view, title=title, notes=diff.notes)


def _with_sequences(summary: dict[str, Any], trace: RunTrace) -> dict[str, Any]:
    """``summary`` with each case's tool sequence from run.jsonl where the summary has none."""
    if not trace.has_events:
        return summary
    document = copy.deepcopy(summary)
    for case in document.get("cases") or []:
        found = trace.cases.get(str(case.get("id")))
        if found is not None and not isinstance(case.get("tool_sequence"), list):
            case["tool_sequence"] = list(found.tools)
    return document


def _describe(run: RunTrace) -> str:
    named = run.run_id is not None and run.run_id not in run.label
    return f"{run.label} (run {run.run_id})" if named else run.label
