"""``trialrun verify``: plan loading, the gate catching (and missing) planted breakages, flakes."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from builders import write_suite
from trialrun.cli import run_cli
from trialrun.commands.verify_plan import load_plan
from trialrun.commands.verify_run import run_plan
from trialrun.errors import ConfigErrors

# Looks up the ticket then replies. BREAK_ORDER swaps the two calls; a counter file (FLAKY_FILE)
# per case makes every second run of that case skip the lookup.
AGENT = """\
import json, os, sys

def send(message):
    sys.stdout.write(json.dumps(message) + "\\n")
    sys.stdout.flush()

task = json.loads(sys.stdin.readline())["input"]
calls = [("lookup", {"q": task["ticket"]}), ("reply", {"text": "done"})]
if os.environ.get("BREAK_ORDER"):
    calls.reverse()
flaky = os.environ.get("FLAKY_FILE")
if flaky:
    flaky += "-" + task["ticket"].replace(" ", "_")
    count = int(open(flaky).read()) if os.path.exists(flaky) else 0
    open(flaky, "w").write(str(count + 1))
    if count % 2:
        calls = calls[1:]
for number, (name, args) in enumerate(calls):
    send({"type": "tool_call", "name": name, "call_id": f"c{number}", "args": args})
    json.loads(sys.stdin.readline())
