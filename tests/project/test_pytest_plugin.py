"""The pytest plugin, driven by pytester on the ``trialrun init`` demo."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import cryptography.hazmat.primitives.asymmetric.ec  # (see below)
import cryptography.x509  # noqa: F401  (see below)
import pytest

import trialrun.running.runner  # noqa: F401  (see below)
from builders import flaky_suite
from trialrun.base.results import AgentRun, CaseResult, CheckFailure, Failure, ToolCall, Usage
from trialrun.cli import run_cli
from trialrun.pytest_plugin import case_result_from_dict

# Real agents or real runs end to end: seconds each (pytest -m "not slow" skips them).
pytestmark = pytest.mark.slow

pytest_plugins = ["pytester"]
# pytester puts sys.modules back as it was when each test started. asyncio first imported inside
# a test would be dropped and imported again next time, beside its cached C half, and agents then
# never answer (the next run times out). Importing the runner here keeps asyncio loaded once.
# cryptography likewise: its compiled half keeps the classes of its first import, so a second
# import's curve objects fail its isinstance checks ("curve must be an EllipticCurve instance")
# when the HTTP recorder makes the run's certificate authority.

ARTIFACTS = {
    "summary.json",
    "junit.xml",
    "report.html",
    "run.jsonl",
    "receipt.jsonl",
    "unused-recordings.json",
}


def plugin_args() -> list[str]:
    """``-p`` loads the plugin until the ``pytest11`` entry point is installed; after that it
    would register the module a second time, which pytest refuses."""
    installed = any(ep.name == "trialrun" for ep in entry_points(group="pytest11"))
    return [] if installed else ["-p", "trialrun.pytest_plugin"]


@pytest.fixture
def demo(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``trialrun init`` in the pytester directory, with ``python3`` on PATH for the agent."""
    bin_dir = pytester.path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    subprocess.run(["git", "init", "-q", str(pytester.path)], check=True)
    assert run_cli(["init"]) == 0
    return pytester.path


def add_case(root: Path, case_id: str) -> None:
    cases = root / "evals/demo/cases"
    text = (cases / "t1.yaml").read_text(encoding="utf-8")
    (cases / f"{case_id}.yaml").write_text(
        text.replace("id: t1", f"id: {case_id}"), encoding="utf-8"
    )


def run_dirs(root: Path) -> list[Path]:
    return sorted((root / "trialrun_out/demo").iterdir())


def test_demo_passes_and_writes_the_run_artifacts(pytester: pytest.Pytester, demo: Path) -> None:
    result = pytester.runpytest_subprocess(*plugin_args(), "--trialrun", "evals/demo")
    result.assert_outcomes(passed=1)
    (run_dir,) = run_dirs(demo)
    assert {p.name for p in run_dir.iterdir()} == ARTIFACTS
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    assert [(c["id"], c["status"]) for c in summary["cases"]] == [("t1", "pass")]
    assert summary["regression"]["passed"] is True
    assert 'name="t1"' in (run_dir / "junit.xml").read_text(encoding="utf-8")
    result.stdout.fnmatch_lines(
        ["demo: 1/1 cases passed; artifacts written to trialrun_out/demo/*"]
    )


def test_broken_agent_fails_with_expected_and_observed(
    pytester: pytest.Pytester, demo: Path
) -> None:
    agent = demo / "evals/demo/agent/agent.py"
    source = agent.read_text(encoding="utf-8")
    agent.write_text(source.replace('"name": "search_docs"', '"name": "search_web"'), "utf-8")
    result = pytester.runpytest_subprocess(*plugin_args(), "--trialrun", "evals/demo")
    result.assert_outcomes(failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "trialrun case t1 (evals/demo/cases/t1.yaml): FAIL",
            "  failure:   tool_not_allowed",
            "  message:   Tool not allowed: search_web. Allowed tools: search_docs",
        ]
    )
    # A refused call is the case's failure, once; it is not also a tool error.
    assert "max_tool_errors" not in result.stdout.str()
    result.stdout.fnmatch_lines(["  gate status_regressions: *t1"])
    assert "Traceback" not in result.stdout.str()
    (run_dir,) = run_dirs(demo)
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    assert summary["cases"][0]["status"] == "fail"


def test_node_ids_are_sorted_and_stable(pytester: pytest.Pytester, demo: Path) -> None:
    for case_id in ("t3", "t0", "t2"):
        add_case(demo, case_id)
    listings = [
        pytester.runpytest_subprocess(
            *plugin_args(), "--trialrun", "evals/demo", "--collect-only", "-q"
        )
        for _ in range(2)
    ]
    ids = [line for line in listings[0].outlines if "::" in line]
    assert ids == [f"evals/demo/suite.yaml::t{i}" for i in range(4)]
    assert [line for line in listings[1].outlines if "::" in line] == ids
    assert not (demo / "trialrun_out").exists()  # collecting runs nothing


