"""The history strip and flake rate of report.html (issue 33, item 5)."""

from __future__ import annotations

import pytest

from trialrun.report.history_view import PastRun, case_history, flake_rate


@pytest.mark.parametrize(
    ("statuses", "rate"),
    [
        ([], None),
        (["fail"], None),
        (["fail", "fail", "fail"], 0.0),
        (["pass", "fail", "pass", "fail", "pass"], 1.0),
        (["pass", "pass", "fail", "fail", "pass"], 0.5),
        (["pass", "flaky"], 1.0),
    ],
)
def test_the_flake_rate_is_the_share_of_status_changes(
    statuses: list[str], rate: float | None
) -> None:
    assert flake_rate(statuses) == rate


def test_the_strip_ends_with_this_run_and_shows_the_last_twenty() -> None:
    past = [PastRun(f"r{n:02d}", f"day {n}", {"a": "pass" if n % 2 else "fail"}) for n in range(30)]
    past.append(PastRun("r30", "", {"other": "pass"}))  # a run without the case: no cell
    view = case_history("a", "weird", past, run_id="now", when="today")
    cells = view["cells"]
    assert len(cells) == view["runs"] == 20
    assert [cell["title"] for cell in cells[:2]] == [
        "pass · run r11 · day 11",
        "fail · run r12 · day 12",
    ]
    assert cells[-1] == {"status": "weird", "css": "other", "title": "weird · run now · today"}
    assert {cell["css"] for cell in cells[:-1]} == {"pass", "fail"}
    assert view["flake_rate"] == "100%"


def test_a_case_new_in_this_run_has_one_cell_and_no_rate() -> None:
    view = case_history("new", "flaky", [PastRun("r1", "", {"a": "pass"})], run_id="now", when="")
    assert view == {
        "cells": [{"status": "flaky", "css": "flaky", "title": "flaky · run now"}],
        "flake_rate": None,
        "runs": 1,
    }
