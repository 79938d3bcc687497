"""summary.json: the peer's schema_version 1 document, filled in, plus our fields."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trialrun import __version__
from trialrun.artifacts.baseline import compute_regression, load_baseline
from trialrun.base.results import (
    AgentRun,
    CaseResult,
    CheckFailure,
    Failure,
    RunResult,
    Status,
    ToolCall,
    Usage,
)
from trialrun.config.paths import display_path
from trialrun.report.summary import (
    STDERR_TAIL_MAX_CHARS,
    build_summary,
    exit_status,
    metric_stats,
    nearest_rank,
    policy_snapshot,
)

OUR_RUN_KEYS = {"interrupted", "started_at", "finished_at"}
OUR_CASE_KEYS = {
    "failure_kind",
    "http_exchanges",
    "stale_recordings",
    "stderr_tail",
    "startup_ms",
    "tool_sequence",
    "unused_recordings",
    "unused_recordings_by_tool",
    "warnings",
}
DEMO_FINISHED_AT = 1796202403.146931  # 2026-12-02T09:06:43.146931Z


def make_case(
    case_id: str = "t1",
    status: Status = "pass",
    *,
    wall_ms: int = 22,
    calls: tuple[tuple[str, bool], ...] = (("search_docs", True),),
    output: dict[str, Any] | None = None,
    failure: Failure | None = None,
    checks: tuple[CheckFailure, ...] = (),
    usage: Usage | None = None,
    cassette_path: str | None = "evals/demo/cassettes/t1.jsonl",
) -> CaseResult:
    run = AgentRun(
        case_id=case_id,
        output={"category": "account"} if output is None else output,
        tool_calls=[ToolCall(f"c{i}", name, {}, ok) for i, (name, ok) in enumerate(calls)],
        usage=usage or Usage(),
        wall_ms=wall_ms,
    )
    return CaseResult(
        case_id=case_id,
        status=status,
        run=run,
        assertions_total=3,
        check_failures=list(checks),
        failure=failure,
        cassette_path=cassette_path,
        cassette_sha256="3ca88ba1cde6952e1927e83ba82cc13948f96157d200ef01a7a15b5e586883e5",
    )


def make_run(*cases: CaseResult, **overrides: Any) -> RunResult:
    fields: dict[str, Any] = {
        "run_id": "20261202-090643-87454e",
        "suite_name": "demo",
        "suite_path": "evals/demo/suite.yaml",
        "agent_command": ["python3", "evals/demo/agent/agent.py"],
        "mode": "replay",
        "cases": list(cases) or [make_case()],
        "started_at": DEMO_FINISHED_AT - 1,
        "finished_at": DEMO_FINISHED_AT,
        "regression_policy": {"min_pass_rate": 1.0},
    }
    fields.update(overrides)
    return RunResult(**fields)


def key_paths(value: Any, prefix: str = "") -> set[str]:
    """Every key path of a JSON document; list items share the path ``[]``."""
    paths: set[str] = set()
    if isinstance(value, dict):
        for key, item in value.items():
            path = f"{prefix}.{key}" if prefix else key
            paths |= {path} | key_paths(item, path)
    elif isinstance(value, list):
        for item in value:
            paths |= key_paths(item, f"{prefix}[]")
    return paths


@pytest.fixture
def demo_fixture(peer_fixtures: Path) -> dict[str, Any]:
    text = (peer_fixtures / "generated-0.2.3/demo-run/summary.json").read_text(encoding="utf-8")
    return dict(json.loads(text))


@pytest.fixture
def demo_summary(peer_fixtures: Path, tmp_path: Path) -> dict[str, Any]:
    run = make_run()
    baseline = load_baseline(peer_fixtures / "generated-0.2.3/init-python/baselines/demo.json")
    first = build_summary(run, regression=None, cwd=tmp_path)
    regression = compute_regression(baseline, first, {"min_pass_rate": 1.0}, "baselines/demo.json")
    return build_summary(run, regression=regression, cwd=tmp_path)


def test_every_peer_key_is_kept_and_ours_are_the_documented_ones(
    demo_fixture: dict[str, Any], demo_summary: dict[str, Any]
) -> None:
    peer, ours = key_paths(demo_fixture), key_paths(demo_summary)
    assert peer - ours == set()
    status_check_keys = {"regression.checks[].cases"}
    expected_extra = (
        {"trialrun_version"}
        | {f"run.{key}" for key in OUR_RUN_KEYS}
        | {f"cases[].{key}" for key in OUR_CASE_KEYS}
        | status_check_keys
    )
    assert ours - peer == expected_extra


def test_values_match_the_peer_demo_run(
    demo_fixture: dict[str, Any], demo_summary: dict[str, Any]
) -> None:
    for key in ("schema_version", "generated_at", "runledger_version", "suite"):
        assert demo_summary[key] == demo_fixture[key], key
    # The peer never filled steps; ours counts one tool call plus the final answer.
    metrics = demo_summary["aggregates"]["metrics"]
    assert metrics.pop("steps") == dict.fromkeys(("min", "p50", "p95", "mean", "max"), 2.0)
    demo_fixture["aggregates"]["metrics"].pop("steps")
    assert demo_summary["aggregates"] == demo_fixture["aggregates"]
    ours_case = {k: v for k, v in demo_summary["cases"][0].items() if k not in OUR_CASE_KEYS}
    peer_case = demo_fixture["cases"][0]
    assert ours_case.pop("steps") == 2 and peer_case.pop("steps") is None
    assert ours_case == peer_case
    assert demo_summary["regression"] == demo_fixture["regression"] | {
        "checks": [*demo_fixture["regression"]["checks"], demo_summary["regression"]["checks"][3]]
    }
    assert demo_summary["run"] == {
        **demo_fixture["run"],
        "interrupted": False,
        "started_at": "2026-12-02T09:06:42.146931Z",
        "finished_at": "2026-12-02T09:06:43.146931Z",
    }
    assert demo_summary["policy_snapshot"] == demo_fixture["policy_snapshot"]
    assert demo_summary["trialrun_version"] == __version__
    assert metrics["wall_ms"]["p95"] == 22.0


def test_golden_aggregates_with_usage_filled(peer_fixtures: Path) -> None:
    golden = json.loads((peer_fixtures / "upstream/tests/golden/summary.json").read_text())
    run = make_run(
        make_case("case_a", wall_ms=100, usage=Usage(10, 20, 0.001)),
        make_case(
            "case_b",
            "fail",
            wall_ms=200,
            calls=(("search_docs", True), ("search_docs", False)),
            usage=Usage(20, 40, 0.002),
            failure=Failure("assertion_failed", "missing field"),
            checks=(CheckFailure("required_fields", "missing field"),),
        ),
    )
    summary = build_summary(run, regression=None)
    for metric in ("wall_ms", "tool_calls", "tool_errors", "tokens_in", "tokens_out", "cost_usd"):
        assert summary["aggregates"]["metrics"][metric] == golden["aggregates"]["metrics"][metric]
    for key in ("cases_total", "cases_pass", "cases_fail", "cases_error", "pass_rate"):
        assert summary["aggregates"][key] == golden["aggregates"][key]
    case_b = summary["cases"][1]
    assert case_b["failed_assertions"] == golden["cases"][1]["failed_assertions"]
    assert case_b["failure_reason"] == "missing field"
    assert case_b["failure_kind"] == "assertion_failed"
    assert case_b["tool_errors_by_name"] == {"search_docs": 1}
    assert summary["run"]["exit_status"] == "failed"


def test_cases_sorted_by_id_and_budget_failures_are_not_assertions() -> None:
    budget = CheckFailure(
        "budget:max_tool_calls", "Budget exceeded: max_tool_calls limit=0 actual=1"
    )
    run = make_run(
        make_case("z"),
        make_case(
            "a", "fail", failure=Failure("budget_exceeded", budget.message), checks=(budget,)
        ),
    )
    summary = build_summary(run, regression=None)
    assert [case["id"] for case in summary["cases"]] == ["a", "z"]
    assert summary["cases"][0]["assertions"] == {"failed": 0, "total": 3}
    assert summary["cases"][0]["failed_assertions"] is None
    assert summary["cases"][0]["failure_kind"] == "budget_exceeded"


def test_data_keys_are_never_redacted_but_agent_text_is() -> None:
    token = "ghp_" + "a" * 36
    failure = Failure("task_error", f"agent said {token}", status="error", stderr_tail=token)
    run = make_run(
        make_case(
            "t1",
            "error",
            calls=(("reset_password", True), ("reset_password", True)),
            failure=failure,
        )
    )
    case = build_summary(run, regression=None)["cases"][0]
    assert case["tool_calls_by_name"] == {"reset_password": 2}
    assert token not in case["failure_reason"] and "[REDACTED]" in case["failure_reason"]
    assert token not in case["stderr_tail"]


def test_empty_usage_gives_null_metrics_and_partial_usage_counts_reporters() -> None:
    run = make_run(make_case("a", usage=Usage(tokens_out=5)), make_case("b"))
    metrics = build_summary(run, regression=None)["aggregates"]["metrics"]
    assert metrics["cost_usd"] == dict.fromkeys(("min", "p50", "p95", "mean", "max"))
    assert metrics["tokens_out"] == {"min": 5.0, "p50": 5.0, "p95": 5.0, "mean": 5.0, "max": 5.0}


def test_no_cases() -> None:
    summary = build_summary(make_run(cases=[]), regression=None)
    assert summary["aggregates"]["pass_rate"] == 0.0
    assert summary["aggregates"]["metrics"]["wall_ms"]["p95"] is None
    assert summary["cases"] == []


@pytest.mark.parametrize(
    ("statuses", "regression", "interrupted", "expected"),
    [
        (("pass", "pass"), None, False, "success"),
        (("pass", "fail"), None, False, "failed"),
        (("fail", "error"), None, False, "error"),
        (("pass",), {"passed": False}, False, "failed"),
        (("pass",), {"passed": True}, False, "success"),
        (("error",), {"passed": False}, False, "error"),
        (("pass",), None, True, "error"),
    ],
)
def test_exit_status_precedence(
    statuses: tuple[Status, ...],
    regression: dict[str, Any] | None,
    interrupted: bool,
    expected: str,
) -> None:
    cases = [make_case(f"c{i}", status) for i, status in enumerate(statuses)]
    assert exit_status(make_run(*cases, interrupted=interrupted), regression) == expected


def test_paths_are_cwd_relative_only_inside_the_cwd(tmp_path: Path) -> None:
    inside = tmp_path / "evals" / "suite.yaml"
    run = make_run(
        make_case(cassette_path=str(tmp_path / "evals" / "c.jsonl")),
        suite_path=str(inside),
        agent_command=["/usr/bin/python3", str(tmp_path / "agent.py"), "-u"],
    )
    summary = build_summary(run, regression=None, cwd=tmp_path)
    assert summary["suite"]["suite_path"] == "evals/suite.yaml"
    assert summary["suite"]["agent_command"] == ["/usr/bin/python3", "agent.py", "-u"]
    assert summary["cases"][0]["replay"]["cassette_path"] == "evals/c.jsonl"
    assert display_path("already/relative", tmp_path) == "already/relative"
    assert display_path("win\\style\\path", tmp_path) == "win/style/path"


def test_stderr_tail_is_bounded() -> None:
    noisy = "\n".join(f"line {i} " + "x" * 200 for i in range(500))
    run = make_run(
        make_case("t", "error", failure=Failure("agent_crashed", "boom", "error", noisy))
    )
    tail = build_summary(run, regression=None)["cases"][0]["stderr_tail"]
    assert len(tail) <= STDERR_TAIL_MAX_CHARS
    assert tail.endswith("line 499 " + "x" * 200)


def test_policy_snapshot_matches_the_peer_split(peer_fixtures: Path) -> None:
    fixture = json.loads(
        (peer_fixtures / "generated-0.2.3/probe-runs/reg_gate/summary.json").read_text()
    )
    flat = {
        "min_pass_rate": 0.5,
        "max_avg_wall_ms_delta_pct": 0.05,
        "max_p95_wall_ms_delta_pct": 0.05,
    }
    assert policy_snapshot(flat) == fixture["policy_snapshot"]
    assert policy_snapshot(fixture["policy_snapshot"]) == fixture["policy_snapshot"]
    assert policy_snapshot({}) is None
    assert policy_snapshot(None) is None
    assert "policy_snapshot" not in build_summary(make_run(regression_policy=None), regression=None)


def test_nearest_rank_examples() -> None:
    assert nearest_rank([100.0, 200.0], 50) == 100.0
    assert nearest_rank([float(i) for i in range(1, 20)], 95) == 19.0  # n <= 19: the max
    assert nearest_rank([float(i) for i in range(1, 21)], 95) == 19.0
    assert nearest_rank([float(i) for i in range(1, 101)], 95) == 95.0
    assert metric_stats([]) == dict.fromkeys(("min", "p50", "p95", "mean", "max"))


@given(st.lists(st.integers(min_value=0, max_value=10_000), min_size=1), st.integers(1, 100))
def test_nearest_rank_definition(values: list[int], percent: int) -> None:
    ordered = sorted(float(v) for v in values)
    result = nearest_rank(ordered, percent)
    at_or_below = sum(1 for v in ordered if v <= result)
    below = sum(1 for v in ordered if v < result)
    assert at_or_below * 100 >= percent * len(ordered)
    assert below * 100 < percent * len(ordered)


def test_unused_recordings_are_counted_per_tool() -> None:
    case = make_case()
    case.run.unused_recordings = 3
    case.run.unused_recording_tools = ["fetch", "search_docs", "fetch"]
    [doc] = build_summary(make_run(case), regression=None)["cases"]
    assert (doc["unused_recordings"], doc["unused_recordings_by_tool"]) == (
        3,
        {"fetch": 2, "search_docs": 1},
    )
