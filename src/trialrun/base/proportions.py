"""Intervals for a rate observed as successes out of trials, shared by the run and compare sides.

``trialrun compare`` reports Wilson intervals for its judges and selectors; ``trialrun run
--repeat K`` reports one for each case's pass rate, and its baseline gate compares them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

Z_95 = NormalDist().inv_cdf(0.975)  # 1.959963984540054


@dataclass(frozen=True)
class Interval:
    low: float
    high: float

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high


def wilson_interval(successes: int, total: int, *, z: float = Z_95) -> Interval | None:
    """Wilson score interval for the rate ``successes / total``; None when ``total`` is 0:
    center = (p + z^2/2n) / (1 + z^2/n); half = z / (1 + z^2/n) * sqrt(p(1-p)/n + z^2/4n^2).
    """
    if total < 0 or not 0 <= successes <= total:
        raise ValueError(f"expected 0 <= successes <= total, found {successes} of {total}")
    if total == 0:
        return None
    rate = successes / total
    z2 = z * z
    scale = 1 + z2 / total
    center = (rate + z2 / (2 * total)) / scale
    half = z / scale * math.sqrt(rate * (1 - rate) / total + z2 / (4 * total * total))
    # At 0/n and n/n the exact bound is the rate itself; floats can land a hair beyond it.
    return Interval(max(0.0, min(rate, center - half)), min(1.0, max(rate, center + half)))
