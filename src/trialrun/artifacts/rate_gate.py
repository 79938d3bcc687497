"""The regression gate of cases run K times (``trialrun run --repeat K``): rates, not outcomes.

A case whose summary.json entry has ``runs`` and ``passes`` in both the baseline and the
current run (both run with ``--repeat``) is compared by its pass rate with its uncertainty:
it regressed when the Wilson 95% interval of its current rate lies entirely below the
baseline's (the current upper bound is below the baseline's lower bound). Such cases leave
``status_regressions``, which compares single outcomes, to this ``pass_rate_regressions`` check.
A baseline without rates (older, or promoted from a run without ``--repeat``) gates as before.

Why interval separation rather than a two-proportion test: it needs nothing but the intervals
the report already shows, a reader checks it by eye, and it is conservative (two 95%
intervals that do not overlap mean a difference well beyond 95% confidence), so an agent that
is merely as flaky as it was does not fail pull requests at random. The price: small drops go
unseen with few runs (9/9 -> 3/9 is a regression, 9/9 -> 4/9 is not); run more repeats to see
smaller ones.
"""

from __future__ import annotations

from typing import Any

from trialrun.base.proportions import Interval, wilson_interval

CHECK_ID = "pass_rate_regressions"


def rates_of(document: dict[str, Any]) -> dict[str, tuple[int, int]]:
    """``{case id: (passes, runs)}`` of the cases run with ``--repeat`` in a summary or baseline.

    Entries that do not have the shape (hand-edited, or another tool's) are left out: their
    case then gates on its status as any case without rates does.
    """
    found: dict[str, tuple[int, int]] = {}
    for case in document.get("cases") or []:
        if not isinstance(case, dict) or "pass_hat_k" not in case:
            continue
        passes, runs = case.get("passes"), case.get("runs")
        if (
            isinstance(passes, int)
            and not isinstance(passes, bool)
            and isinstance(runs, list)
            and 0 <= passes <= len(runs)
        ):
            found[str(case.get("id"))] = (passes, len(runs))
    return found


def rate_check(
    before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]
) -> dict[str, Any] | None:
    """The ``pass_rate_regressions`` check over the cases rated on both sides; None if none is."""
    both = sorted(before.keys() & after.keys())
    if not both:
        return None
    compared: list[dict[str, Any]] = []
    regressed: list[str] = []
    for case_id in both:
        old, new = _interval(*before[case_id]), _interval(*after[case_id])
        worse = new.high < old.low
        if worse:
            regressed.append(case_id)
        compared.append(
            {
                "id": case_id,
                "baseline": _side(before[case_id], old),
                "current": _side(after[case_id], new),
                "regressed": worse,
            }
        )
    check: dict[str, Any] = {
        "id": CHECK_ID,
        "status": "fail" if regressed else "pass",
        "threshold": 0,
        "baseline": None,
        "current": len(regressed),
        "cases": regressed,
        "compared": compared,
    }
    if regressed:
        check["note"] = "pass rate fell below the baseline's 95% interval: " + ", ".join(
            _change(entry) for entry in compared if entry["regressed"]
        )
    return check


def _interval(passes: int, runs: int) -> Interval:
    interval = wilson_interval(passes, runs)
    return interval if interval is not None else Interval(0.0, 1.0)  # no runs: knows nothing


def _side(counts: tuple[int, int], interval: Interval) -> dict[str, Any]:
    passes, runs = counts
    return {"passes": passes, "runs": runs, "interval": [interval.low, interval.high]}


def _change(entry: dict[str, Any]) -> str:
    def text(side: dict[str, Any]) -> str:
        low, high = side["interval"]
        return f"{side['passes']}/{side['runs']} ({low:.0%}-{high:.0%})"

    return f"{entry['id']} {text(entry['baseline'])} -> {text(entry['current'])}"
