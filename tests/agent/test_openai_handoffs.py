"""OpenAI Agents SDK handoffs become tool-like ``handoff:<agent>`` events that assertions see.

The SDK agent of tests/sdk_agents/openai_agents_agent.py (a scripted model: two tools, a handoff
from ``triage`` to ``billing``, a tool of ``billing``) is recorded, then replayed with assertions
naming the handoff. The handoff is never in the cassette (it returns an agent, which runs in the
agent's process in every mode), never counts as a tool call, and a suite whose assertions ask
for a handoff that did not happen fails.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

AGENTS = Path(__file__).resolve().parents[1] / "sdk_agents"
TOOLS = ["search_docs", "get_order", "escalate"]


def make_suite(root: Path, assertions: list[dict[str, Any]], budgets: dict[str, Any]) -> Path:
    suite = root / "suite"
    (suite / "cases").mkdir(parents=True, exist_ok=True)
    (suite / "suite.yaml").write_text(
        json.dumps(
            {
                "suite_name": "handoffs",
                "agent_command": [sys.executable, str(AGENTS / "dispatch.py")],
                "agent_channel": "fd",
                "mode": "replay",
                "cases_path": "cases",
                "tool_registry": TOOLS,
                "assertions": assertions,
                "budgets": budgets,
            }
        ),
        encoding="utf-8",
    )
    case = {
        "id": "t1",
        "input": {"agent": "openai_agents", "question": "reset password"},
        "cassette": "cassettes/t1.jsonl",
    }
    (suite / "cases" / "t1.yaml").write_text(json.dumps(case), encoding="utf-8")
    return suite


def run(root: Path, suite: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = root / f"out-{len(list(root.glob('out-*')))}"
    done = subprocess.run(
        [sys.executable, "-m", "trialrun", "run", str(suite), "--no-baseline", "--out", str(out)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=180,
    )
    [run_dir] = (out / "handoffs").iterdir()
    return done, run_dir


def events(run_dir: Path) -> list[dict[str, Any]]:
    lines = (run_dir / "run.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("handoffs")
    suite = make_suite(root, [], {})
    done = subprocess.run(
        [sys.executable, "-m", "trialrun", "run", str(suite), "--mode", "record", "--no-baseline"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return suite / "cassettes" / "t1.jsonl"


def with_cassette(root: Path, recorded: Path, assertions: list[Any], budgets: Any) -> Path:
    suite = make_suite(root, assertions, budgets)
    (suite / "cassettes").mkdir()
    (suite / "cassettes" / "t1.jsonl").write_bytes(recorded.read_bytes())
    return suite


def test_the_cassette_holds_tools_only(recorded: Path) -> None:
    tools = [json.loads(line)["tool"] for line in recorded.read_text("utf-8").splitlines()]
    assert sorted(tools) == sorted(TOOLS)


def test_replay_shows_the_handoff_and_assertions_see_it(tmp_path: Path, recorded: Path) -> None:
    assertions = [
        {"type": "must_call", "tools": ["handoff:billing"]},
        {"type": "call_order", "order": ["search_docs", "handoff:billing", "escalate"]},
        {
            "type": "tool_args",
            "tool": "handoff:billing",
            "schema": {
                "type": "object",
                "properties": {"from": {"const": "triage"}},
                "required": ["from"],
            },
        },
    ]
    # Three tool calls: the handoff is not one of them.
    suite = with_cassette(tmp_path, recorded, assertions, {"max_tool_calls": 3})
    done, run_dir = run(tmp_path, suite)
    assert done.returncode == 0, done.stdout + done.stderr
    calls = [e for e in events(run_dir) if e["type"] == "tool_call"]
    [handoff] = [e for e in calls if e.get("kind") == "handoff"]
    assert (handoff["name"], handoff["args"]) == ("handoff:billing", {"from": "triage"})
    [case] = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))["cases"]
    assert (case["tool_calls"], case["unused_recordings"]) == (3, 0)
    receipt = (run_dir / "receipt.jsonl").read_text(encoding="utf-8")
    assert '"name":"handoff:billing"' in receipt


def test_a_handoff_that_did_not_happen_fails_the_case(tmp_path: Path, recorded: Path) -> None:
    assertions = [{"type": "must_call", "tools": ["handoff:refunds"]}]
    suite = with_cassette(tmp_path, recorded, assertions, {})
    done, _ = run(tmp_path, suite)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "handoff:refunds" in done.stdout


def test_a_budget_on_tool_calls_ignores_the_handoff_but_not_the_tools(
    tmp_path: Path, recorded: Path
) -> None:
    suite = with_cassette(tmp_path, recorded, [], {"max_tool_calls": 2})
    done, _ = run(tmp_path, suite)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "max_tool_calls" in done.stdout
