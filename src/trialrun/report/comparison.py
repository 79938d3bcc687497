"""What changed between a run and its baseline (or run A and run B), as report.html shows it.

Both sides are summary.json-style documents (a baseline is one, reduced): cases with ``id``,
``status``, ``wall_ms``, ``tool_calls``, ``tokens_in``, ``tokens_out``, ``cost_usd`` and
``tool_sequence`` (absent from summaries written before it was added). The view lists status
changes first (regressions before improvements), then the run's metric deltas beside the
regression gates, then each case that changed: its tool sequences aligned by
``difflib.SequenceMatcher`` and its metric deltas.

A case counts as changed when its status, tool sequence, tool calls, tokens or cost differ, or
its wall time moved by more than both wall thresholds (wall times are noisy: 2 ms to 5 ms is
+150% and means nothing). The thresholds come from the caller, like ``trialrun diff``'s.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from itertools import zip_longest
from typing import Any

from trialrun.report.console import clean
from trialrun.report.figures import (
    Scale,
    as_number,
    number_label,
    short_label,
)

SEQUENCE_ROWS_MAX = 200
"""Aligned rows shown per case; longer diffs end with a note."""
SAME_RUN_KEPT = 2
"""Calls kept at each end of a long run of equal calls (the middle is folded into one line)."""
PAIR_BAR_WIDTH = 520.0
PAIR_ROW_HEIGHT = 40.0
PAIR_BAR_HEIGHT = 12.0
PAIR_BAR_GAP = 4.0
_RANK = {"pass": 0, "skipped": 1, "flaky": 1.5, "fail": 2, "error": 3}
# (key, label, unit): per-case metrics, in the order shown.
CASE_METRICS = (
    ("wall_ms", "Wall", "ms"),
    ("tool_calls", "Tool calls", ""),
    ("tokens_in", "Tokens in", ""),
    ("tokens_out", "Tokens out", ""),
    ("cost_usd", "Cost (USD)", "$"),
)
NO_SEQUENCE_NOTE = (
    "{side} has no tool sequence (written by an older trialrun, or without run.jsonl): "
    "promote the baseline again to compare sequences"
)


def comparison_view(
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    *,
    regression: Mapping[str, Any] | None,
    before_label: str,
    after_label: str,
    wall_threshold_pct: float,
    wall_threshold_ms: float,
) -> dict[str, Any]:
    """The page section comparing ``after`` with ``before``.

    ``regression``: ``compute_regression``'s block for the pair; its gates (thresholds and
    verdicts) are shown beside the run's metric deltas.
    """
    old, new = _cases(before), _cases(after)
    gates = _gates(regression)
    run_metrics = _run_metrics(before, after, old, new)
    for row in run_metrics:
        _attach_gate(row, gates, configured=regression is not None)
    common = sorted(old.keys() & new.keys())
    changes = [_case_change(old[i], new[i], wall_threshold_pct, wall_threshold_ms) for i in common]
    changed = [change for change in changes if change["reasons"]]
    for number, change in enumerate(changed, start=1):
        change["anchor"] = f"diff-{number}"
    return {
        "before_label": before_label,
        "after_label": after_label,
        "status_changes": _status_changes(old, new, common),
        "missing": sorted(old.keys() - new.keys()),
        "new": sorted(new.keys() - old.keys()),
        "gates": gates,
        "gates_passed": None if regression is None else bool(regression.get("passed")),
        "warnings": [str(w) for w in (regression or {}).get("warnings") or []],
        "run_metrics": pair_figure(run_metrics),
        "cases": changed,
        "unchanged": [change["id"] for change in changes if not change["reasons"]],
        "compared": len(common),
        "wall_threshold_pct": wall_threshold_pct,
        "wall_threshold_ms": wall_threshold_ms,
    }


def _cases(document: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    cases = document.get("cases")
    if not isinstance(cases, list):
        return {}
    return {str(c["id"]): c for c in cases if isinstance(c, Mapping) and "id" in c}


def _status_changes(
    old: Mapping[str, Mapping[str, Any]], new: Mapping[str, Mapping[str, Any]], ids: list[str]
) -> list[dict[str, str]]:
    """Cases whose status moved, the ones that got worse first."""
    changes = []
    for case_id in ids:
        was, now = str(old[case_id].get("status")), str(new[case_id].get("status"))
        if was == now:
            continue
        rank_was, rank_now = _RANK.get(was, 1), _RANK.get(now, 1)
        direction = "worse" if rank_now > rank_was else "better" if rank_now < rank_was else ""
        changes.append({"id": case_id, "before": was, "after": now, "direction": direction})
    order = {"worse": 0, "": 1, "better": 2}
    return sorted(changes, key=lambda c: (order[c["direction"]], c["id"]))


def _gates(regression: Mapping[str, Any] | None) -> list[dict[str, str]]:
    if regression is None:
        return []
    gates = []
    for check in regression.get("checks") or []:
        check_id = str(check.get("id"))
        gates.append(
            {
                "id": check_id,
                "status": str(check.get("status")),
                "threshold": _threshold_text(check_id, check.get("threshold")),
                "note": clean(str(check.get("note") or "")),
            }
        )
    return gates


def _attach_gate(row: dict[str, Any], gates: list[dict[str, str]], *, configured: bool) -> None:
    """The gate over ``row``'s metric: its threshold and verdict, or why there is none."""
    row["gate_text"], row["gate_status"] = "no gate", None
    if row["gate"] is None:
        return
    gate = next((g for g in gates if g["id"] == row["gate"]), None)
    if gate is None or gate["threshold"] == "not configured" or not configured:
        row["gate_text"] = f"{row['gate']} not configured"
        return
    row["gate_text"] = f"{row['gate']} {gate['threshold']}"
    row["gate_status"] = gate["status"]


