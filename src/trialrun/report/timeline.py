"""The tool-call timeline of one case in report.html: when each call started and how long it took.

One row per call, in call order, on one time axis from the case's start to its end (``wall_ms``,
or the end of the last call when that is later). A call's bar starts at ``ToolCall.start_ms`` and
is ``duration_ms`` long; failed calls are marked. Calls recorded without a start (a result built
by an older trialrun, or by hand) are drawn one after another, and the figure says so.
"""

from __future__ import annotations

from typing import Any

from trialrun.base.results import CaseResult, ToolCall
from trialrun.report.console import clean
from trialrun.report.figures import (
    MIN_BAR_WIDTH,
    Scale,
    ms_label,
    scale_for,
    short_label,
    ticks,
)

CALLS_DRAWN_MAX = 150
"""Rows a timeline draws; a case making more calls gets a note saying how many were left out."""
ROW_HEIGHT = 20.0
BAR_HEIGHT = 12.0
AXIS_HEIGHT = 26.0
TOP_MARGIN = 6.0
ERROR_CHARS_MAX = 300
SEQUENTIAL_NOTE = "start times were not recorded for these calls: they are drawn one after another"


def timeline_view(case: CaseResult) -> dict[str, Any] | None:
    """What the template draws for ``case``'s calls; None when it made none."""
    calls = case.run.tool_calls
    if not calls:
        return None
    starts = _starts(calls)
    drawn = list(zip(calls, starts, strict=True))[:CALLS_DRAWN_MAX]
    end = max(start + call.duration_ms for call, start in zip(calls, starts, strict=True))
    scale = scale_for(max(float(case.run.wall_ms), end))
    rows = [_row(number, call, start, scale) for number, (call, start) in enumerate(drawn, 1)]
    height = TOP_MARGIN + ROW_HEIGHT * len(rows) + AXIS_HEIGHT
    notes = []
    if any(call.start_ms is None for call in calls):
        notes.append(SEQUENTIAL_NOTE)
    if len(calls) > len(drawn):
        notes.append(f"{len(calls) - len(drawn):,} more calls not drawn")
    return {
        "rows": rows,
        "span_ms": scale.span,
        "height": round(height, 2),
        "axis_y": round(height - AXIS_HEIGHT + 4, 2),
        "ticks": [{"x": scale.x(value), "label": ms_label(value)} for value in ticks(scale.span)],
        "plot_x0": scale.x0,
        "plot_x1": round(scale.x0 + scale.width, 2),
        "errors": sum(1 for call in calls if not call.ok),
        "notes": notes,
        "summary": _summary_text(calls, scale.span),
    }


def _starts(calls: list[ToolCall]) -> list[float]:
    """Each call's start in ms; one recorded without a start begins where the previous one ended."""
    starts: list[float] = []
    previous_end = 0.0
    for call in calls:
        start = call.start_ms if call.start_ms is not None else previous_end
        starts.append(max(start, 0.0))
        previous_end = starts[-1] + call.duration_ms
    return starts


def _row(number: int, call: ToolCall, start: float, scale: Scale) -> dict[str, Any]:
    y = TOP_MARGIN + ROW_HEIGHT * (number - 1)
    x = scale.x(start)
    width = scale.length(call.duration_ms, minimum=MIN_BAR_WIDTH)
    return {
        "number": number,
        "label": short_label(f"{number}. {call.name}"),
        "name": call.name,
        "ok": call.ok,
        "start_ms": round(start, 3),
        "duration_ms": round(call.duration_ms, 3),
        "x": x,
        "width": width,
        "y": round(y + (ROW_HEIGHT - BAR_HEIGHT) / 2, 2),
        "text_y": round(y + ROW_HEIGHT / 2 + 4, 2),
        "end_x": round(x + width + 4, 2),
        "value": ms_label(call.duration_ms),
        "title": _title(number, call, start),
    }


def _title(number: int, call: ToolCall, start: float) -> str:
    head = (
        f"call {number}: {call.name}, started at {ms_label(start)}, "
        f"took {ms_label(call.duration_ms)}"
    )
    if call.ok:
        return head
    error = clean(call.error or "failed")
    if len(error) > ERROR_CHARS_MAX:
        error = error[: ERROR_CHARS_MAX - 1] + "…"
    return f"{head}; error: {error}"


def _summary_text(calls: list[ToolCall], span_ms: float) -> str:
    total = sum(call.duration_ms for call in calls)
    failed = sum(1 for call in calls if not call.ok)
    return (
        f"{len(calls)} tool calls over {ms_label(span_ms)}, {ms_label(total)} inside tools, "
        f"{failed} failed"
    )
