"""report.html's history strip: each case's status over the last runs, and its flake rate.

The runs come from the output folder (``artifacts.history`` reads their summary.json files);
this module only turns them into what the page shows. The flake rate is the fraction of status
changes between consecutive runs of the case in the window: a case that always fails has a rate
of 0 (it is broken, not flaky), one that alternates pass and fail has a rate of 1. Any status
string is accepted (a ``flaky`` status, or one a later trialrun adds); the ones the page knows
get their colour, the others a neutral one.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

HISTORY_WINDOW = 20
"""Runs in a strip, this one included."""

KNOWN_STATUSES = frozenset({"pass", "fail", "error", "flaky"})


@dataclass(frozen=True)
class PastRun:
    """One earlier run of the suite, as its summary.json tells it."""

    run_id: str
    when: str
    """summary.json's ``run.started_at`` (ISO 8601), or "" when it has none."""
    statuses: Mapping[str, str]
    """Case id -> status."""


def flake_rate(statuses: Sequence[str]) -> float | None:
    """Status changes between consecutive runs over the number of pairs; None under two runs."""
    if len(statuses) < 2:
        return None
    changes = sum(1 for before, after in itertools.pairwise(statuses) if before != after)
    return changes / (len(statuses) - 1)


def case_history(
    case_id: str, status: str, past: Sequence[PastRun], *, run_id: str, when: str
) -> dict[str, Any]:
    """The strip of ``case_id`` (oldest to newest, this run last) and its flake rate.

    ``past``: the earlier runs, oldest first; the ones that did not run the case are left out.
    """
    runs = [
        (run.run_id, run.when, run.statuses[case_id]) for run in past if case_id in run.statuses
    ]
    runs = [*runs, (run_id, when, status)][-HISTORY_WINDOW:]
    rate = flake_rate([found for _, _, found in runs])
    return {
        "cells": [
            {
                "status": found,
                "css": found if found in KNOWN_STATUSES else "other",
                "title": f"{found} · run {rid}" + (f" · {at}" if at else ""),
            }
            for rid, at, found in runs
        ],
        "flake_rate": None if rate is None else f"{rate:.0%}",
        "runs": len(runs),
    }
