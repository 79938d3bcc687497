"""Each framework adapter through the real CLI: ``trialrun run --mode record``, then replay.

One suite with ``agent_channel: fd`` holds a case per agent script under tests/sdk_agents/ (the
case input names the script). Record runs the real tools inside the agents and writes the
cassettes; replay must give the same final output and tool sequence while the real tools would
raise (they refuse to run when ``TRIALRUN_MODE`` is replay) and the recorded results carry the
recording process's pid, so equal outputs prove the results came from the cassettes.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from builders import run_trialrun, write_suite
from paths import SDK_AGENTS_DIR

# Real agents or real runs end to end: seconds each (pytest -m "not slow" skips them).
pytestmark = pytest.mark.slow

AGENTS = SDK_AGENTS_DIR
CASES = ("plain", "openai_agents", "langchain", "langgraph", "pydantic_ai")
TOOLS = ("search_docs", "get_order", "refund", "escalate", "weather")


@dataclass(frozen=True)
class Run:
    proc: subprocess.CompletedProcess[str]
    run_dir: Path
    summary: dict[str, Any]
    events: list[dict[str, Any]]

    def case(self, case_id: str) -> dict[str, Any]:
        [case] = [c for c in self.summary["cases"] if c["id"] == case_id]
        return case

    def of(self, case_id: str, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["case_id"] == case_id and e["type"] == kind]

    def output(self, case_id: str) -> dict[str, Any]:
        [event] = self.of(case_id, "final_output")
        output: dict[str, Any] = event["output"]
        return output

    def tool_sequence(self, case_id: str) -> list[str]:
        # Exact order for every framework: LangChain's sync ToolNode runs a turn's calls in a
        # thread pool, and the adapter still sends them in the model's order.
        return [e["name"] for e in self.of(case_id, "tool_call") if e.get("kind") != "handoff"]


def make_suite(root: Path) -> Path:
    cases = {
        case_id: {
            "input": {"agent": case_id, "q": "reset password", "question": "reset password"},
            "cassette": f"cassettes/{case_id}.jsonl",
        }
        for case_id in CASES
    }
    return write_suite(
        root,
        name="sdk",
        agent=[sys.executable, AGENTS / "dispatch.py"],
        tools=TOOLS,
        cases=cases,
        settings="agent_channel: fd\n",
        git=True,
    )


def run(suite: Path, out: Path, *extra: str) -> Run:
    proc = run_trialrun(
        "run", suite, "--out", out, "-j", "2", *extra, cwd=suite.parent, timeout=180
    )
    [run_dir] = (out / "sdk").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    lines = (run_dir / "run.jsonl").read_text(encoding="utf-8").splitlines()
    return Run(proc, run_dir, summary, [json.loads(line) for line in lines])


@pytest.fixture(scope="module")
def recorded_then_replayed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Run, Run]:
    root = tmp_path_factory.mktemp("sdk_e2e")
    suite = make_suite(root)
    record = run(suite, root / "out-record", "--mode", "record")
    replay = run(suite, root / "out-replay", "--mode", "replay")
    return suite, record, replay


def test_both_runs_pass(recorded_then_replayed: tuple[Path, Run, Run]) -> None:
    _, record, replay = recorded_then_replayed
    for done in (record, replay):
        assert done.proc.returncode == 0, done.proc.stdout + done.proc.stderr
        assert [c["status"] for c in done.summary["cases"]] == ["pass"] * len(CASES)
    assert all(replay.case(case_id)["unused_recordings"] == 0 for case_id in CASES)


@pytest.mark.parametrize("case_id", CASES)
def test_record_writes_what_the_real_tools_returned(
    recorded_then_replayed: tuple[Path, Run, Run], case_id: str
) -> None:
    suite, record, _ = recorded_then_replayed
    cassette = suite / "cassettes" / f"{case_id}.jsonl"
    entries = [json.loads(line) for line in cassette.read_text(encoding="utf-8").splitlines()]
    recorded_tools = [e["tool"] for e in entries]
    assert recorded_tools == record.tool_sequence(case_id)
    first = next(e for e in entries if e["tool"] == "search_docs")
    assert first["args"]["q"] == "reset password"
    assert "pid" in json.dumps(first["result"])  # the real tool ran in the recording agent


@pytest.mark.parametrize("case_id", CASES)
def test_replay_gives_the_same_output_and_tool_sequence_from_the_cassette(
    recorded_then_replayed: tuple[Path, Run, Run], case_id: str
) -> None:
    _, record, replay = recorded_then_replayed
    assert replay.output(case_id) == record.output(case_id)
    assert replay.tool_sequence(case_id) == record.tool_sequence(case_id)
    answers = [(e["ok"], e["result"], e["error"]) for e in replay.of(case_id, "tool_result")]
    assert sorted(map(repr, answers)) == sorted(
        repr((e["ok"], e["result"], e["error"])) for e in record.of(case_id, "tool_result")
    )


def test_what_each_model_saw_includes_the_failed_calls(
    recorded_then_replayed: tuple[Path, Run, Run],
) -> None:
    _, _, replay = recorded_then_replayed
    plain = replay.output("plain")
    assert plain["refused"] == "refund of order 1 needs approval"
    assert plain["types"] == ["Order"]  # rebuilt from the return annotation in replay too
    openai_saw = [s["output"] for s in replay.output("openai_agents")["model_saw"]]
    assert openai_saw[1] == "An error occurred while running the tool. Please try again."
    langchain_saw = replay.output("langchain")["model_saw"]
    assert [m["status"] for m in langchain_saw] == ["success", "error"]
    pydantic_saw = replay.output("pydantic_ai")["model_saw"]
    assert pydantic_saw[1]["saw"].startswith('{"error":"order 7 does not exist')
    assert replay.case("plain")["tokens_in"] == 12  # usage went through the channel


def test_replay_with_a_recording_missing_fails_the_case_cleanly(
    recorded_then_replayed: tuple[Path, Run, Run], tmp_path: Path
) -> None:
    suite, _, _ = recorded_then_replayed
    broken = tmp_path / "suite"
    shutil.copytree(suite, broken)
    cassette = broken / "cassettes" / "plain.jsonl"
    lines = cassette.read_text(encoding="utf-8").splitlines()
    cassette.write_text("\n".join(line for line in lines if '"refund"' not in line) + "\n")

    replay = run(broken, tmp_path / "out", "--mode", "replay", "--case", "plain")
    assert replay.proc.returncode == 1, replay.proc.stdout + replay.proc.stderr
    case = replay.case("plain")
    assert (case["status"], case["failure_kind"]) == ("fail", "cassette_mismatch")
    assert "refund" in case["failure_reason"]