def _threshold_text(check_id: str, threshold: Any) -> str:
    limit = as_number(threshold)
    if limit is None:
        return "not configured"
    if check_id == "min_pass_rate":
        return f"at least {limit:.1%}"
    if check_id in ("status_regressions", "pass_rate_regressions"):
        return f"at most {limit:g} cases"
    # RunLedger's wall gates compare a fraction: 0.2 allows 20% slower.
    return f"at most {limit:+.1%}"


def _run_metrics(
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    old: Mapping[str, Mapping[str, Any]],
    new: Mapping[str, Mapping[str, Any]],
) -> list[dict[str, Any]]:
    rows = [
        _metric("Pass rate", _pass_rate(before), _pass_rate(after), "%", gate="min_pass_rate"),
        _metric(
            "Avg wall",
            _wall_stat(before, "mean"),
            _wall_stat(after, "mean"),
            "ms",
            gate="max_avg_wall_ms_delta_pct",
        ),
        _metric(
            "p95 wall",
            _wall_stat(before, "p95"),
            _wall_stat(after, "p95"),
            "ms",
            gate="max_p95_wall_ms_delta_pct",
        ),
    ]
    for key, label, unit in CASE_METRICS[1:]:
        total = f"Total {label[0].lower()}{label[1:]}"
        rows.append(_metric(total, _total(old, key), _total(new, key), unit))
    if any(case.get("status") == "error" for case in new.values()):
        # A crashed case stops early: less time, fewer calls, tokens or cost are no saving then.
        for row in rows:
            if row["unit"] != "%" and row["direction"] == "better":
                row["direction"] = ""
    return rows


def _case_change(
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    wall_threshold_pct: float,
    wall_threshold_ms: float,
) -> dict[str, Any]:
    case_id = str(new.get("id"))
    reasons = []
    if old.get("status") != new.get("status"):
        reasons.append("status")
    sequence = sequence_view(old.get("tool_sequence"), new.get("tool_sequence"))
    if sequence["differs"]:
        reasons.append("tool sequence")
    metrics = [
        _metric(label, as_number(old.get(key)), as_number(new.get(key)), unit)
        for key, label, unit in CASE_METRICS
    ]
    for row, (key, _, _) in zip(metrics, CASE_METRICS, strict=True):
        if key == "wall_ms":
            if _wall_moved(row["before"], row["after"], wall_threshold_pct, wall_threshold_ms):
                reasons.append("wall time")
        elif row["before"] != row["after"]:
            reasons.append(key.replace("_usd", "").replace("_", " "))
    return {
        "id": case_id,
        "before": str(old.get("status")),
        "after": str(new.get("status")),
        "reasons": reasons,
        "sequence": sequence,
        "metrics": pair_figure(metrics),
    }


def _wall_moved(before: float | None, after: float | None, pct: float, ms: float) -> bool:
    """Both thresholds must be crossed, as ``trialrun diff`` reports wall changes."""
    if before is None or after is None:
        return False
    delta = abs(after - before)
    if delta == 0 or delta < ms:
        return False
    return before == 0 or delta * 100 / before > pct


def sequence_view(before: Any, after: Any) -> dict[str, Any]:
    """The two tool sequences aligned row by row (``same``, ``changed``, ``removed``, ``added``)."""
    notes = [
        NO_SEQUENCE_NOTE.format(side=side)
        for side, value in (("the baseline", before), ("this run", after))
        if not _is_names(value)
    ]
    if notes:
        return {"known": False, "differs": False, "rows": [], "notes": notes, "counts": {}}
    old, new = [str(n) for n in before], [str(n) for n in after]
    rows: list[dict[str, Any]] = []
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            rows += _same_rows(i1, i2, j1, old, new)
            continue
        kind = {"replace": "changed", "delete": "removed", "insert": "added"}[tag]
        for a, b in zip_longest(range(i1, i2), range(j1, j2)):
            # A replaced stretch of unequal lengths ends in plain removals or additions.
            row_kind = "removed" if b is None else "added" if a is None else kind
            rows.append(_pair_row(row_kind, a, b, old, new))
    counts = {k: sum(1 for r in rows if r["kind"] == k) for k in ("changed", "removed", "added")}
    shown = rows[:SEQUENCE_ROWS_MAX]
    if len(rows) > len(shown):
        notes.append(f"{len(rows) - len(shown):,} more aligned rows not shown")
    return {
        "known": True,
        "differs": old != new,
        "rows": shown,
        "notes": notes,
        "counts": counts,
        "before_count": len(old),
        "after_count": len(new),
    }


