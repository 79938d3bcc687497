"""``trialrun run --last-failed`` / ``--failed-first`` (issue 33, item 4)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builders import call_cli, flaky_suite, make_shard_suite
from trialrun.running.sharding import ShardSpec, shard_case_ids

# make_shard_suite(…, 6): case_002 fails, case_004 crashes (error), the others pass.


@pytest.fixture
def suite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    made = make_shard_suite(tmp_path, "s", 6)
    monkeypatch.chdir(made)
    return made


def ran(out: Path) -> list[str]:
    """The case ids of the newest run under ``out``, in the order they started."""
    run_dir = max((out / "s").iterdir())
    events = (json.loads(line) for line in (run_dir / "run.jsonl").read_text().splitlines())
    return [event["case_id"] for event in events if event.get("type") == "task_start"]


def run(out: Path, capsys: pytest.CaptureFixture[str], *options: str) -> tuple[int, str]:
    code, _stdout, stderr = call_cli(
        ["run", ".", "--out", str(out), "-q", "-j", "1", *options], capsys
    )
    return code, stderr


def test_last_failed_runs_exactly_the_cases_that_failed_last_time(
    suite: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    code, stderr = run(out, capsys, "--last-failed")
    assert code == 1
    assert "--last-failed: no record of an earlier run; running all 6 cases" in stderr
    assert sorted(ran(out)) == [f"case_{n:03d}" for n in range(6)]
    code, stderr = run(out, capsys, "--last-failed")
    assert code == 1
    assert "--last-failed: running the 2 of 6 cases that failed last time" in stderr
    assert ran(out) == ["case_002", "case_004"]
    # case_002 is fixed: the next run still retries both, then only the one that still fails.
    case_file = suite / "cases" / "case_002.yaml"
    case_file.write_text(case_file.read_text().replace('"fail"', '"pass"'))
    assert run(out, capsys, "--last-failed")[0] == 1
    assert ran(out) == ["case_002", "case_004"]
    assert run(out, capsys, "--last-failed")[0] == 1
    assert ran(out) == ["case_004"]
    # --case selects first; --last-failed keeps the failed ones of those.
    assert run(out, capsys, "--last-failed", "--case", "case_000", "--case", "case_004")[0] == 1
    assert ran(out) == ["case_004"]
    code, stderr = run(out, capsys, "--last-failed", "--case", "case_000")
    assert code == 0
    assert (
        "--last-failed: none of the 1 selected cases failed last time; running them all" in stderr
    )
    assert ran(out) == ["case_000"]


def test_failed_first_runs_the_failed_cases_before_the_others(
    suite: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert run(out, capsys)[0] == 1
    assert ran(out) == [f"case_{n:03d}" for n in range(6)]
    code, stderr = run(out, capsys, "--failed-first")
    assert code == 1
    assert (
        "--failed-first: running the 2 cases that failed last time first, then the other 4"
        in stderr
    )
    assert ran(out) == ["case_002", "case_004", "case_000", "case_001", "case_003", "case_005"]


def test_a_shard_keeps_its_own_cases_and_remembers_only_them(
    suite: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert run(out, capsys)[0] == 1
    everything = [f"case_{n:03d}" for n in range(6)]
    failed = {"case_002", "case_004"}
    for index in (1, 2):
        spec = ShardSpec.parse(f"{index}/2")
        shard = shard_case_ids(everything, spec)
        run(out, capsys, "--shard", str(spec), "--last-failed")
        # The shard is chosen first (from the whole suite), then its failed cases.
        assert ran(out) == ([c for c in shard if c in failed] or shard)
    cache = json.loads((suite / ".trialrun_cache/lastfailed/suite.yaml.json").read_text())
    assert cache["failed"] == sorted(failed)


def test_a_cache_that_cannot_be_written_does_not_fail_the_run(
    suite: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (suite / ".trialrun_cache").write_text("in the way")
    code, stderr = run(tmp_path / "out", capsys, "--case", "case_000")
    assert code == 0
    assert (
        "warning: cannot write the last-failed cache .trialrun_cache/lastfailed/suite.yaml.json"
        in stderr
    )


def test_a_flaky_case_is_run_again_by_last_failed_and_first_by_failed_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # "wobbly" fails its runs 1 and 4 and passes the others; "steady" always passes. With
    # --retries 1, run 1 fails and its retry passes: flaky.
    root = tmp_path / "flaky"
    suite = flaky_suite(root, {"steady": {}, "wobbly": {"fail_on": [1, 4]}}, name="s")
    out = tmp_path / "out"
    cache = suite / ".trialrun_cache/lastfailed/suite.yaml.json"

    def statuses() -> dict[str, str]:
        summary = json.loads((max((out / "s").iterdir()) / "summary.json").read_text())
        return {case["id"]: case["status"] for case in summary["cases"]}

    def run_suite(*options: str) -> tuple[int, str]:
        code, _, stderr = call_cli(
            ["run", str(suite), "--out", str(out), "-q", "-j", "1", "--no-baseline", *options],
            capsys,
        )
        return code, stderr

    assert run_suite("--retries", "1")[0] == 1  # flaky: fail, the default
    assert statuses() == {"steady": "pass", "wobbly": "flaky"}
    assert json.loads(cache.read_text())["failed"] == ["wobbly"]
    code, stderr = run_suite("--last-failed")
    assert code == 0, stderr  # run 3 passes
    assert "--last-failed: running the 1 of 2 cases that failed last time" in stderr
    assert ran(out) == ["wobbly"]
    assert json.loads(cache.read_text())["failed"] == []  # passed plainly: off the list

    assert run_suite("--retries", "1")[0] == 1  # run 4 fails, run 5 passes: flaky again
    code, stderr = run_suite("--failed-first")
    assert code == 0, stderr
    assert "--failed-first: running the 1 case that failed last time first, then the other 1" in (
        stderr
    )
    assert ran(out) == ["wobbly", "steady"]