def test_xdist_workers_agree_and_one_run_directory_is_written(
    pytester: pytest.Pytester, demo: Path
) -> None:
    add_case(demo, "t2")
    result = pytester.runpytest_subprocess(*plugin_args(), "--trialrun", "evals/demo", "-n", "2")
    result.assert_outcomes(passed=2)
    (run_dir,) = run_dirs(demo)
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    assert [c["id"] for c in summary["cases"]] == ["t1", "t2"]


def test_project_tests_still_run_next_to_the_suite(pytester: pytest.Pytester, demo: Path) -> None:
    pytester.makepyfile(test_plain="def test_plain():\n    assert True\n")
    out = demo / "elsewhere"
    result = pytester.runpytest_subprocess(
        *plugin_args(), "--trialrun", "evals/demo", "--trialrun-out", str(out)
    )
    result.assert_outcomes(passed=2)
    assert len(list((out / "demo").iterdir())) == 1
    assert not (demo / "trialrun_out").exists()


def test_without_the_option_nothing_happens(pytester: pytest.Pytester, demo: Path) -> None:
    pytester.makepyfile(test_plain="def test_plain():\n    assert True\n")
    result = pytester.runpytest_subprocess(*plugin_args())
    result.assert_outcomes(passed=1)
    output = result.stdout.str()
    # The plugins header names the installed plugin; nothing else may mention trialrun.
    assert [
        line
        for line in output.splitlines()
        if "trialrun" in line and not line.startswith("plugins:")
    ] == []
    assert not (demo / "trialrun_out").exists()


def test_importing_the_plugin_imports_nothing_heavy() -> None:
    probe = (
        "import sys\n"
        "import pytest\n"
        "before = set(sys.modules)\n"
        "import trialrun.pytest_plugin\n"
        "print(sorted(set(sys.modules) - before))\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    # trialrun.base.lazyexport is the root package's lazy __getattr__ (stdlib importlib only).
    expected = ["trialrun", "trialrun.base", "trialrun.base.lazyexport", "trialrun.pytest_plugin"]
    assert proc.stdout.strip() == str(expected)


def test_invalid_suite_is_a_collection_error_with_file_and_line(
    pytester: pytest.Pytester, demo: Path
) -> None:
    suite_file = demo / "evals/demo/suite.yaml"
    text = suite_file.read_text(encoding="utf-8")
    suite_file.write_text(text.replace("max_tool_calls: 1", "max_tool_calls: -1"), "utf-8")
    line = next(i for i, row in enumerate(text.splitlines(), 1) if "max_tool_calls" in row)
    result = pytester.runpytest_subprocess(*plugin_args(), "--trialrun", "evals/demo")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["trialrun suite is invalid:", f"*suite.yaml:{line}: *"])
    assert "Traceback" not in result.stdout.str()


def test_a_corrupt_cassette_is_a_collection_error_not_a_failing_case(
    pytester: pytest.Pytester, demo: Path
) -> None:
    (demo / "evals/demo/cassettes/t1.jsonl").write_bytes(b"\x00\xff binary\n")
    result = pytester.runpytest_subprocess(*plugin_args(), "--trialrun", "evals/demo")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(
        [
            "trialrun suite is invalid:",
            "*cassettes/t1.jsonl:1: expected UTF-8 text, found byte 0xff*",
        ]
    )


def test_missing_suite_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess(*plugin_args(), "--trialrun", "nowhere")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--trialrun nowhere: expected a suite directory*found nothing*"])


def test_case_results_survive_the_trip_from_a_worker() -> None:
    from dataclasses import asdict

    run = AgentRun(
        case_id="t1",
        output={"a": [1, 2.5, None]},
        tool_calls=[ToolCall("c1", "search", {"q": "x"}, ok=False, error="boom", duration_ms=3)],
        usage=Usage(tokens_in=3, cost_usd=0.5, model="m"),
        wall_ms=12,
        failure=Failure("tool_error", "boom", "error", stderr_tail="tail"),
        events=[{"type": "task_start", "case_id": "t1"}],
    )
    original = CaseResult(
        case_id="t1",
        status="error",
        run=run,
        assertions_total=2,
        check_failures=[CheckFailure("must_call", "missing", expected="x", observed="y")],
        failure=run.failure,
        cassette_path="c.jsonl",
    )
    assert case_result_from_dict(json.loads(json.dumps(asdict(original)))) == original


