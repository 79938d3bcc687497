"""``trialrun run --repeat K`` and ``--retries N`` end to end, on an agent that fails on purpose.

``tests/agents/flaky_agent.py`` counts its runs in a file and fails on the run numbers its case
lists, so "fails about one time in three" is the list 2, 5, 8 and no test depends on chance.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from builders import call_cli, flaky_suite, only_run_dir
from paths import AGENTS_DIR
from trialrun.base.proportions import wilson_interval
from trialrun.cli import EXIT_FAILED, EXIT_INVALID, EXIT_OK
from trialrun.receipt.verify import verify_receipt

AGENT = AGENTS_DIR / "flaky_agent.py"
ONE_IN_THREE = [2, 5, 8]


def run(root: Path, suite: Path, *options: str, out: str = "out") -> tuple[int, str, Path]:
    """Runs the suite into ``root/out``; returns the exit code, stdout and the run folder."""
    code, stdout, stderr = call_cli(
        ["run", str(suite), "--no-baseline", "--out", str(root / out), *options]
    )
    assert code in (EXIT_OK, EXIT_FAILED), stdout + stderr
    return code, stdout, only_run_dir(root / out)


def summary_cases(run_dir: Path) -> dict[str, dict[str, Any]]:
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    return {case["id"]: case for case in summary["cases"]}


def junit_cases(run_dir: Path) -> dict[str, ET.Element]:
    root = ET.fromstring((run_dir / "junit.xml").read_text(encoding="utf-8"))
    return {case.get("name", ""): case for case in root.iter("testcase")}


def test_repeat_nine_marks_the_one_in_three_agent_flaky_with_its_rate(tmp_path: Path) -> None:
    suite = flaky_suite(tmp_path, {"steady": {}, "wobbly": {"fail_on": ONE_IN_THREE}})
    code, stdout, run_dir = run(tmp_path, suite, "--repeat", "9")
    assert code == EXIT_FAILED  # flaky: fail is the default
    cases = summary_cases(run_dir)
    wobbly = cases["wobbly"]
    assert wobbly["status"] == "flaky"
    assert [r["status"] for r in wobbly["runs"]] == ["pass", "fail", "pass"] * 3
    assert [r["failure_kind"] for r in wobbly["runs"]][:2] == [None, "assertion_failed"]
    assert all(isinstance(r["wall_ms"], int) for r in wobbly["runs"])
    assert (wobbly["passes"], wobbly["pass_rate"]) == (6, 6 / 9)
    interval = wilson_interval(6, 9)
    assert interval is not None
    assert wobbly["pass_rate_interval"] == [interval.low, interval.high]
    assert 0.35 < interval.low < 0.36 and 0.87 < interval.high < 0.88
    assert wobbly["pass_hat_k"] == {"k": 9, "all_passed": False, "estimate": (6 / 9) ** 9}
    assert wobbly["blocking"] is True
    assert wobbly["failure_kind"] == "assertion_failed"  # its first failing run's details
    steady = cases["steady"]
    assert (steady["status"], steady["passes"], steady["pass_hat_k"]["all_passed"]) == (
        "pass",
        9,
        True,
    )
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    assert summary["run"]["exit_status"] == "failed"
    assert summary["aggregates"]["cases_flaky"] == 1
    assert "wobbly  FLAKY" in stdout and "6/9 passed (67%, 95% CI 35%-88%)" in stdout
    # Each run's trace is its own, numbered: nine case_end events per case, runs 1 to 9.
    ends = [
        json.loads(line)
        for line in (run_dir / "run.jsonl").read_text(encoding="utf-8").splitlines()
        if '"case_end"' in line
    ]
    assert [(e["case_id"], e["run"]) for e in ends if e["type"] == "case_end"] == [
        *(("steady", n) for n in range(1, 10)),
        *(("wobbly", n) for n in range(1, 10)),
    ]
    # The receipt holds every attempt and still verifies.
    receipt = [json.loads(line) for line in (run_dir / "receipt.jsonl").read_text().splitlines()]
    attempts = [e["data"]["attempt"] for e in receipt if e["type"] == "case_end"]
    assert attempts == [*range(1, 10), *range(1, 10)]
    assert receipt[-1]["data"]["totals"]["attempts"] == 18
    assert verify_receipt(run_dir / "receipt.jsonl").ok
    # JUnit: the flaky case fails the run, with a flakyFailure per failed run.
    junit = junit_cases(run_dir)
    assert [child.tag for child in junit["wobbly"]] == ["failure"] + ["flakyFailure"] * 3
    assert junit["wobbly"][0].get("type") == "flaky"
    assert list(junit["steady"]) == []


def test_flaky_warn_lets_a_flaky_case_pass_the_run_and_junit_says_flaky(tmp_path: Path) -> None:
    suite = flaky_suite(tmp_path, {"wobbly": {"fail_on": ONE_IN_THREE}}, "flaky: warn\n")
    code, stdout, run_dir = run(tmp_path, suite, "--repeat", "9")
    assert code == EXIT_OK
    assert summary_cases(run_dir)["wobbly"]["blocking"] is False
    assert "Flaky, not failing the run (1 case):" in stdout
    wobbly = junit_cases(run_dir)["wobbly"]
    assert [child.tag for child in wobbly] == ["flakyFailure"] * 3
    assert wobbly[0].get("type") == "assertion_failed"
    assert wobbly[0].find("stackTrace") is not None
    root = ET.fromstring((run_dir / "junit.xml").read_text(encoding="utf-8"))
    assert (root.get("failures"), root.get("errors")) == ("0", "0")


@pytest.mark.parametrize(
    ("minimum", "status", "code"),
    [("0.6", "flaky", EXIT_OK), ("0.7", "fail", EXIT_FAILED)],
)
def test_min_case_pass_rate_decides_a_repeated_case(
    tmp_path: Path, minimum: str, status: str, code: int
) -> None:
    suite = flaky_suite(
        tmp_path, {"wobbly": {"fail_on": ONE_IN_THREE}}, f"min_case_pass_rate: {minimum}\n"
    )
    found, _, run_dir = run(tmp_path, suite, "--repeat", "9")
    wobbly = summary_cases(run_dir)["wobbly"]
    assert (found, wobbly["status"], wobbly["min_case_pass_rate"]) == (code, status, float(minimum))
    if status == "fail":
        assert wobbly["failure_kind"] == "pass_rate_below_minimum"
        assert wobbly["failure_reason"].startswith(
            "passed 6 of 9 runs (67%), expected at least min_case_pass_rate 0.7; first failing "
            "run: "
        )
        junit = junit_cases(run_dir)["wobbly"]
        assert [child.tag for child in junit] == ["failure"] + ["rerunFailure"] * 3


def test_a_case_file_sets_its_own_minimum_over_the_suites(tmp_path: Path) -> None:
    suite = flaky_suite(
        tmp_path, {"wobbly": {"fail_on": ONE_IN_THREE}}, "min_case_pass_rate: 0.9\n"
    )
    case_file = suite / "cases" / "wobbly.yaml"
    case = json.loads(case_file.read_text(encoding="utf-8"))
    case_file.write_text(json.dumps({**case, "min_case_pass_rate": 0.5}), encoding="utf-8")
    code, _, run_dir = run(tmp_path, suite, "--repeat", "9")
    assert code == EXIT_OK
    assert summary_cases(run_dir)["wobbly"]["min_case_pass_rate"] == 0.5


def test_retries_turn_a_failure_that_passes_later_into_flaky(tmp_path: Path) -> None:
    suite = flaky_suite(
        tmp_path,
        {
            "steady": {},
            "second_try": {"fail_on": [1]},
            "third_try": {"crash_on": [1], "fail_on": [2]},
            "hopeless": {"fail_on": [1, 2, 3, 4]},
        },
    )
    code, stdout, run_dir = run(tmp_path, suite, "--retries", "2")
    assert code == EXIT_FAILED
    cases = summary_cases(run_dir)
    assert "runs" not in cases["steady"]  # passed the first time: nothing new in its entry
    assert cases["steady"]["status"] == "pass"
    assert (cases["second_try"]["status"], cases["second_try"]["retries"]) == ("flaky", 1)
    third = cases["third_try"]
    assert third["status"] == "flaky"
    assert [r["status"] for r in third["runs"]] == ["error", "fail", "pass"]
    assert third["runs"][0]["failure_kind"] == "agent_crashed"
    assert "crashing on run 1" in third["runs"][0]["stderr_tail"]
    hopeless = cases["hopeless"]
    assert (hopeless["status"], len(hopeless["runs"]), hopeless["passes"]) == ("fail", 3, 0)
    assert "pass_hat_k" not in hopeless
    assert "passed on retry 2" in stdout
    junit = junit_cases(run_dir)
    assert [child.tag for child in junit["third_try"]] == ["failure", "flakyError", "flakyFailure"]
    assert [child.tag for child in junit["hopeless"]] == ["failure", "rerunFailure", "rerunFailure"]
    assert list(junit["steady"]) == []
    # Every attempt ran a fresh agent: the counters say how many runs each case had.
    runs = {c: len((tmp_path / f"{c}.count").read_text().splitlines()) for c in cases}
    assert runs == {"steady": 1, "second_try": 2, "third_try": 3, "hopeless": 3}


def test_retries_with_flaky_warn_pass_the_run(tmp_path: Path) -> None:
    suite = flaky_suite(tmp_path, {"second_try": {"fail_on": [1]}}, "flaky: warn\n")
    code, _, run_dir = run(tmp_path, suite, "--retries", "1")
    assert code == EXIT_OK
    junit = junit_cases(run_dir)["second_try"]
    assert [child.tag for child in junit] == ["flakyFailure"]


def test_a_case_that_cannot_be_set_up_is_not_run_again(tmp_path: Path) -> None:
    suite = flaky_suite(tmp_path, {"steady": {}})
    case_file = suite / "cases" / "steady.yaml"
    case = json.loads(case_file.read_text(encoding="utf-8"))
    case_file.write_text(json.dumps({**case, "cassette": "cassettes/gone.jsonl"}))
    code, _, run_dir = run(tmp_path, suite, "--retries", "3")
    assert code == EXIT_FAILED
    steady = summary_cases(run_dir)["steady"]
    assert (steady["status"], steady["failure_kind"]) == ("error", "cassette_error")
    assert "runs" not in steady
    assert not (tmp_path / "steady.count").exists()


def test_repeat_and_retries_together_are_a_usage_error(tmp_path: Path) -> None:
    suite = flaky_suite(tmp_path, {"steady": {}})
    code, _, err = call_cli(["run", str(suite), "--repeat", "2", "--retries", "1"])
    assert code == EXIT_INVALID
    assert "--repeat and --retries exclude each other" in err
    code, _, err = call_cli(["run", str(suite), "--repeat", "0"])
    assert code == EXIT_INVALID


VOLATILE_KEYS = {"run_id", "generated_at", "started_at", "finished_at", "wall_ms", "startup_ms"}


def _stable(value: Any) -> Any:
    """``value`` without what differs between two runs of the same suite (ids and times)."""
    if isinstance(value, dict):
        return {
            k: "*" if k in VOLATILE_KEYS or k == "metrics" else _stable(v) for k, v in value.items()
        }
    if isinstance(value, list):
        return [_stable(item) for item in value]
    return value


def _stable_junit(run_dir: Path) -> str:
    root = ET.fromstring((run_dir / "junit.xml").read_text(encoding="utf-8"))
    for element in root.iter():
        if "time" in element.attrib:
            element.set("time", "*")
    return ET.tostring(root, encoding="unicode")


def test_repeat_one_leaves_a_deterministic_suites_artifacts_as_they_were(tmp_path: Path) -> None:
    suite = flaky_suite(tmp_path, {"steady": {}, "broken": {"fail_on": [1]}})

    def fresh_run(*options: str, out: str) -> Path:
        for counter in tmp_path.glob("*.count"):
            counter.unlink()  # each run starts the agent's run numbers at 1
        return run(tmp_path, suite, *options, out=out)[2]

    plain = fresh_run(out="plain")
    once = fresh_run("--repeat", "1", out="once")
    no_retries = fresh_run("--retries", "0", out="no_retries")
    before = json.loads((plain / "summary.json").read_text(encoding="utf-8"))
    for other in (once, no_retries):
        after = json.loads((other / "summary.json").read_text(encoding="utf-8"))
        assert _stable(after) == _stable(before)
        assert _stable_junit(other) == _stable_junit(plain)
    # Nothing new was added: no per-case repeat keys, no flaky count, no run numbers.
    for case in before["cases"]:
        assert not {"runs", "passes", "pass_rate", "pass_rate_interval", "blocking"} & set(case)
    assert "cases_flaky" not in before["aggregates"]
    events = (once / "run.jsonl").read_text(encoding="utf-8").splitlines()
    assert all("run" not in json.loads(line) for line in events)


def test_a_promoted_repeated_run_gates_on_rates_with_their_uncertainty(tmp_path: Path) -> None:
    suite = flaky_suite(tmp_path, {"steady": {}, "wobbly": {}, "worse": {}})

    def repeated(out: str, fail_on: dict[str, list[int]], *options: str) -> tuple[int, str, Path]:
        for case_id in ("steady", "wobbly", "worse"):
            (tmp_path / f"{case_id}.count").unlink(missing_ok=True)
            case_file = suite / "cases" / f"{case_id}.yaml"
            case = json.loads(case_file.read_text(encoding="utf-8"))
            case["input"]["fail_on"] = fail_on.get(case_id, [])
            case_file.write_text(json.dumps(case), encoding="utf-8")
        code, stdout, stderr = call_cli(
            ["run", str(suite), "--out", str(tmp_path / out), "--repeat", "9", *options]
        )
        assert code in (EXIT_OK, EXIT_FAILED), stdout + stderr
        return code, stdout, only_run_dir(tmp_path / out)

    _, _, first = repeated("first", {}, "--no-baseline")
    baseline = tmp_path / "baseline.json"
    assert call_cli(["baseline", "promote", "--from", str(first), "--to", str(baseline)]).code == 0
    kept = {case["id"]: case for case in json.loads(baseline.read_text())["cases"]}
    assert (kept["wobbly"]["passes"], len(kept["wobbly"]["runs"])) == (9, 9)
    assert all("stderr_tail" not in run for run in kept["wobbly"]["runs"])
    # 9/9 -> 6/9 is within the uncertainty of nine runs; 9/9 -> 3/9 is not.
    code, stdout, second = repeated(
        "second",
        {"wobbly": ONE_IN_THREE, "worse": [1, 2, 4, 5, 7, 8]},
        "--baseline",
        str(baseline),
    )
    assert code == EXIT_FAILED
    summary = json.loads((second / "summary.json").read_text(encoding="utf-8"))
    checks = {check["id"]: check for check in summary["regression"]["checks"]}
    rates = checks["pass_rate_regressions"]
    assert (rates["status"], rates["cases"]) == ("fail", ["worse"])
    assert [entry["id"] for entry in rates["compared"]] == ["steady", "wobbly", "worse"]
    assert checks["status_regressions"]["status"] == "pass"  # rated cases gate on rates only
    assert "Regression gate pass_rate_regressions failed: pass rate fell below" in stdout
    assert "worse 9/9 (70%-100%) -> 3/9" in stdout


def test_an_older_baseline_without_rates_still_gates_on_status(tmp_path: Path) -> None:
    suite = flaky_suite(tmp_path, {"steady": {}})
    _, _, plain = run(tmp_path, suite, out="plain")
    baseline = tmp_path / "baseline.json"
    assert call_cli(["baseline", "promote", "--from", str(plain), "--to", str(baseline)]).code == 0
    (tmp_path / "steady.count").unlink()
    case_file = suite / "cases" / "steady.yaml"
    case = json.loads(case_file.read_text(encoding="utf-8"))
    case["input"]["fail_on"] = list(range(1, 10))
    case_file.write_text(json.dumps(case), encoding="utf-8")
    code, _, _ = call_cli(
        ["run", str(suite), "--out", str(tmp_path / "again"), "--repeat", "3",
         "--baseline", str(baseline)]
    )  # fmt: skip
    assert code == EXIT_FAILED
    summary = json.loads((only_run_dir(tmp_path / "again") / "summary.json").read_text())
    checks = {check["id"]: check for check in summary["regression"]["checks"]}
    assert "pass_rate_regressions" not in checks
    assert checks["status_regressions"]["cases"] == ["steady"]


def test_a_run_whose_flaky_cases_the_suite_tolerates_can_be_promoted(tmp_path: Path) -> None:
    suite = flaky_suite(tmp_path, {"wobbly": {"fail_on": ONE_IN_THREE}}, "flaky: warn\n")
    code, _, run_dir = run(tmp_path, suite, "--repeat", "9")
    assert code == EXIT_OK
    target = tmp_path / "baseline.json"
    assert call_cli(["baseline", "promote", "--from", str(run_dir), "--to", str(target)]).code == 0
    assert json.loads(target.read_text())["run"]["exit_status"] == "success"


def test_shards_of_repeated_runs_merge_with_their_runs(tmp_path: Path) -> None:
    suite = flaky_suite(tmp_path, {"one": {}, "two": {}})
    shards = []
    for index in (1, 2):
        out = f"shard{index}"
        run(tmp_path, suite, "--repeat", "2", "--shard", f"{index}/2", out=out)
        shards.append(str(only_run_dir(tmp_path / out)))
    code, out, err = call_cli(["merge", *shards, "--out", str(tmp_path / "merged")])
    assert code == EXIT_OK, out + err  # tests/artifacts/test_merge_repeats.py has the rest
    cases = summary_cases(only_run_dir(tmp_path / "merged"))
    assert {case_id: len(case["runs"]) for case_id, case in cases.items()} == {"one": 2, "two": 2}
