"""``trialrun merge`` of shards run with ``--repeat K`` or ``--retries N``: the merged run gives
what the suite run whole gives (statuses, each run, pass rates, flaky, the verdict).

The agent is ``tests/agents/flaky_agent.py``: it fails on the run numbers its case lists, so
the suite run whole and the same suite run in 2 shards (each in a folder of its own, with its
own run counters) see the very same outcomes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from builders import call_cli, flaky_suite, only_run_dir
from trialrun.receipt.verify import verify_receipt
from trialrun.running.sharding import ShardSpec, shard_case_ids

# case id -> the run numbers on which it fails ("crash" ones exit 3: an error)
CASES: dict[str, dict[str, list[int]]] = {
    "steady": {},
    "steady_too": {},
    "wobbly": {"fail_on": [1]},
    "wobbly_late": {"fail_on": [2]},
    "broken": {"fail_on": list(range(1, 10))},
    "crashy": {"crash_on": [1]},
}
KEPT = ("id", "status", "runs", "passes", "pass_rate", "pass_rate_interval", "pass_hat_k",
        "retries", "blocking", "failure_kind", "min_case_pass_rate")  # fmt: skip


def comparable(run_dir: Path) -> dict[str, Any]:
    """What must agree between the whole run and the merge: no timings, ids or paths."""
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    cases = {}
    for case in summary["cases"]:
        kept = {key: case[key] for key in KEPT if key in case}
        kept["runs"] = [
            {k: v for k, v in run.items() if k in ("run", "status", "failure_kind")}
            for run in case.get("runs", [])
        ]
        cases[case["id"]] = kept
    aggregates = dict(summary["aggregates"])
    aggregates["metrics"] = {
        name: value for name, value in aggregates["metrics"].items() if name != "wall_ms"
    }
    return {"exit": summary["run"]["exit_status"], "aggregates": aggregates, "cases": cases}


def whole_and_merged(tmp_path: Path, *options: str, settings: str = "") -> dict[str, Any]:
    whole_suite = flaky_suite(tmp_path / "whole", CASES, settings)
    code_whole, out, err = call_cli(
        ["run", str(whole_suite), "--out", str(tmp_path / "out_whole"), "-q", *options]
    )
    assert code_whole in (0, 1), out + err
    sharded = flaky_suite(tmp_path / "sharded", CASES, settings)
    shards = []
    for index in (1, 2):
        out_dir = tmp_path / f"out_shard{index}"
        code, out, err = call_cli(
            ["run", str(sharded), "--shard", f"{index}/2", "--out", str(out_dir), "-q", *options]
        )
        assert code in (0, 1), out + err
        shards.append(only_run_dir(out_dir))
    code_merged, merged_out, err = call_cli(
        ["merge", *map(str, shards), "--out", str(tmp_path / "merged")]
    )
    assert code_merged in (0, 1), merged_out + err
    return {
        "whole": only_run_dir(tmp_path / "out_whole"),
        "merged": only_run_dir(tmp_path / "merged"),
        "codes": (code_whole, code_merged),
        "merged_out": merged_out,
        "shards": shards,
    }


@pytest.fixture(autouse=True)
def _both_shards_hold_a_case_run_more_than_once() -> None:
    shards = [shard_case_ids(sorted(CASES), ShardSpec(i, 2)) for i in (1, 2)]
    flaky = {"wobbly", "wobbly_late", "broken", "crashy"}
    assert all(set(shard) & flaky for shard in shards)


def test_merged_retries_give_the_whole_runs_verdict(tmp_path: Path) -> None:
    runs = whole_and_merged(tmp_path, "--retries", "2")
    merged, whole = comparable(runs["merged"]), comparable(runs["whole"])
    assert merged == whole
    assert runs["codes"] == (1, 1)
    assert merged["cases"]["wobbly"]["status"] == "flaky"
    assert merged["cases"]["crashy"]["status"] == "flaky"
    assert merged["cases"]["broken"]["status"] == "fail"
    assert [r["status"] for r in merged["cases"]["broken"]["runs"]] == ["fail"] * 3
    docs = json.loads((runs["merged"] / "summary.json").read_text())["cases"]
    assert "runs" not in next(doc for doc in docs if doc["id"] == "steady")  # passed at once
    assert "passed on retry 1" in (runs["merged"] / "report.html").read_text(encoding="utf-8")
    receipt = verify_receipt(runs["merged"] / "receipt.jsonl")
    assert receipt.ok
    last = json.loads((runs["merged"] / "receipt.jsonl").read_text().splitlines()[-1])["data"]
    assert last["cases"]["flaky"] == 2
    # Every run of every case: steady, steady_too and wobbly_late (it fails only its run 2)
    # once, wobbly and crashy twice (passed on retry), broken three times.
    assert last["totals"]["attempts"] == 1 + 1 + 1 + 2 + 2 + 3
    lines = (runs["merged"] / "run.jsonl").read_text().splitlines()
    assert sorted({json.loads(line).get("run") for line in lines}, key=str) == [1, 2, 3, None]


def test_merged_repeats_keep_each_cases_pass_rate_and_its_gate(tmp_path: Path) -> None:
    # flaky: warn lets a flaky case pass the run, unless it falls below its minimum rate.
    runs = whole_and_merged(
        tmp_path, "--repeat", "3", settings="flaky: warn\nmin_case_pass_rate: 0.6\n"
    )
    merged, whole = comparable(runs["merged"]), comparable(runs["whole"])
    assert merged == whole
    assert runs["codes"] == (1, 1)  # broken fails in every run
    wobbly = merged["cases"]["wobbly"]
    assert (wobbly["status"], wobbly["passes"], wobbly["blocking"]) == ("flaky", 2, False)
    assert wobbly["pass_hat_k"]["k"] == 3
    junit = (runs["merged"] / "junit.xml").read_text(encoding="utf-8")
    assert junit.count("<flakyFailure") == (runs["whole"] / "junit.xml").read_text().count(
        "<flakyFailure"
    )


def test_a_run_number_that_is_no_number_fails_the_merge(tmp_path: Path) -> None:
    runs = whole_and_merged(tmp_path, "--retries", "1")
    shard = runs["shards"][0]
    events = (shard / "run.jsonl").read_text().splitlines()
    at = next(i for i, line in enumerate(events) if '"run"' in line)
    event = json.loads(events[at])
    event["run"] = "two"
    events[at] = json.dumps(event)
    (shard / "run.jsonl").write_text("\n".join(events) + "\n")
    code, _, err = call_cli(["merge", *map(str, runs["shards"]), "--out", str(tmp_path / "m2")])
    assert code == 2
    assert f"run.jsonl:{at + 1}: expected a run number 1, 2, ..., found 'two'" in err


def test_a_run_status_changed_in_the_summary_fails_the_merge(tmp_path: Path) -> None:
    runs = whole_and_merged(tmp_path, "--retries", "1")
    for shard in runs["shards"]:
        path = shard / "summary.json"
        summary = json.loads(path.read_text())
        for case in summary["cases"]:
            if case.get("runs"):
                case["runs"][0]["status"] = "pass"  # hide the first failure
                path.write_text(json.dumps(summary))
                code, _, err = call_cli(
                    ["merge", *map(str, runs["shards"]), "--out", str(tmp_path / "m3")]
                )
                assert code == 2
                assert f"run 1 of case {case['id']!r} ended with status" in err
                assert "the summary was changed after the run" in err
                return
    raise AssertionError("no case ran more than once")
