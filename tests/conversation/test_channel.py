"""The ``fd`` channel and agent-run tools: protocol on a socket, tool_run / tool_report."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from builders import run_trialrun
from paths import AGENTS_DIR
from trialrun.base.results import AgentRun
from trialrun.conversation.process import Spawn
from trialrun.conversation.session import Limits, run_agent
from trialrun.tools.base import ToolBackend
from trialrun.tools.cassette import Cassette, ReplayBackend
from trialrun.tools.live import LiveBackend
from trialrun.tools.recorder import RecordingBackend

AGENT = AGENTS_DIR / "fd_agent.py"
HANGUP_AGENT = AGENTS_DIR / "fd_hangup.py"
LIMITS = Limits(wall_ms=None, idle_ms=2000, max_message_bytes=1024 * 1024, kill_grace_ms=300)


def run(
    behaviour: str, backend: ToolBackend, mode: str = "record", agent: Path = AGENT
) -> AgentRun:
    spawn = Spawn(
        [sys.executable, str(agent), behaviour],
        extra_env={"TRIALRUN_MODE": mode},
        channel="fd",
    )
    return asyncio.run(
        run_agent(
            spawn,
            case_id="c",
            task_input={"q": "refund"},
            tools=backend,
            allowed_tools={"lookup"},
            limits=LIMITS,
        )
    )


def recording(tmp_path: Path) -> RecordingBackend:
    # No tool_module provides ``lookup``: it lives in the agent and runs there.
    return RecordingBackend(LiveBackend({}, timeout_s=5), tmp_path / "c.jsonl")


def test_record_runs_the_agents_own_tool_and_writes_what_it_reported(tmp_path: Path) -> None:
    backend = recording(tmp_path)
    result = run("local", backend)
    backend.close(clean=result.failure is None)

    assert result.failure is None, result.failure
    assert result.output == {"seen": {"answer": "REFUND", "source": "real"}, "mode": "record"}
    # The agent gets its own result back as replay will give it (keys sorted, redacted), so a
    # framework that shows the model str(result) sends the same request in record and replay.
    assert list(result.output["seen"]) == ["answer", "source"]
    [call] = result.tool_calls
    assert (call.name, call.args, call.ok, call.result) == (
        "lookup",
        {"q": "refund"},
        True,
        {"answer": "REFUND", "source": "real"},
    )
    [line] = (tmp_path / "c.jsonl").read_text().splitlines()
    recorded = json.loads(line)
    assert isinstance(recorded.pop("recorded_at"), str)  # when: new recordings all say it
    assert recorded == {
        "tool": "lookup",
        "args": {"q": "refund"},
        "ok": True,
        "result": {"answer": "REFUND", "source": "real"},
    }
    # The log sent while the tool ran is kept; stdout is free text and lands in the output tail.
    assert any(e["type"] == "log" and e["message"] == "tool running" for e in result.events)
    assert "a framework banner on stdout" in result.stderr_tail
    assert "warming up" in result.stderr_tail


def test_replay_answers_from_the_cassette_without_asking_the_agent(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    cassette.write_text(
        json.dumps({"tool": "lookup", "args": {"q": "refund"}, "ok": True, "result": "recorded"})
        + "\n"
    )
    backend = ReplayBackend(Cassette.load(cassette), None)
    result = run("local", backend, mode="replay")

    assert result.failure is None, result.failure
    assert result.output == {"seen": "recorded", "mode": "replay"}
    assert backend.unused() == 0


def test_a_mismatch_in_replay_fails_the_case_as_usual(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    cassette.write_text(json.dumps({"tool": "lookup", "args": {"q": "other"}, "ok": True}) + "\n")
    result = run("local", ReplayBackend(Cassette.load(cassette), None), mode="replay")

    assert result.failure is not None
    assert result.failure.kind == "cassette_mismatch"


@pytest.mark.parametrize(
    ("behaviour", "kind", "words"),
    [
        ("final-now", "protocol_error", "expected the tool_report of call 'c1' (lookup)"),
        ("stray", "protocol_error", "tool_report for call 'nope' that trialrun did not ask"),
        ("noise", "stdout_noise", "non-protocol text on channel (line 1)"),
        ("no-report", "idle_timeout", "idle_timeout_ms=2000"),
        ("exit", "agent_crashed", "Agent exited with code 3 before sending final_output"),
    ],
)
def test_channel_faults_fail_the_case_with_a_named_reason(
    tmp_path: Path, behaviour: str, kind: str, words: str
) -> None:
    backend = recording(tmp_path)
    result = run(behaviour, backend)
    backend.close(clean=result.failure is None)

    assert result.failure is not None
    assert result.failure.kind == kind
    assert words in result.failure.message
    assert not (tmp_path / "c.jsonl").exists(), "a failed case must not replace the cassette"


@pytest.mark.parametrize(
    ("behaviour", "message", "exit_code"),
    [
        (
            "unread",
            "Agent exited with code 1 before sending final_output; it closed its channel "
            "without reading the task_start message",
            1,
        ),
        (
            "unread-alive",
            "Agent closed its channel without reading the tool_run of call 'c1' (lookup) "
            "before sending final_output (it was still running)",
            -15,
        ),
        (
            "partial",
            "Agent exited with code 1 before sending final_output; it closed its channel in the "
            "middle of a message (channel line 1 ends without a newline and is not whole JSON: "
            '{"type": "tool_call", "name": "look)',
            1,
        ),
    ],
)
def test_an_agent_that_hangs_up_mid_protocol_fails_as_crashed_with_its_stderr(
    tmp_path: Path, behaviour: str, message: str, exit_code: int
) -> None:
    # "unread": the agent exits with task_start unread, so the kernel resets our end of the
    # socket and the read fails with ECONNRESET instead of seeing the end of the stream.
    backend = recording(tmp_path)
    result = run(behaviour, backend, agent=HANGUP_AGENT)
    backend.close(clean=result.failure is None)

    assert result.failure is not None
    assert (result.failure.kind, result.failure.status) == ("agent_crashed", "error")
    assert result.failure.message == message
    assert result.failure.stderr_tail.startswith("fake agent: starting\n")
    assert result.exit_code == exit_code


def test_a_suite_run_goes_on_after_an_agent_resets_its_channel(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    (suite / "cases").mkdir(parents=True)
    command = [sys.executable, str(HANGUP_AGENT), "unread-for", "t1"]
    (suite / "suite.yaml").write_text(
        f"suite_name: sdk\nagent_command: {json.dumps(command)}\n"
        "mode: replay\ncases_path: cases\ntool_registry: [lookup]\nagent_channel: fd\n"
        "assertions: []\n",
        encoding="utf-8",
    )
    for case_id in ("t1", "t2"):
        case = {"id": case_id, "input": {"case": case_id}, "cassette": "cassettes/none.jsonl"}
        (suite / f"cases/{case_id}.yaml").write_text(json.dumps(case), encoding="utf-8")
    (suite / "cassettes").mkdir()
    (suite / "cassettes/none.jsonl").write_text("", encoding="utf-8")
    out = tmp_path / "out"
    done = run_trialrun("run", suite, "--out", out, "--no-baseline", cwd=tmp_path)

    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    [run_dir] = (out / "sdk").iterdir()
    artifacts = {"summary.json", "run.jsonl", "receipt.jsonl", "junit.xml", "report.html"}
    assert artifacts <= {path.name for path in run_dir.iterdir()}
    summary = json.loads((run_dir / "summary.json").read_text())
    first, second = summary["cases"]
    assert (first["id"], first["status"], second["id"], second["status"]) == (
        "t1",
        "error",
        "t2",
        "pass",
    )
    assert "closed its channel without reading the task_start message" in done.stdout
    assert "No module named 'agents'" in done.stdout


def test_a_suite_with_agent_channel_fd_records_then_replays_through_the_cli(
    tmp_path: Path,
) -> None:
    suite = tmp_path / "suite"
    (suite / "cases").mkdir(parents=True)
    (suite / "suite.yaml").write_text(
        "suite_name: sdk\n"
        f"agent_command: [{json.dumps(sys.executable)}, {json.dumps(str(AGENT))}, local]\n"
        "mode: replay\ncases_path: cases\ntool_registry: [lookup]\nagent_channel: fd\n",
        encoding="utf-8",
    )
    case = {"id": "t1", "input": {"q": "refund"}, "cassette": "cassettes/t1.jsonl"}
    (suite / "cases/t1.yaml").write_text(json.dumps(case), encoding="utf-8")

    def trialrun(mode: str) -> dict[str, object]:
        out = tmp_path / f"out-{mode}"
        done = run_trialrun(
            "run", suite, "--mode", mode, "--out", out, "--no-baseline", cwd=tmp_path
        )
        assert done.returncode == 0, done.stdout + done.stderr
        [run_dir] = (out / "sdk").iterdir()
        summary: dict[str, object] = json.loads((run_dir / "summary.json").read_text())
        return summary

    trialrun("record")
    assert json.loads((suite / "cassettes/t1.jsonl").read_text())["result"]["source"] == "real"
    summary = trialrun("replay")
    assert summary["cases"][0]["status"] == "pass"  # type: ignore[index]


@pytest.mark.parametrize(
    ("behaviour", "message"),
    [
        (
            "unread",
            "Agent exited with code 1 before sending final_output; it closed its channel "
            "without reading the task_start message",
        ),
        (
            "partial",
            "Agent exited with code 1 before sending final_output; it closed its channel in the "
            "middle of a message (channel line 1 ends without a newline and is not whole JSON: "
            '{"type": "tool_call", "name": "look)',
        ),
    ],
)
def test_in_replay_a_hang_up_on_the_socket_is_reported_as_in_live(
    tmp_path: Path, behaviour: str, message: str
) -> None:
    # A cassette answers without waiting; the reset (ECONNRESET) or the half message must
    # still come out as it does with a live backend.
    cassette = tmp_path / "c.jsonl"
    cassette.write_text("")
    result = run(
        behaviour, ReplayBackend(Cassette.load(cassette), None), "replay", agent=HANGUP_AGENT
    )
    assert result.failure is not None
    assert (result.failure.kind, result.failure.message) == ("agent_crashed", message)


def test_in_replay_a_call_on_the_socket_is_answered_from_the_cassette(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    cassette.write_text(
        json.dumps({"tool": "lookup", "args": {"q": "refund"}, "ok": True, "result": "recorded"})
        + "\n"
    )
    result = run("local", ReplayBackend(Cassette.load(cassette), None), mode="replay")
    assert result.failure is None, result.failure
    assert result.output == {"seen": "recorded", "mode": "replay"}
