"""The figures of a compare's report.html, as numbers the template draws: bars, dots, whiskers.

Each figure is read from the receipt as written (``comparisons``, ``arm_scores``, ``case_runs``,
``efficiency``) and labelled as the printed report labels it (``compare.report.fixed``,
``stats.format_net_lift``, ``stats.format_sign_p``), so the page and receipt.json never disagree.
Lengths are SVG units: a W / L / T bar is ``BAR_WIDTH`` long, the net-lift axis (-1 to +1) and the
arm axis (0 to 1) ``AXIS_WIDTH``, and the largest efficiency bar ``EFFICIENCY_BAR_WIDTH``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from trialrun.compare.outcome import arm_sort_key
from trialrun.compare.report import fixed
from trialrun.compare.stats import Record, format_net_lift, format_sign_p
from trialrun.report.svg import Segment, bar_length, position, stack

__all__ = [
    "AXIS_WIDTH",
    "BAR_WIDTH",
    "EFFICIENCY_BAR_WIDTH",
    "arm_marks",
    "axis_tick",
    "band_marks",
    "comparison_figure",
    "comparisons_of",
    "efficiency_bars",
]

BAR_WIDTH = 480.0
"""Length of a W / L / T bar in SVG units: each outcome's segment is its share of it."""
AXIS_WIDTH = 480.0
"""Length of the net-lift axis (-1 to +1) and of the arm axis (0 to 1)."""
EFFICIENCY_BAR_WIDTH = 180.0
"""Length of the largest arm's efficiency bar; the others are in proportion."""
BAND = 1 / 3
"""The verdict bands of net lift against the baseline (``stats.verdict_band``)."""
_OUTCOMES = (("win", "W"), ("loss", "L"), ("tie", "T"))
_EFFICIENCY = (("turns", "turns"), ("duration_ms", "seconds"), ("cost_usd", "dollars"))


# ---- per opponent: the W / L / T bar and net lift ---------------------------------------------


def comparisons_of(receipt: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    return list((receipt.get("comparisons") or {}).items())


def comparison_figure(
    name: str, data: Mapping[str, Any], receipt: Mapping[str, Any]
) -> dict[str, Any]:
    record = Record(wins=data["win"], losses=data["loss"], ties=data["tie"])
    segments = stack([(key, data[key]) for key, _ in _OUTCOMES], BAR_WIDTH)
    interval = data.get("net_lift_ci95")
    judge = data.get("judge") or {}
    return {
        "name": name,
        "opponent": name.removeprefix("candidate-vs-"),
        "total": record.total,
        "segments": [_segment_view(segment) for segment in segments],
        "counts_text": f"{record.wins}W / {record.losses}L / {record.ties}T",
        "net_lift": data["net_lift"],
        "net_lift_text": format_net_lift(record),
        "net_lift_x": position(data["net_lift"], -1.0, 1.0, AXIS_WIDTH),
        "interval": None if interval is None else _interval_view(interval, -1.0, 1.0, signed=True),
        "sign_p": data["sign_p"],
        "sign_p_text": format_sign_p(data["sign_p"]),
        "pinned": bool(receipt.get("sign_p_pinned")),
        "judge": {
            "judged": judge.get("judged", 0),
            "agreed": judge.get("agreed", 0),
            "split": judge.get("split", 0),
            "failed": sum((judge.get("failures") or {}).values()),
        },
    }


def _segment_view(segment: Segment) -> dict[str, Any]:
    letter = dict(_OUTCOMES)[segment.key]
    return {
        "key": segment.key,
        "count": segment.count,
        "x": segment.x,
        "width": segment.width,
        "label": f"{segment.count}{letter}",
        # A label only where it fits: the legend beside the bar names every count anyway.
        "labelled": segment.width >= 28,
        "middle": round(segment.x + segment.width / 2, 2),
    }


def _interval_view(
    interval: Sequence[float], low: float, high: float, *, signed: bool = False
) -> dict[str, Any]:
    lower, upper = float(interval[0]), float(interval[1])
    return {
        "low": lower,
        "high": upper,
        "x1": position(lower, low, high, AXIS_WIDTH),
        "x2": position(upper, low, high, AXIS_WIDTH),
        "text": f"[{_signed(lower, signed)}, {_signed(upper, signed)}]",
    }


def _signed(value: float, signed: bool) -> str:
    text = fixed(value, 2)
    return text if not signed or text.startswith("-") else f"+{text}"


def band_marks() -> list[dict[str, Any]]:
    """Ticks of the net-lift axis: the verdict bands at -1/3 and +1/3, zero and both ends."""
    marks = [(-1.0, "-100%"), (-BAND, "-33%"), (0.0, "0"), (BAND, "+33%"), (1.0, "+100%")]
    return [
        {"x": position(value, -1.0, 1.0, AXIS_WIDTH), "label": label, "band": abs(value) == BAND}
        for value, label in marks
    ]


def axis_tick(value: float, low: float, high: float) -> dict[str, Any]:
    return {"x": position(value, low, high, AXIS_WIDTH), "label": fixed(value, 2)}


# ---- per arm: scores, case-runs passed, efficiency --------------------------------------------


def _arm_names(receipt: Mapping[str, Any]) -> list[str]:
    names = set(receipt.get("arm_scores") or {}) | set(receipt.get("case_runs") or {})
    return sorted(names, key=arm_sort_key)


def arm_marks(receipt: Mapping[str, Any]) -> list[dict[str, Any]]:
    scores = receipt.get("arm_scores") or {}
    runs = receipt.get("case_runs") or {}
    marks = []
    for arm in _arm_names(receipt):
        score = scores.get(arm)
        tally = runs.get(arm) or {}
        total = tally.get("total", 0)
        passed = tally.get("passed", 0)
        interval = tally.get("ci95")
        marks.append(
            {
                "arm": arm,
                "score": score,
                "score_text": "n/a" if score is None else fixed(score, 2),
                "score_x": None if score is None else position(score, 0.0, 1.0, AXIS_WIDTH),
                "passed": passed,
                "total": total,
                "runs_text": f"{passed}/{total}" if total else "n/a",
                "runs_x": position(passed / total, 0.0, 1.0, AXIS_WIDTH) if total else None,
                "interval": None if interval is None else _interval_view(interval, 0.0, 1.0),
            }
        )
    return marks


def efficiency_bars(receipt: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One block per metric any arm reported: each arm's mean as a bar, the largest full length."""
    means = receipt.get("efficiency") or {}
    arms = sorted(means, key=arm_sort_key)
    blocks = []
    for key, label in _EFFICIENCY:
        values = {arm: means[arm].get(key) for arm in arms}
        present = [value for value in values.values() if value is not None]
        if not present:
            continue
        largest = max(present)
        bars = [
            {
                "arm": arm,
                "value": value,
                "text": _efficiency_text(key, value),
                "width": bar_length(value, largest, EFFICIENCY_BAR_WIDTH),
                "samples": means[arm].get("samples", 0),
            }
            for arm, value in values.items()
        ]
        blocks.append({"metric": key, "label": label, "bars": bars})
    return blocks


def _efficiency_text(key: str, value: float | None) -> str:
    """As the printed report words it: ``5.0 turns``, ``41.2s``, ``$0.25``."""
    if value is None:
        return "n/a"
    if key == "turns":
        return f"{fixed(value, 1)} turns"
    if key == "duration_ms":
        return f"{fixed(value / 1000, 1)}s"
    return f"${fixed(value, 2)}"