def _is_names(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(name, str) for name in value)


def _same_rows(
    i1: int, i2: int, j1: int, old: Sequence[str], new: Sequence[str]
) -> list[dict[str, Any]]:
    """Equal calls; a long run keeps its ends and folds its middle into one row."""
    pairs = [(i, j1 + (i - i1)) for i in range(i1, i2)]
    if len(pairs) <= 2 * SAME_RUN_KEPT + 1:
        return [_pair_row("same", a, b, old, new) for a, b in pairs]
    head, tail = pairs[:SAME_RUN_KEPT], pairs[-SAME_RUN_KEPT:]
    folded = len(pairs) - 2 * SAME_RUN_KEPT
    return [
        *(_pair_row("same", a, b, old, new) for a, b in head),
        {"kind": "folded", "text": f"{folded} more calls the same on both sides"},
        *(_pair_row("same", a, b, old, new) for a, b in tail),
    ]


def _pair_row(
    kind: str, a: int | None, b: int | None, old: Sequence[str], new: Sequence[str]
) -> dict[str, Any]:
    return {
        "kind": kind,
        "before_index": None if a is None else a + 1,
        "before": None if a is None else old[a],
        "after_index": None if b is None else b + 1,
        "after": None if b is None else new[b],
    }


def _metric(
    label: str, before: float | None, after: float | None, unit: str, *, gate: str | None = None
) -> dict[str, Any]:
    delta = None if before is None or after is None else after - before
    relative = None if delta is None or not before else delta / before
    return {
        "label": label,
        "unit": unit,
        "before": before,
        "after": after,
        "before_text": number_label(before, unit=unit),
        "after_text": number_label(after, unit=unit),
        "delta_text": _delta_text(delta, unit),
        "relative_text": "" if not relative else f"{relative:+.1%}",
        # Colour says better or worse: more of anything costs, except passing cases.
        "direction": "" if not delta else "better" if (delta > 0) == (unit == "%") else "worse",
        "gate": gate,
    }


def _delta_text(delta: float | None, unit: str) -> str:
    if delta is None:
        return "n/a"
    if delta == 0:
        return "no change"
    sign = "+" if delta > 0 else "-"
    if unit == "%":
        return f"{sign}{abs(delta) * 100:.1f} points"
    return sign + number_label(abs(delta), unit=unit)


def pair_figure(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Baseline and current bars per metric, each metric scaled to the larger of its two values.

    Metrics differ in unit, so each row has its own scale: the bars compare the two sides of one
    metric, never one metric with another.
    """
    figure_rows = []
    for number, row in enumerate(rows):
        largest = max(row["before"] or 0.0, row["after"] or 0.0)
        scale = Scale(span=largest or 1.0, width=PAIR_BAR_WIDTH)
        y = number * PAIR_ROW_HEIGHT
        figure_rows.append(
            {
                **row,
                "short_label": short_label(row["label"]),
                "label_y": round(y + PAIR_ROW_HEIGHT / 2 + 4, 2),
                "before_y": round(y + 4, 2),
                "after_y": round(y + 4 + PAIR_BAR_HEIGHT + PAIR_BAR_GAP, 2),
                "before_width": scale.length(row["before"] or 0.0),
                "after_width": scale.length(row["after"] or 0.0),
                "span": scale.span,
            }
        )
    return {
        "rows": figure_rows,
        "height": round(PAIR_ROW_HEIGHT * len(rows) + 4, 2),
        "bar_height": PAIR_BAR_HEIGHT,
        "x0": Scale(span=1.0).x0,
        "value_x": round(Scale(span=1.0).x0 + PAIR_BAR_WIDTH + 8, 2),
    }


def _pass_rate(document: Mapping[str, Any]) -> float | None:
    aggregates = document.get("aggregates")
    rate = as_number(aggregates.get("pass_rate")) if isinstance(aggregates, Mapping) else None
    if rate is not None:
        return rate
    statuses = [c.get("status") for c in _cases(document).values()]
    return statuses.count("pass") / len(statuses) if statuses else None


def _wall_stat(document: Mapping[str, Any], field: str) -> float | None:
    aggregates = document.get("aggregates")
    metrics = aggregates.get("metrics") if isinstance(aggregates, Mapping) else None
    wall = metrics.get("wall_ms") if isinstance(metrics, Mapping) else None
    return as_number(wall.get(field)) if isinstance(wall, Mapping) else None


def _total(cases: Mapping[str, Mapping[str, Any]], key: str) -> float | None:
    """The sum over the cases that reported ``key``; None when none did."""
    values = [v for v in (as_number(c.get(key)) for c in cases.values()) if v is not None]
    return sum(values) if values else None