send({"type": "final_output", "output": {"category": "account", "reply": "done"}})
"""

SILENT_AGENT = """\
import json, sys
sys.stdin.readline()
sys.stdout.write(json.dumps({"type": "final_output", "output": {"category": "x"}}) + "\\n")
"""


def make_suite(root: Path) -> Path:
    cassettes, cases = {}, {}
    for case_id, ticket in (("a_reset", "reset password"), ("b_refund", "refund")):
        lines = [
            {"tool": "lookup", "args": {"q": ticket}, "ok": True, "result": {"hits": 1}},
            {"tool": "reply", "args": {"text": "done"}, "ok": True, "result": "sent"},
        ]
        cassettes[f"{case_id}.jsonl"] = "".join(json.dumps(line) + "\n" for line in lines)
        cases[case_id] = {"input": {"ticket": ticket}, "cassette": f"cassettes/{case_id}.jsonl"}
    return write_suite(
        root,
        name="gate",
        agent=[sys.executable, "agent.py"],
        tools=["lookup", "reply"],
        cases=cases,
        cassettes=cassettes,
        files={"agent.py": AGENT},
        settings="budgets: {max_tool_calls: 2}\n"
        "assertions:\n  - type: call_order\n    order: [lookup, reply]\n",
    )


def write_plan(root: Path, plan: dict[str, Any]) -> Path:
    path = root / "verify.yaml"
    path.write_text(json.dumps({"suite": "suite", **plan}), encoding="utf-8")
    return path


@pytest.fixture
def root(tmp_path: Path) -> Path:
    make_suite(tmp_path)
    (tmp_path / "silent.py").write_text(SILENT_AGENT, encoding="utf-8")
    return tmp_path


SWAPPED = {
    "name": "swapped-order",
    "env": {"BREAK_ORDER": "1"},
    "expect": [
        {"case": "a_reset", "failure": "call_order"},
        {"case": "b_refund", "failure": "call_order"},
    ],
}


def test_gate_catches_planted_regressions_and_recovers(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("BREAK_ORDER", raising=False)
    budget_patch = {
        "name": "tight-budget",
        "patch": {
            "file": "suite.yaml",
            "replace": "max_tool_calls: 2",
            "with": "max_tool_calls: 1",
        },
        "expect": [
            {"case": "a_reset", "failure": "budget:max_tool_calls"},
            {"case": "b_refund", "failure": "budget_exceeded"},
        ],
    }
    silent = {
        "name": "no-tools",
        "agent_command": [sys.executable, "silent.py"],
        "expect": [{"case": c, "failure": "call_order"} for c in ("a_reset", "b_refund")],
    }
    plan = write_plan(
        root,
        {
            "repeat": 2,
            "regressions": [SWAPPED, budget_patch, silent],
            "recovery": True,
            "limits": {"max_seconds": 120},
        },
    )
    out = root / "evidence"
    assert run_cli(["verify", str(plan), "--out", str(out)]) == 0

    summary = json.loads((out / "summary.json").read_text())
    assert summary["passed"] is True
    names = [check["name"] for check in summary["checks"]]
    assert names == [
        "repeat",
        "regression:swapped-order", "recovery:swapped-order",
        "regression:tight-budget", "recovery:tight-budget",
        "regression:no-tools", "recovery:no-tools",
        "limits",
    ]  # fmt: skip
    junit = ET.fromstring((out / "junit.xml").read_text())
    assert junit.get("tests") == "8" and junit.get("failures") == "0"
    assert "# trialrun verify: PASS" in (out / "report.md").read_text()
    # The patch went to a copy: the suite itself is unchanged.
    assert "max_tool_calls: 2" in (root / "suite" / "suite.yaml").read_text()


def test_missed_expectation_fails_verify_naming_it(root: Path, tmp_path: Path) -> None:
    harmless = {
        "name": "harmless-env",
        "env": {"UNRELATED": "1"},
        "expect": [{"case": "b_refund", "failure": "call_order"}],
    }
    out = tmp_path / "evidence"
    assert (
        run_cli(["verify", str(write_plan(root, {"regressions": [harmless]})), "--out", str(out)])
        == 1
    )
    summary = json.loads((out / "summary.json").read_text())
    (regression,) = [c for c in summary["checks"] if c["name"] == "regression:harmless-env"]
    assert regression["passed"] is False
    assert regression["problems"] == [
        "missed: expected case b_refund to fail with call_order, found: it passed"
    ]
    junit = ET.fromstring((out / "junit.xml").read_text())
    failure = junit.find("testcase[@name='regression:harmless-env']/failure")
    assert failure is not None and "b_refund" in (failure.get("message") or "")
    assert "**failed**" in (out / "report.md").read_text()


def test_unexpected_failure_fails_the_regression(root: Path) -> None:
    only_one = {**SWAPPED, "expect": [{"case": "a_reset", "failure": "call_order"}]}
    result = run_plan(load_plan(write_plan(root, {"regressions": [only_one]})))
    (regression,) = [c for c in result.checks if c.name.startswith("regression:")]
    assert not result.passed
    assert regression.problems == [
        "unexpected: case b_refund failed with assertion_failed, call_order"
    ]


def test_disagreeing_repeats_fail_showing_the_case(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLAKY_FILE", str(tmp_path / "counter"))
    (root / "suite" / "suite.yaml").write_text(
        (root / "suite" / "suite.yaml")
        .read_text()
        .replace("assertions:\n  - type: call_order\n    order: [lookup, reply]\n", "")
    )
    result = run_plan(load_plan(write_plan(root, {"repeat": 2})))
    (repeat,) = result.checks
    assert not repeat.passed
    assert any(problem.startswith("flaky case b_refund: run 1 gave") for problem in repeat.problems)
    assert any(problem.startswith("flaky case a_reset") for problem in repeat.problems)


def test_failing_clean_suite_fails_repeat(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BREAK_ORDER", "1")
    result = run_plan(load_plan(write_plan(root, {})))
    assert not result.passed
    assert result.checks[0].problems[0].startswith("run 1: case a_reset fail (assertion_failed)")


def test_time_limit_skips_remaining_steps(root: Path) -> None:
    plan = write_plan(
        root, {"repeat": 1, "regressions": [SWAPPED], "limits": {"max_seconds": 0.001}}
    )
    result = run_plan(load_plan(plan))
    assert [check.name for check in result.checks] == ["repeat", "limits"]
    assert "regression:swapped-order" in result.checks[-1].problems[-1]


@pytest.mark.parametrize(
    ("plan", "message"),
    [
        ({"repeat": 0}, "verify.yaml:1:"),
        ({"regressions": [{"name": "x", "expect": [{"case": "a_reset", "failure": "f"}]}]},
         "exactly one of env, agent_command, patch (found: none)"),
        ({"regressions": [{**SWAPPED, "expect": [{"case": "a_rest", "failure": "f"}]}]},
         "expected case 'a_rest' is not in the suite (did you mean 'a_reset'?)"),
        ({"regressions": [SWAPPED, SWAPPED]}, "duplicate regression name 'swapped-order'"),
        ({"regressions": [{"name": "p", "expect": [{"case": "a_reset", "failure": "f"}],
                           "patch": {"file": "suite.yaml", "replace": "nope", "with": ""}}]},
         "patch text 'nope' does not occur in 'suite.yaml'"),
        ({"regressions": [{"name": "p", "expect": [{"case": "a_reset", "failure": "f"}],
                           "patch": {"file": "../verify.yaml", "replace": "a", "with": ""}}]},
         "is outside the suite directory"),
        ({"regressions": [{"name": "p", "expect": [{"case": "a_reset", "failure": "f"}],
                           "patch": {"file": "suite\0.yaml", "replace": "a", "with": ""}}]},
         "patch file 'suite\\x00.yaml' holds a NUL character"),
        ({"regresions": []}, "unknown key 'regresions' in plan (did you mean 'regressions'?)"),
    ],
)  # fmt: skip
def test_bad_plans_are_refused_with_file_and_line(
    root: Path, plan: dict[str, Any], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_plan(root, plan)
    with pytest.raises(ConfigErrors) as caught:
        load_plan(path)
    assert message in str(caught.value)
    assert run_cli(["verify", str(path), "--out", str(root / "o")]) == 2
    assert "error: " in capsys.readouterr().err
    assert not (root / "o").exists()


def test_line_numbers_point_at_the_offending_key(root: Path) -> None:
    path = root / "verify.yaml"
    path.write_text("suite: suite\nrepeat: 1\nregressions:\n  - name: a\n    expect: []\n")
    with pytest.raises(ConfigErrors) as caught:
        load_plan(path)
    assert any(error.line == 4 or error.line == 5 for error in caught.value.errors)


def test_missing_suite_is_a_bad_plan(tmp_path: Path) -> None:
    path = write_plan(tmp_path, {})
    assert run_cli(["verify", str(path), "--out", str(tmp_path / "o")]) == 2


@pytest.mark.parametrize(
    ("failure", "hint"),
    [
        ("call_ordr", " (did you mean 'call_order'?)"),
        ("budget:max_tool_call", " (did you mean 'budget:max_tool_calls'?)"),
        ("casette_mismatch", " (did you mean 'cassette_mismatch'?)"),
        ("zzz", ""),
    ],
)
def test_unknown_failure_kind_is_refused_at_load(
    root: Path, failure: str, hint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    step = {**SWAPPED, "expect": [{"case": "a_reset", "failure": "call_order"},
                                  {"case": "b_refund", "failure": failure}]}  # fmt: skip
    path = root / "verify.yaml"
    path.write_text(
        "suite: suite\nregressions:\n" + "".join(f"  - {json.dumps(s)}\n" for s in [step]),
        encoding="utf-8",
    )
    with pytest.raises(ConfigErrors) as caught:
        load_plan(path)
    [error] = caught.value.errors
    assert str(error).endswith(
        f"expected failure '{failure}' is not a failure kind or check type{hint}"
    )
    assert error.line == 3
    assert run_cli(["verify", str(path), "--out", str(root / "o")]) == 2
    assert f"'{failure}' is not a failure kind" in capsys.readouterr().err


@pytest.mark.parametrize(
    "failure",
    ["call_order", "must_call", "budget:max_tool_calls", "budget:max_cost_usd", "timeout",
     "cassette_mismatch", "assertion_failed", "json_schema_error"],
)  # fmt: skip
def test_every_known_failure_kind_loads(root: Path, failure: str) -> None:
    step = {**SWAPPED, "expect": [{"case": "a_reset", "failure": failure}]}
    plan = load_plan(write_plan(root, {"regressions": [step]}))
    assert plan.config.regressions[0].expect[0].failure == failure
