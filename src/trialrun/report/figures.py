"""Scales, ticks and number labels of the run report's figures (positions: ``report.svg``).

The figures are drawn by the templates (``templates/_figures.html.j2``) from plain numbers this
module computes, so every piece of text in them passes through jinja2's autoescaping like the
rest of the page, and tests can recompute each bar from the data it came from. Coordinates are
in the SVG's ``viewBox`` units (the figure scales to the page width) and rounded to 2 decimals.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from trialrun.report.svg import position

FIGURE_WIDTH = 960.0
"""viewBox width of every figure; the page scales it to its own width."""
LABEL_WIDTH = 200.0
"""Room left of the plot for row labels."""
RIGHT_MARGIN = 70.0
"""Room right of the plot for the value at a bar's end."""
PLOT_WIDTH = FIGURE_WIDTH - LABEL_WIDTH - RIGHT_MARGIN
MIN_BAR_WIDTH = 2.0
"""A call of 0.1 ms still shows as a sliver: a bar thinner than this would vanish."""
LABEL_CHARS_MAX = 30


@dataclass(frozen=True, slots=True)
class Scale:
    """Maps ``0..span`` of a quantity onto the plot, left to right."""

    span: float
    x0: float = LABEL_WIDTH
    width: float = PLOT_WIDTH

    def x(self, value: float) -> float:
        return round(self.x0 + position(value, 0.0, self.span, self.width), 2)

    def length(self, value: float, *, minimum: float = 0.0) -> float:
        return max(position(value, 0.0, self.span, self.width), minimum)


def scale_for(largest: float) -> Scale:
    """A scale whose span holds ``largest`` (a span of 1 when there is nothing to show)."""
    return Scale(span=largest if largest > 0 else 1.0)


def ticks(span: float, *, most: int = 6) -> list[float]:
    """Round values from 0 up to ``span`` at a 1-2-2.5-5 step; at most ``most`` of them."""
    if span <= 0:
        return [0.0]
    raw = span / max(most - 1, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    count = int(span // step + 1e-9)
    return [round(i * step, 6) for i in range(count + 1)]


def ms_label(ms: float) -> str:
    """``0 ms``, ``250 ms``, ``1.5 s``: seconds from 2 s up, where milliseconds get long."""
    if ms >= 2000:
        return f"{ms / 1000:.3g} s"
    if ms >= 10 or ms == 0:
        return f"{ms:,.0f} ms"
    return f"{ms:.2g} ms"


def number_label(value: float | None, *, unit: str = "") -> str:
    """A value as the figures and tables print it; ``n/a`` when it is unknown."""
    if value is None:
        return "n/a"
    if unit == "ms":
        return ms_label(value)
    if unit == "$":
        return f"${value:.4g}"
    if unit == "%":
        return f"{value:.1%}"
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.4g}"


def short_label(text: str, limit: int = LABEL_CHARS_MAX) -> str:
    """A row label cut to fit left of the plot (the full text goes in the row's tooltip)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def as_number(value: Any) -> float | None:
    """A JSON number as a float; None for anything else (booleans included)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)
