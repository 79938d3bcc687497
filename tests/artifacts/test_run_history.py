"""Earlier runs read from the output folder for report.html's history strip (issue 33, item 5)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from builders import call_cli, make_shard_suite
from trialrun.artifacts import history
from trialrun.artifacts.history import past_runs


def write_run(suite_out: Path, run_id: str, statuses: dict[str, str]) -> None:
    folder = suite_out / run_id
    folder.mkdir(parents=True)
    document = {
        "run": {"started_at": f"{run_id}Z"},
        "cases": [{"id": case_id, "status": status} for case_id, status in statuses.items()],
    }
    (folder / "summary.json").write_text(json.dumps(document), encoding="utf-8")


def test_the_runs_before_this_one_oldest_first_unreadable_ones_skipped(tmp_path: Path) -> None:
    write_run(tmp_path, "20261201-000000-000001-aaaaaa", {"a": "pass", "b": "fail"})
    write_run(tmp_path, "20261202-000000-000001-aaaaaa", {"a": "flaky", "b": 3})  # type: ignore[dict-item]
    (tmp_path / "20261203-000000-000001-aaaaaa").mkdir()  # interrupted before its summary
    (tmp_path / "20261204-000000-000001-aaaaaa").mkdir()
    (tmp_path / "20261204-000000-000001-aaaaaa" / "summary.json").write_text("{broken")
    write_run(tmp_path, "20261205-000000-000001-aaaaaa", {"a": "pass"})  # this run
    write_run(tmp_path, "20261206-000000-000001-aaaaaa", {"a": "fail"})  # started after it
    (tmp_path / ".hidden").mkdir()
    (tmp_path / "notes.txt").write_text("x")
    found = past_runs(tmp_path, current="20261205-000000-000001-aaaaaa")
    assert [(run.run_id, dict(run.statuses)) for run in found] == [
        ("20261201-000000-000001-aaaaaa", {"a": "pass", "b": "fail"}),
        ("20261202-000000-000001-aaaaaa", {"a": "flaky", "b": "unknown"}),
    ]
    assert found[0].when == "20261201-000000-000001-aaaaaaZ"


def test_only_as_many_summaries_are_read_as_the_strip_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for day in range(1, 61):
        write_run(
            tmp_path, f"202612{day:02d}-000000-000001-aaaaaa"[:8] + f"-{day:06d}", {"a": "pass"}
        )
    read: list[Path] = []
    real = history._read

    def counting(path: Path, run_id: str) -> history.PastRun | None:
        read.append(path)
        return real(path, run_id)

    monkeypatch.setattr(history, "_read", counting)
    found = past_runs(tmp_path, current="99999999")
    assert len(found) == len(read) == 19
    assert [run.run_id for run in found] == sorted(p.name for p in tmp_path.iterdir())[-19:]


def test_a_missing_output_folder_has_no_history(tmp_path: Path) -> None:
    assert past_runs(tmp_path / "nothing", current="x") == []


def test_the_report_shows_each_case_strip_after_the_first_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    suite = make_shard_suite(tmp_path, "s", 3)  # case_002 fails
    monkeypatch.chdir(suite)
    out = tmp_path / "out"
    argv = ["run", ".", "--out", str(out), "-q", "--case", "case_000", "--case", "case_002"]
    pages = []
    for _ in range(3):
        assert call_cli(argv).code == 1
        newest = max((out / "s").iterdir())
        pages.append((newest / "report.html").read_text(encoding="utf-8"))
    assert "History (oldest to newest)" not in pages[0]
    strips = re.findall(
        r'<span class="history" [^>]*>(.*?)</span></td><td class="num">([^<]*)<', pages[2]
    )
    assert len(strips) == 2
    (passing, rate_pass), (failing, rate_fail) = strips
    assert passing.count('class="hcell hs-pass"') == 3 and rate_pass == "0%"
    assert failing.count('class="hcell hs-fail"') == 3 and rate_fail == "0%"
    first = min((out / "s").iterdir()).name
    assert f'title="pass · run {first} · ' in passing
