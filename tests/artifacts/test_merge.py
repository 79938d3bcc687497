"""``trialrun merge``: three shards of a generated 50-case suite give the unsharded verdict.

The shards are real ``trialrun run --shard I/N`` subprocesses.
"""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from builders import make_shard_suite as make_suite
from builders import only_run_dir, run_shard, run_trialrun
from trialrun.artifacts.merge import MergeError, merge_runs
from trialrun.receipt.schema import schema_problems
from trialrun.receipt.verify import verify_receipt
from trialrun.running.sharding import ShardSpec

CASES = 50
SHARDS = 3


def write_baseline(path: Path, case_ids: list[str]) -> Path:
    # Every case passed in the baseline: each failing case is then a status regression.
    document = {
        "schema_version": 1,
        "runledger_version": "0.2.3",
        "run": {"mode": "replay", "exit_status": "success"},
        "aggregates": {"pass_rate": 1.0},
        "cases": [{"id": case_id, "status": "pass"} for case_id in case_ids],
    }
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("merge")
    suite = make_suite(root, "gen", CASES)
    case_ids = [f"case_{n:03d}" for n in range(CASES)]
    baseline = write_baseline(root / "baseline.json", case_ids)
    full = run_trialrun(
        "run", suite, "--out", root / "full", "--baseline", baseline, "-j", "4", cwd=suite
    )
    shards = [
        run_shard(suite, ShardSpec(i, SHARDS), root / f"shard{i}", case_ids)
        for i in range(1, SHARDS + 1)
    ]
    merged = run_trialrun(
        "merge", *shards, "--out", root / "merged", "--baseline", baseline, cwd=suite
    )
    return {
        "root": root,
        "suite": suite,
        "case_ids": case_ids,
        "baseline": baseline,
        "full": full,
        "full_dir": only_run_dir(root / "full"),
        "shards": shards,
        "merged": merged,
        "merged_dir": only_run_dir(root / "merged"),
    }


def load(run_dir: Path, name: str = "summary.json") -> Any:
    return json.loads((run_dir / name).read_text(encoding="utf-8"))


def junit_cases(run_dir: Path) -> dict[str, str | None]:
    root = ET.parse(run_dir / "junit.xml").getroot()
    found: dict[str, str | None] = {}
    for case in root.iter("testcase"):
        reason = case.find("failure")
        reason = case.find("error") if reason is None else reason
        found[case.get("name", "")] = (
            None if reason is None else f"{reason.tag}:{reason.get('type')}"
        )
    return found


def test_merged_run_gives_the_unsharded_verdict(runs: dict[str, Any]) -> None:
    full, merged = load(runs["full_dir"]), load(runs["merged_dir"])
    assert runs["full"].returncode == 1 and runs["merged"].returncode == 1, runs["merged"].stderr
    statuses = {case["id"]: case["status"] for case in merged["cases"]}
    assert statuses == {case["id"]: case["status"] for case in full["cases"]}
    assert set(statuses.values()) == {"pass", "fail", "error"}
    assert [case["id"] for case in merged["cases"]] == runs["case_ids"]
    for key in ("cases_total", "cases_pass", "cases_fail", "cases_error", "pass_rate"):
        assert merged["aggregates"][key] == full["aggregates"][key]
    assert (
        merged["aggregates"]["metrics"]["tool_calls"] == full["aggregates"]["metrics"]["tool_calls"]
    )
    assert merged["run"]["exit_status"] == full["run"]["exit_status"] == "error"
    assert merged["policy_snapshot"] == full["policy_snapshot"]


def test_merged_junit_has_the_same_testcases_and_kinds(runs: dict[str, Any]) -> None:
    merged = junit_cases(runs["merged_dir"])
    assert merged == junit_cases(runs["full_dir"])
    assert len(merged) == CASES
    root = ET.parse(runs["merged_dir"] / "junit.xml").getroot()
    assert root.get("tests") == str(CASES)
    kinds = list(merged.values())
    assert root.get("failures") == str(sum(1 for k in kinds if k and k.startswith("failure")))
    assert root.get("errors") == str(sum(1 for k in kinds if k and k.startswith("error")))
    assert "expected:" in (runs["merged_dir"] / "junit.xml").read_text(encoding="utf-8")


