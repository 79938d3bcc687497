"""Geometry of the inline SVG figures of the HTML reports: numbers in, coordinates out.

The templates draw the shapes (jinja2 autoescapes every attribute), so nothing here builds
markup: these functions only map data to positions. That keeps each bar's length a plain number
a test can check against the figure it was drawn from. Coordinates are rounded to two decimals,
well under a pixel, so the page stays small and reads the same on every platform.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Segment", "bar_length", "position", "stack"]

_PLACES = 2


@dataclass(frozen=True)
class Segment:
    """One part of a stacked bar: what it counts, how many, where it starts and how wide it is."""

    key: str
    count: int
    x: float
    width: float


def position(value: float, low: float, high: float, length: float) -> float:
    """Where ``value`` sits on an axis from ``low`` (at 0) to ``high`` (at ``length``), clamped."""
    if not high > low:
        raise ValueError(f"expected low < high, found {low} and {high}")
    share = (min(max(value, low), high) - low) / (high - low)
    return round(share * length, _PLACES)


def bar_length(value: float | None, largest: float | None, length: float) -> float:
    """A bar for ``value`` when the largest of its row fills ``length``; 0 when nothing to show."""
    if value is None or largest is None or not largest > 0 or not math.isfinite(value):
        return 0.0
    return round(max(value, 0.0) / largest * length, _PLACES)


def stack(counts: Sequence[tuple[str, int]], length: float) -> list[Segment]:
    """Segments side by side over ``length``, each as wide as its share of the total count.

    Each segment starts where the exact running share puts it (not after the rounded widths of
    the ones before), so rounding never adds up and the last segment ends at ``length``.
    """
    total = sum(count for _, count in counts)
    segments: list[Segment] = []
    running = 0
    for key, count in counts:
        if count < 0:
            raise ValueError(f"expected counts >= 0, found {key}={count}")
        start = running / total * length if total else 0.0
        running += count
        end = running / total * length if total else 0.0
        x = round(start, _PLACES)
        segments.append(Segment(key, count, x, round(round(end, _PLACES) - x, _PLACES)))
    return segments
