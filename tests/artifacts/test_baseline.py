"""Baseline files, promotion and the regression gate."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from builders import make_cli_inputs
from jsonerrors import json_error
from trialrun.artifacts.baseline import (
    MISSING_METRIC_NOTE,
    SCHEMA_WARNING,
    baseline_from_summary,
    compute_regression,
    load_baseline,
    promote,
    read_summary,
    thresholds_of,
)
from trialrun.base.fsutil import write_json
from trialrun.config.models import Regression
from trialrun.config.spec import parse
from trialrun.errors import ConfigError, TrialrunError

PEER_BASELINES = [
    "upstream/baselines/demo.json",
    "upstream/demo_repo/baselines/demo.json",
    "generated-0.2.3/init-python/baselines/demo.json",
    "generated-0.2.3/probe-runs/reg_gate/baseline_b2.json",
    "upstream/tests/golden/summary.json",
    "generated-0.2.3/demo-run/summary.json",
]
CHECK_IDS = [
    "min_pass_rate",
    "max_avg_wall_ms_delta_pct",
    "max_p95_wall_ms_delta_pct",
    "status_regressions",
]


def doc(*cases: tuple[str, str], wall_mean: float | None = 20.0, **extra: Any) -> dict[str, Any]:
    """A minimal summary.json-style document."""
    statuses = [status for _, status in cases]
    wall = {"min": 10.0, "p50": 10.0, "p95": 30.0, "mean": wall_mean, "max": 30.0}
    return {
        "schema_version": 1,
        "aggregates": {
            "pass_rate": statuses.count("pass") / len(statuses) if statuses else 0.0,
            "metrics": {"wall_ms": wall},
        },
        "cases": [{"id": case_id, "status": status} for case_id, status in cases],
        **extra,
    }


def checks_by_id(regression: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {check["id"]: check for check in regression["checks"]}


# ---- load_baseline -------------------------------------------------------------------------


@pytest.mark.parametrize("relative", PEER_BASELINES)
def test_loads_peer_baselines_and_summaries(peer_fixtures: Path, relative: str) -> None:
    document = load_baseline(peer_fixtures / relative)
    assert document["cases"] and all("id" in case for case in document["cases"])


def write(tmp_path: Path, text: str | bytes) -> Path:
    path = tmp_path / "baseline.json"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


TRAILING_COMMA = '{\n  "cases": [\n    {"id": "t1",}\n  ]\n}\n'


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        (
            TRAILING_COMMA,
            # json's own words and place: Python 3.13 names the comma's line, 3.11 the next.
            json_error(TRAILING_COMMA).lineno,
            f"invalid JSON: {json_error(TRAILING_COMMA).msg}",
        ),
        ("[1, 2]", 1, "found a JSON list"),
        ('{\n  "schema_version": 1\n}', 1, "found no 'cases' key"),
        ('{\n  "cases": {}\n}', 2, "'cases' is a dict"),
        ('{\n  "cases": [\n    "t1"\n  ]\n}', 2, "cases[0]: expected an object"),
        ('{\n  "cases": [\n    {"status": "pass"}\n  ]\n}', 2, "expected a string 'id'"),
        (
            '{\n  "cases": [\n    {"id": "t1",\n     "status": "ok"}\n  ]\n}',
            3,
            "cases[0] (t1): expected 'status' to be one of pass, fail, error, skipped, flaky, "
            "found 'ok'",
        ),
        (
            '{"cases": [\n{"id": "a", "status": "pass"},\n{"id": "a", "status": "fail"}\n]}',
            2,
            "cases[1]: duplicate case id 'a'",
        ),
        ('{"cases": [],\n "aggregates": {\n  "pass_rate": "1"}}', 3, "must be a number"),
        ('{"cases": [],\n "aggregates": []}', 2, "'aggregates' must be an object"),
        ('{"cases": [],\n "schema_version": "1"}', 2, "'schema_version' must be an integer"),
        # diff --html and merge apply these gates: a traceback met the first two.
        ('{"cases": [],\n "policy_snapshot": 1.5}', 2, "'policy_snapshot' must be an object"),
        ('{"cases": [],\n "policy_snapshot": []}', 2, "'policy_snapshot' must be an object"),
        (
            '{"cases": [],\n "policy_snapshot": {"min_pass_rate": "high"}}',
            2,
            "'policy_snapshot': regression threshold 'min_pass_rate' must be a number",
        ),
    ],
)
def test_bad_baselines_name_file_line_and_expectation(
    tmp_path: Path, text: str, line: int, fragment: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_baseline(path)
    assert caught.value.file == str(path)
    assert caught.value.line == line
    assert fragment in caught.value.message
    assert str(caught.value).startswith(f"{path}:{line}: ")


def test_invalid_json_message_says_what_was_expected(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"expected a summary.json-style baseline with cases\[\]"):
        load_baseline(write(tmp_path, "not json"))


def test_missing_and_undecodable_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="baseline file not found"):
        load_baseline(tmp_path / "nope.json")
    with pytest.raises(ConfigError, match="not UTF-8") as caught:
        load_baseline(write(tmp_path, b'{\n"cases": ["\xff"]}'))
    assert caught.value.line == 2


def test_utf8_bom_is_accepted(tmp_path: Path) -> None:
    path = write(tmp_path, b'\xef\xbb\xbf{"cases": [{"id": "t1", "status": "pass"}]}')
    assert load_baseline(path)["cases"][0]["id"] == "t1"


# ---- compute_regression ----------------------------------------------------------------------


def test_reg_gate_probe_matches_the_peer(peer_fixtures: Path) -> None:
    probe = peer_fixtures / "generated-0.2.3/probe-runs/reg_gate"
    baseline = load_baseline(probe / "baseline_b2.json")
    summary = read_summary(probe / "summary.json")
    peer = summary.pop("regression")
    regression = compute_regression(
        baseline, summary, summary["policy_snapshot"], "baselines/b2.json"
    )
    assert regression["checks"][:3] == peer["checks"]
    assert [check["id"] for check in regression["checks"]] == CHECK_IDS
    assert [c["id"] for c in regression["checks"] if c["status"] == "fail"] == CHECK_IDS[1:3]
    assert regression["warnings"] == [SCHEMA_WARNING]
    assert regression["case_diffs"]["missing_in_current"] == ["t_gone"]
    assert regression["passed"] is False
    assert {k: v for k, v in regression.items() if k != "checks"} == {
        k: v for k, v in peer.items() if k != "checks"
    }


def test_suite_regression_model_with_alias_keys(peer_fixtures: Path) -> None:
    probe = peer_fixtures / "generated-0.2.3/probe-runs/reg_gate"
    policy = parse(
        Regression,
        {
            "min_success_rate": 0.5,
            "max_avg_wall_ms_delta_pct": 0.05,
            "max_p95_wall_ms_increase_pct": 0.05,
        },
    )
    regression = compute_regression(
        load_baseline(probe / "baseline_b2.json"),
        read_summary(probe / "summary.json"),
        policy,
        "b2",
    )
    assert [c["threshold"] for c in regression["checks"][:3]] == [0.5, 0.05, 0.05]


def test_thresholds_from_every_policy_form() -> None:
    expected = {
        "min_pass_rate": 0.9,
        "max_avg_wall_ms_delta_pct": None,
        "max_p95_wall_ms_delta_pct": 2.0,
    }
    assert thresholds_of({"min_success_rate": 0.9, "max_p95_wall_ms_increase_pct": 2}) == expected
    snapshot = {
        "thresholds": {"min_pass_rate": 0.9},
        "regression": {"max_p95_wall_ms_delta_pct": 2.0},
    }
    assert thresholds_of(snapshot) == expected
    assert thresholds_of(None) == dict.fromkeys(expected)
    with pytest.raises(
        ConfigError, match=re.escape("'min_pass_rate' must be a number, found '0.9'")
    ):
        thresholds_of({"min_pass_rate": "0.9"})
    with pytest.raises(ConfigError, match="must be a number, found True"):
        thresholds_of({"max_avg_wall_ms_delta_pct": True})


def test_unset_thresholds_are_skipped_with_the_peer_notes() -> None:
    regression = compute_regression(doc(("t1", "pass")), doc(("t1", "pass")), None, "b.json")
    checks = checks_by_id(regression)
    assert checks["min_pass_rate"]["note"] == "No min_pass_rate configured."
    assert checks["max_avg_wall_ms_delta_pct"]["note"] == "No max_avg_wall_ms_delta_pct configured."
    assert checks["max_p95_wall_ms_delta_pct"]["status"] == "skipped"
    assert checks["status_regressions"]["status"] == "pass"
    assert regression["passed"] is True


@pytest.mark.parametrize("baseline_mean", [None, 0.0])
def test_missing_or_zero_baseline_metric_skips_wall_gate(baseline_mean: float | None) -> None:
    baseline = doc(("t1", "pass"), wall_mean=baseline_mean)
    regression = compute_regression(
        baseline, doc(("t1", "pass")), {"max_avg_wall_ms_delta_pct": 0.1}, "b.json"
    )
    check = checks_by_id(regression)["max_avg_wall_ms_delta_pct"]
    assert check["status"] == "skipped" and check["note"] == MISSING_METRIC_NOTE
    assert check["threshold"] == 0.1 and check["delta_pct"] is None


def test_wall_gate_uses_fractions_and_is_inclusive() -> None:
    policy = {"max_avg_wall_ms_delta_pct": 0.5}
    at_limit = compute_regression(
        doc(("t", "pass")), doc(("t", "pass"), wall_mean=30.0), policy, "b"
    )
    over = compute_regression(doc(("t", "pass")), doc(("t", "pass"), wall_mean=30.2), policy, "b")
    assert checks_by_id(at_limit)["max_avg_wall_ms_delta_pct"]["status"] == "pass"
    assert checks_by_id(over)["max_avg_wall_ms_delta_pct"]["status"] == "fail"


def test_min_pass_rate_is_absolute() -> None:
    baseline = doc(("a", "fail"), ("b", "fail"))
    current = doc(("a", "pass"), ("b", "fail"))
    check = checks_by_id(compute_regression(baseline, current, {"min_pass_rate": 0.6}, "b"))
    assert check["min_pass_rate"] == check["min_pass_rate"] | {"status": "fail", "delta": 0.5}


def test_a_pass_to_fail_case_fails_the_gate_without_any_threshold() -> None:
    baseline = doc(("a", "pass"), ("b", "pass"), ("c", "fail"), ("gone", "pass"))
    current = doc(("a", "fail"), ("b", "error"), ("c", "pass"), ("new", "fail"))
    regression = compute_regression(baseline, current, None, "b.json")
    check = checks_by_id(regression)["status_regressions"]
    assert check["status"] == "fail"
    assert check["cases"] == ["a", "b"] and check["current"] == 2
    assert check["note"] == "passed in the baseline, now: a (fail), b (error)"
    assert regression["passed"] is False
    assert regression["case_diffs"] == {
        "missing_in_current": ["gone"],
        "new_in_current": ["new"],
        "status_changed": [
            {"id": "a", "baseline": "pass", "current": "fail"},
            {"id": "b", "baseline": "pass", "current": "error"},
            {"id": "c", "baseline": "fail", "current": "pass"},
        ],
    }


def test_missing_and_new_cases_alone_do_not_gate() -> None:
    regression = compute_regression(doc(("a", "pass")), doc(("b", "fail")), None, "b.json")
    assert regression["passed"] is True


def test_baseline_without_aggregates_uses_case_statuses() -> None:
    baseline = {"cases": [{"id": "a", "status": "pass"}, {"id": "b", "status": "fail"}]}
    regression = compute_regression(baseline, doc(("a", "pass")), {"min_pass_rate": 1.0}, "b")
    assert regression["metrics"]["pass_rate"] == {"baseline": 0.5, "current": 1.0, "delta": 0.5}


# ---- promotion --------------------------------------------------------------------------------


def summary_of_run(
    run_id: str, wall_ms: int, *, policy: dict[str, Any] | None = None
) -> dict[str, Any]:
    summary: dict[str, Any] = {
        "schema_version": 1,
        "generated_at": f"2026-01-01T00:00:0{wall_ms % 10}.000000Z",
        "runledger_version": "0.2.3",
        "trialrun_version": "0.1.0",
        "run": {
            "run_id": run_id,
            "mode": "replay",
            "exit_status": "success",
            "git_sha": run_id,
            "ci": None,
            "interrupted": False,
            "started_at": "x" + run_id,
            "finished_at": "y" + run_id,
        },
        "suite": {
            "name": "demo",
            "suite_path": "evals/demo/suite.yaml",
            "agent_command": ["python3", "evals/demo/agent/agent.py", "-u"],
            "tool_mode": "replay",
            "suite_config_hash": None,
            "cases_total": 2,
        },
        "aggregates": {
            "cases_total": 2,
            "cases_pass": 2,
            "cases_fail": 0,
            "cases_error": 0,
            "pass_rate": 1.0,
            "metrics": {"wall_ms": {"mean": float(wall_ms)}, "tool_calls": {"mean": 1.0}},
        },
        "cases": [
            {
                "id": case_id,
                "status": "pass",
                "wall_ms": wall_ms,
                "stderr_tail": f"pid {wall_ms}",
                "replay": {
                    "cassette_path": f"evals/demo/cassettes/{case_id}.jsonl",
                    "cassette_sha256": "ab",
                },
            }
            for case_id in ("t2", "t1")
        ],
        "regression": {"passed": True},
    }
    if policy is not None:
        summary["policy_snapshot"] = policy
    return summary


def test_promoting_the_same_run_twice_gives_identical_bytes(tmp_path: Path) -> None:
    first, second = tmp_path / "run1" / "summary.json", tmp_path / "run2" / "summary.json"
    write_json(first, summary_of_run("20260101-000000-aaaaaa", 15))
    write_json(second, summary_of_run("20260101-000009-bbbbbb", 22))
    target = tmp_path / "baselines" / "demo.json"
    promote(first.parent, target, allow_failing=False)
    once = target.read_bytes()
    promote(first, target, allow_failing=False)
    assert target.read_bytes() == once
    text = once.decode()
    for volatile in ("git_sha", "started_at", "stderr_tail", "trialrun_version"):
        assert volatile not in text
    assert load_baseline(target)["cases"][0]["id"] == "t1"
    # Another run with the same results differs only where RunLedger needs the run's own values.
    promote(second, target, allow_failing=False)
    other = json.loads(target.read_bytes())
    kept = json.loads(once)
    for doc in (kept, other):
        del doc["generated_at"], doc["run"]["run_id"], doc["aggregates"]["metrics"]["wall_ms"]
        for case in doc["cases"]:
            del case["wall_ms"]
    assert other == kept


# What RunLedger 0.2.3's baseline model requires (reference notes, section 11): a baseline
# missing any of them cannot be read by RunLedger, so a team could not switch back.
RUNLEDGER_REQUIRED: dict[str, tuple[str, ...]] = {
    "": ("schema_version", "generated_at", "runledger_version", "run", "suite", "aggregates"),
    "run": ("run_id", "mode", "exit_status"),
    "suite": ("name", "suite_path", "agent_command", "tool_mode"),
    "aggregates": ("cases_total", "cases_pass", "cases_fail", "cases_error", "pass_rate"),
    "case": ("id", "status", "wall_ms", "tool_calls", "tool_errors", "assertions"),
}


def runledger_missing(baseline: dict[str, Any]) -> list[str]:
    missing = [f"{key}" for key in RUNLEDGER_REQUIRED[""] if key not in baseline]
    for part in ("run", "suite", "aggregates"):
        missing += [f"{part}.{k}" for k in RUNLEDGER_REQUIRED[part] if k not in baseline[part]]
    for case in baseline["cases"]:
        missing += [f"cases[].{k}" for k in RUNLEDGER_REQUIRED["case"] if case.get(k) is None]
        missing += [
            f"cases[].assertions.{k}"
            for k in ("total", "failed")
            if k not in case.get("assertions", {})
        ]
    return missing


def test_a_baseline_promoted_from_a_real_run_has_every_field_runledger_reads(
    tmp_path: Path,
) -> None:
    root = make_cli_inputs(tmp_path)
    target = promote(root / "run", tmp_path / "demo.json", allow_failing=False)
    baseline = json.loads(target.read_text(encoding="utf-8"))
    summary = read_summary(root / "run")
    assert runledger_missing(baseline) == []
    assert baseline["generated_at"] == summary["generated_at"]
    assert baseline["run"]["run_id"] == summary["run"]["run_id"]
    # Wall times are kept with no wall gate configured: a gate added later has its baseline.
    assert "max_avg_wall_ms_delta_pct" not in json.dumps(summary.get("policy_snapshot"))
    assert [c["wall_ms"] for c in baseline["cases"]] == [c["wall_ms"] for c in summary["cases"]]
    assert (
        baseline["aggregates"]["metrics"]["wall_ms"] == summary["aggregates"]["metrics"]["wall_ms"]
    )


def test_a_wall_gate_added_after_promotion_has_a_baseline_to_compare_with(tmp_path: Path) -> None:
    baseline = baseline_from_summary(summary_of_run("r", 15), base_dir=tmp_path)
    current = summary_of_run("s", 60)
    regression = compute_regression(baseline, current, {"max_avg_wall_ms_delta_pct": 0.5}, "b")
    check = checks_by_id(regression)["max_avg_wall_ms_delta_pct"]
    assert (check["status"], check["baseline"], check["current"]) == ("fail", 15.0, 60.0)


def test_wall_times_are_kept_when_a_wall_gate_is_configured(tmp_path: Path) -> None:
    policy = {
        "thresholds": {"min_pass_rate": 1.0},
        "regression": {"max_p95_wall_ms_delta_pct": 2.0},
    }
    baseline = baseline_from_summary(summary_of_run("r", 15, policy=policy), base_dir=tmp_path)
    assert baseline["aggregates"]["metrics"]["wall_ms"] == {"mean": 15.0}
    assert [case["wall_ms"] for case in baseline["cases"]] == [15, 15]
    assert baseline["policy_snapshot"] == policy


def test_baseline_paths_are_relative_to_the_baseline_directory(tmp_path: Path) -> None:
    (tmp_path / "evals" / "demo" / "agent").mkdir(parents=True)
    baseline = baseline_from_summary(
        summary_of_run("r", 15), base_dir=Path("baselines"), cwd=tmp_path
    )
    assert baseline["suite"]["suite_path"] == "../evals/demo/suite.yaml"
    assert baseline["suite"]["agent_command"] == ["python3", "../evals/demo/agent/agent.py", "-u"]
    assert baseline["cases"][0]["replay"]["cassette_path"] == "../evals/demo/cassettes/t1.jsonl"
    assert baseline["run"] == {"run_id": "r", "mode": "replay", "exit_status": "success"}
    assert "regression" not in baseline


def test_absolute_paths_outside_the_project_stay_absolute(tmp_path: Path) -> None:
    summary = summary_of_run("r", 15)
    summary["suite"]["agent_command"][0] = "/usr/bin/python3"
    baseline = baseline_from_summary(summary, base_dir=tmp_path)
    assert baseline["suite"]["agent_command"][0] == "/usr/bin/python3"


@pytest.mark.parametrize(
    ("statuses", "interrupted", "found"),
    [
        (("pass", "fail"), False, "exit_status failed (1 fail, 1 pass)"),
        (("pass", "error"), False, "exit_status error (1 error, 1 pass)"),
        (("pass", "pass"), True, "exit_status error (2 pass)"),
        ((), False, "exit_status failed (no cases)"),
    ],
)
def test_promote_refuses_runs_that_did_not_pass(
    tmp_path: Path, statuses: tuple[str, ...], interrupted: bool, found: str
) -> None:
    summary = summary_of_run("r", 15)
    summary["cases"] = [{"id": f"c{i}", "status": s} for i, s in enumerate(statuses)]
    summary["run"]["interrupted"] = interrupted
    source = tmp_path / "summary.json"
    write_json(source, summary)
    target = tmp_path / "baseline.json"
    with pytest.raises(TrialrunError, match="refusing to promote") as caught:
        promote(source, target, allow_failing=False)
    assert found in str(caught.value) and "--allow-failing" in str(caught.value)
    assert not target.exists()
    if statuses:
        promote(source, target, allow_failing=True)
        assert load_baseline(target)["run"]["exit_status"] != "success"


def test_a_failed_regression_gate_does_not_block_rebaselining(tmp_path: Path) -> None:
    summary = summary_of_run("r", 15)
    summary["run"]["exit_status"] = "failed"
    summary["regression"] = {"passed": False}
    write_json(tmp_path / "summary.json", summary)
    target = promote(tmp_path, tmp_path / "b.json", allow_failing=False)
    assert load_baseline(target)["run"]["exit_status"] == "success"


def test_promote_reports_a_missing_summary(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"run summary .* not found"):
        promote(tmp_path, tmp_path / "b.json", allow_failing=False)


def test_promote_keeps_the_old_baseline_when_the_summary_is_bad(tmp_path: Path) -> None:
    target = tmp_path / "b.json"
    target.write_text("old")
    (tmp_path / "summary.json").write_text("{")
    with pytest.raises(ConfigError):
        promote(tmp_path, target, allow_failing=True)
    assert target.read_text() == "old"


def test_promoting_a_peer_summary_and_comparing_with_it(
    peer_fixtures: Path, tmp_path: Path
) -> None:
    summary_path = peer_fixtures / "generated-0.2.3/demo-run/summary.json"
    target = promote(summary_path, tmp_path / "demo.json", allow_failing=False)
    baseline = load_baseline(target)
    current = copy.deepcopy(read_summary(summary_path))
    regression = compute_regression(baseline, current, current["policy_snapshot"], "demo.json")
    assert regression["passed"] is True
    # The wall metric is kept for RunLedger and for a gate added later; none is configured.
    check = checks_by_id(regression)["max_avg_wall_ms_delta_pct"]
    assert (check["status"], check["baseline"]) == ("skipped", 22.0)
    assert json.loads(target.read_text())["cases"][0]["replay"]["cassette_sha256"].startswith(
        "3ca8"
    )


@pytest.mark.parametrize("text", ["", "  \n\n"])
def test_an_empty_baseline_is_reported_about_the_file_without_a_line(
    tmp_path: Path, text: str
) -> None:
    path = tmp_path / "baseline.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_baseline(path)
    assert str(caught.value).startswith(f"{path}: the file is empty; expected")


def test_a_suite_whose_every_case_is_quarantined_has_no_pass_rate_to_gate() -> None:
    held = {"reason": "r", "owner": "o", "expires": "2999-01-01", "expired": False}
    current = doc(("t1", "fail"))
    current["cases"][0]["quarantine"] = held
    policy = {"min_pass_rate": 1.0}
    regression = compute_regression(doc(("t1", "pass")), current, policy, "b.json")
    check = checks_by_id(regression)["min_pass_rate"]
    assert check["status"] == "skipped"
    assert check["note"] == (
        "every case is quarantined: no pass rate to gate. quarantined, left out: t1"
    )
    assert regression["passed"] is True
    # One case still gating: its rate is the gate's, as before.
    current = doc(("t1", "fail"), ("t2", "fail"))
    current["cases"][0]["quarantine"] = held
    regression = compute_regression(doc(("t1", "pass"), ("t2", "pass")), current, policy, "b")
    assert checks_by_id(regression)["min_pass_rate"]["status"] == "fail"
