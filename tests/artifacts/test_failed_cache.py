"""The last-failed cache: what it keeps across runs, and that it never fails one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trialrun.artifacts.failed_cache import (
    cache_file,
    read_failed,
    record_failures,
    select_by_failures,
)

IDS = ["a", "b", "c", "d"]


def record(suite_file: Path, outcomes: list[tuple[str, str]]) -> list[str]:
    warnings: list[str] = []
    record_failures(suite_file, outcomes, warn=warnings.append)
    return warnings


def test_a_run_updates_only_the_cases_it_ran(tmp_path: Path) -> None:
    suite_file = tmp_path / "suite.yaml"
    assert read_failed(suite_file) is None
    assert record(suite_file, [("a", "fail"), ("b", "error"), ("c", "pass")]) == []
    assert read_failed(suite_file) == {"a", "b"}
    # A run of some cases (--case, a shard): the others keep what they had.
    record(suite_file, [("a", "pass"), ("d", "fail")])
    assert read_failed(suite_file) == {"b", "d"}
    # A flaky case (passed and failed) is one to run again; any other status is not a failure.
    record(suite_file, [("b", "flaky"), ("d", "something new")])
    assert read_failed(suite_file) == {"b"}
    record(suite_file, [("b", "pass")])
    assert read_failed(suite_file) == set()
    assert json.loads(cache_file(suite_file).read_text()) == {"schema_version": 1, "failed": []}


def test_the_cache_is_beside_the_suite_file_and_ignored_by_git(tmp_path: Path) -> None:
    suite_file = tmp_path / "smoke.yml"
    record(suite_file, [("a", "fail")])
    assert cache_file(suite_file) == tmp_path / ".trialrun_cache" / "lastfailed" / "smoke.yml.json"
    assert (tmp_path / ".trialrun_cache" / ".gitignore").read_text().splitlines()[-1] == "*"
    assert not list(cache_file(suite_file).parent.glob(".*.tmp"))


def test_a_cache_that_cannot_be_written_is_a_warning(tmp_path: Path) -> None:
    suite_file = tmp_path / "suite.yaml"
    # A file where the folder should be: refused for root too, unlike a read-only mode.
    (tmp_path / ".trialrun_cache").write_text("not a folder")
    (warning,) = record(suite_file, [("a", "fail")])
    assert warning.startswith("warning: cannot write the last-failed cache ")
    assert warning.endswith("--last-failed and --failed-first will not know this run")
    assert read_failed(suite_file) is None


@pytest.mark.parametrize("text", ["{", "[]", '{"failed": "a"}', "\xff"])
def test_an_unreadable_cache_counts_as_none(tmp_path: Path, text: str) -> None:
    suite_file = tmp_path / "suite.yaml"
    cache_file(suite_file).parent.mkdir(parents=True)
    cache_file(suite_file).write_text(text, encoding="latin-1")
    assert read_failed(suite_file) is None
    record(suite_file, [("a", "fail")])
    assert read_failed(suite_file) == {"a"}


def test_last_failed_keeps_the_failed_cases_in_suite_order() -> None:
    chosen, note = select_by_failures(IDS, str, frozenset({"d", "b", "gone"}), only_failed=True)
    assert chosen == ["b", "d"]
    assert note == "--last-failed: running the 2 of 4 cases that failed last time"


def test_failed_first_runs_them_first_then_the_others() -> None:
    chosen, note = select_by_failures(IDS, str, frozenset({"d", "b"}), only_failed=False)
    assert chosen == ["b", "d", "a", "c"]
    assert note == (
        "--failed-first: running the 2 cases that failed last time first, then the other 2"
    )


@pytest.mark.parametrize("only_failed", [True, False])
def test_without_a_record_or_a_failure_every_case_runs(only_failed: bool) -> None:
    option = "--last-failed" if only_failed else "--failed-first"
    chosen, note = select_by_failures(IDS, str, None, only_failed=only_failed)
    assert (chosen, note) == (IDS, f"{option}: no record of an earlier run; running all 4 cases")
    chosen, note = select_by_failures(IDS, str, frozenset({"x"}), only_failed=only_failed)
    assert chosen == IDS
    assert note == f"{option}: none of the 4 selected cases failed last time; running them all"