@pytest.mark.parametrize("layers", ["none", None])
def test_the_run_says_what_network_seal_held(
    pytester: pytest.Pytester, demo: Path, monkeypatch: pytest.MonkeyPatch, layers: str | None
) -> None:
    from trialrun.conversation.seal import probe

    if layers is None:
        monkeypatch.delenv("TRIALRUN_SEAL_LAYERS", raising=False)
    else:
        monkeypatch.setenv("TRIALRUN_SEAL_LAYERS", layers)
    result = pytester.runpytest_subprocess(*plugin_args(), "--trialrun", "evals/demo")
    result.assert_outcomes(passed=1)
    (run_dir,) = run_dirs(demo)
    network = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))["run"]["network"]
    held = [] if layers == "none" else probe().names()
    assert network == {"sealed": bool(held), "layers": held}
    warned = [line for line in result.outlines if "warning: network:" in line]
    assert len(warned) == (0 if len(held) == 2 else 1), result.outlines


def break_demo_agent(demo: Path) -> None:
    agent = demo / "evals/demo/agent/agent.py"
    source = agent.read_text(encoding="utf-8")
    agent.write_text(source.replace('"name": "search_docs"', '"name": "search_web"'), "utf-8")


def test_a_quarantined_failing_case_is_an_expected_failure_with_its_reason(
    pytester: pytest.Pytester, demo: Path
) -> None:
    break_demo_agent(demo)
    entry = (
        "- case: t1\n  reason: search tool renamed in PR 12\n  owner: ana\n  expires: 2999-12-31\n"
    )
    (demo / "evals/demo/quarantine.yaml").write_text(entry, encoding="utf-8")
    result = pytester.runpytest_subprocess(
        *plugin_args(), "--trialrun", "evals/demo", "-rx", "--junitxml", "junit.xml"
    )
    result.assert_outcomes(xfailed=1)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        [
            "XFAIL evals/demo/suite.yaml::t1 - quarantined until 2999-12-31 (owner ana): "
            "search tool renamed in PR 12. Status fail: Tool not allowed: search_web*"
        ]
    )
    assert "<skipped" in (demo / "junit.xml").read_text(encoding="utf-8")
    (run_dir,) = run_dirs(demo)
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    assert summary["cases"][0]["status"] == "fail"
    assert summary["cases"][0]["quarantine"]["owner"] == "ana"
    assert summary["run"]["exit_status"] == "success"


def test_an_expired_quarantine_excuses_nothing(pytester: pytest.Pytester, demo: Path) -> None:
    break_demo_agent(demo)
    entry = "- case: t1\n  reason: old\n  owner: ana\n  expires: 2000-01-01\n"
    (demo / "evals/demo/quarantine.yaml").write_text(entry, encoding="utf-8")
    result = pytester.runpytest_subprocess(*plugin_args(), "--trialrun", "evals/demo")
    result.assert_outcomes(failed=1)
    assert "quarantined until" not in result.stdout.str()


# "steady" passes; "wobbly" fails its run 2.
PLUGIN_CASES = {"steady": {}, "wobbly": {"fail_on": [2]}}


def test_repeat_runs_each_case_k_times_across_xdist_workers(pytester: pytest.Pytester) -> None:
    flaky_suite(pytester.path, PLUGIN_CASES)
    result = pytester.runpytest_subprocess(
        *plugin_args(), "--trialrun", "suite", "--trialrun-repeat", "3", "-n", "2"
    )
    result.assert_outcomes(passed=1, failed=1)  # flaky: fail, the default
    result.stdout.fnmatch_lines(["trialrun case wobbly (suite/cases/wobbly.yaml): FLAKY"])
    (run_dir,) = sorted((pytester.path / "trialrun_out/flaky").iterdir())
    cases = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))["cases"]
    wobbly = next(case for case in cases if case["id"] == "wobbly")
    assert [run["status"] for run in wobbly["runs"]] == ["pass", "fail", "pass"]
    assert wobbly["pass_hat_k"]["k"] == 3
    steady = next(case for case in cases if case["id"] == "steady")
    assert steady["passes"] == 3


def test_retries_let_a_flaky_case_pass_where_the_suite_allows_it(
    pytester: pytest.Pytester,
) -> None:
    flaky_suite(pytester.path, PLUGIN_CASES, "flaky: warn\n")
    (pytester.path / "wobbly.count").write_text("run\n")  # its next run is run 2: a failure
    result = pytester.runpytest_subprocess(
        *plugin_args(), "--trialrun", "suite", "--trialrun-retries", "2"
    )
    result.assert_outcomes(passed=2)
    (run_dir,) = sorted((pytester.path / "trialrun_out/flaky").iterdir())
    cases = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))["cases"]
    wobbly = next(case for case in cases if case["id"] == "wobbly")
    assert (wobbly["status"], wobbly["retries"], wobbly["blocking"]) == ("flaky", 1, False)


def test_repeat_and_retries_together_are_a_usage_error(pytester: pytest.Pytester) -> None:
    flaky_suite(pytester.path, PLUGIN_CASES)
    result = pytester.runpytest_subprocess(
        *plugin_args(), "--trialrun", "suite", "--trialrun-repeat", "2", "--trialrun-retries", "1"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*expected --trialrun-repeat K >= 1 or --trialrun-retries N*"])