def test_merged_gates_equal_the_unsharded_gates(runs: dict[str, Any]) -> None:
    def gates(summary: dict[str, Any]) -> list[tuple[str, str]]:
        return [(check["id"], check["status"]) for check in summary["regression"]["checks"]]

    full, merged = load(runs["full_dir"]), load(runs["merged_dir"])
    assert gates(merged) == gates(full)
    assert ("status_regressions", "fail") in gates(merged)
    assert merged["regression"]["passed"] is full["regression"]["passed"] is False
    assert merged["regression"]["case_diffs"] == full["regression"]["case_diffs"]


def test_merged_event_log_is_every_shard_line_in_case_order(runs: dict[str, Any]) -> None:
    merged_lines = (runs["merged_dir"] / "run.jsonl").read_text(encoding="utf-8").splitlines()
    shard_lines = [
        line
        for shard in runs["shards"]
        for line in (shard / "run.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    assert sorted(merged_lines) == sorted(shard_lines)
    order = [json.loads(line)["case_id"] for line in merged_lines]
    assert order == sorted(order)


def test_merged_receipt_verifies_and_names_each_shard(runs: dict[str, Any]) -> None:
    receipt = runs["merged_dir"] / "receipt.jsonl"
    assert verify_receipt(receipt).ok
    for written in [receipt, *(shard / "receipt.jsonl" for shard in runs["shards"])]:
        assert schema_problems(written) == []
    events = [json.loads(line) for line in receipt.read_text(encoding="utf-8").splitlines()]
    assert events[0]["type"] == "run_start" and events[0]["data"]["merge"]["shards"] == SHARDS
    assert "trialrun merge" in events[0]["data"]["verifyCommand"]
    shard_events = [e["data"] for e in events if e["type"] == "shard"]
    assert [e["index"] for e in shard_events] == [1, 2, 3]
    for data, shard in zip(shard_events, runs["shards"], strict=True):
        result = verify_receipt(shard / "receipt.jsonl")
        assert (data["lastHash"], data["eventCount"]) == (result.last_hash, result.event_count)
    end = events[-1]
    assert end["type"] == "run_end" and end["data"]["verified"] is False
    assert end["data"]["cases"]["total"] == CASES


def test_merge_prints_the_console_report_and_writes_the_html(runs: dict[str, Any]) -> None:
    stdout = runs["merged"].stdout
    assert "trialrun results: gen" in stdout and "Gate failures" in stdout
    assert "Merged 3 shards into:" in stdout
    page = (runs["merged_dir"] / "report.html").read_text(encoding="utf-8")
    assert all(case_id in page for case_id in runs["case_ids"])
    assert "agent blew up" in page


def test_merge_without_baseline_exits_on_the_cases_alone(
    runs: dict[str, Any], tmp_path: Path
) -> None:
    outcome = merge_runs(runs["shards"], tmp_path / "out", baseline=None)
    assert outcome.regression is None and "regression" not in outcome.summary
    assert not outcome.passed
    assert outcome.summary["merge"]["shard_count"] == SHARDS


def test_a_missing_shard_fails_the_merge(runs: dict[str, Any], tmp_path: Path) -> None:
    proc = run_trialrun("merge", *runs["shards"][:2], "--out", tmp_path, cwd=tmp_path)
    assert proc.returncode == 2
    assert "missing shard 3/3" in proc.stderr
    assert not any(tmp_path.iterdir())


def test_a_duplicate_shard_fails_the_merge(runs: dict[str, Any], tmp_path: Path) -> None:
    with pytest.raises(MergeError, match="duplicate shard 2/3"):
        merge_runs([*runs["shards"], runs["shards"][1]], tmp_path, baseline=None)


def test_overlapping_cases_fail_the_merge(runs: dict[str, Any], tmp_path: Path) -> None:
    # Shard 1's results presented again as shard 2: every case of it would count twice.
    relabelled = copy_run(runs["shards"][0], tmp_path / "relabelled")
    edit_summary(relabelled, lambda s: s["shard"].update(index=2))
    with pytest.raises(MergeError, match=r"appears in shard 1 .* and shard 2"):
        merge_runs([runs["shards"][0], relabelled, runs["shards"][2]], tmp_path, baseline=None)


def test_shards_of_another_suite_fail_the_merge(runs: dict[str, Any], tmp_path: Path) -> None:
    other = make_suite(tmp_path, "other", 6)
    ids = [f"case_{n:03d}" for n in range(6)]
    foreign = run_shard(other, ShardSpec(3, SHARDS), tmp_path / "out", ids)
    with pytest.raises(MergeError, match="same suite name"):
        merge_runs([*runs["shards"][:2], foreign], tmp_path / "merged", baseline=None)


def test_a_run_without_a_shard_block_is_refused(runs: dict[str, Any], tmp_path: Path) -> None:
    with pytest.raises(MergeError, match="expected a 'shard' block"):
        merge_runs([runs["full_dir"]], tmp_path, baseline=None)


def test_a_tampered_shard_receipt_fails_the_merge(runs: dict[str, Any], tmp_path: Path) -> None:
    tampered = copy_run(runs["shards"][1], tmp_path / "tampered")
    receipt = tampered / "receipt.jsonl"
    receipt.write_text(
        receipt.read_text(encoding="utf-8").replace('"status":"fail"', '"status":"pass"', 1),
        encoding="utf-8",
    )
    proc = run_trialrun(
        "merge",
        runs["shards"][0],
        tampered,
        runs["shards"][2],
        "--out",
        tmp_path / "o",
        cwd=tmp_path,
    )
    assert proc.returncode == 2
    assert "does not verify (hash_mismatch" in proc.stderr


def test_a_summary_changed_after_the_run_fails_the_merge(
    runs: dict[str, Any], tmp_path: Path
) -> None:
    tampered = copy_run(runs["shards"][0], tmp_path / "tampered")

    def flip_a_failure(summary: dict[str, Any]) -> None:
        case = next(c for c in summary["cases"] if c["status"] != "pass")
        case["status"] = "pass"

    edit_summary(tampered, flip_a_failure)
    with pytest.raises(MergeError, match="the summary was changed after the run"):
        merge_runs([tampered, *runs["shards"][1:]], tmp_path / "o", baseline=None)


def test_an_event_log_changed_after_the_run_fails_the_merge(
    runs: dict[str, Any], tmp_path: Path
) -> None:
    tampered = copy_run(runs["shards"][2], tmp_path / "tampered")
    log = tampered / "run.jsonl"
    log.write_text(log.read_text(encoding="utf-8").replace('"n":', '"n": ', 1), encoding="utf-8")
    with pytest.raises(MergeError, match=r"run\.jsonl was changed after the run"):
        merge_runs([*runs["shards"][:2], tampered], tmp_path / "o", baseline=None)


def test_a_missing_baseline_file_is_refused_before_anything_is_read(tmp_path: Path) -> None:
    proc = run_trialrun(
        "merge",
        tmp_path / "nope",
        "--out",
        tmp_path / "o",
        "--baseline",
        tmp_path / "b.json",
        cwd=tmp_path,
    )
    assert proc.returncode == 2
    assert "baseline file not found" in proc.stderr


def test_a_directory_without_summary_is_refused(tmp_path: Path) -> None:
    with pytest.raises(MergeError, match=r"expected a run directory holding summary\.json"):
        merge_runs([tmp_path], tmp_path / "o", baseline=None)


def copy_run(run_dir: Path, target: Path) -> Path:
    shutil.copytree(run_dir, target)
    return target


def edit_summary(run_dir: Path, change: Any) -> None:
    summary = load(run_dir)
    change(summary)
    (run_dir / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
