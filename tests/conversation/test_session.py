"""run_agent against real fake agents: every outcome, deadline, event and failure message."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from paths import AGENTS_DIR
from processes import process_gone
from trialrun.base.results import AgentRun
from trialrun.conversation.session import Limits, run_agent
from trialrun.errors import CassetteError, CassetteMismatch, NearestRecording

AGENTS = AGENTS_DIR
FAST = Limits(wall_ms=None, idle_ms=2000, max_message_bytes=64 * 1024 * 1024, kill_grace_ms=500)
# For the tests that prove a failure was noticed without waiting out the idle timeout.
PATIENT = replace(FAST, idle_ms=60_000)


@dataclass(frozen=True)
class Outcome:
    """Shaped like tools.base.ToolOutcome (the session only reads these three attributes)."""

    ok: bool
    result: Any = None
    error: str | None = None


@dataclass
class FakeTools:
    """A tool backend that answers from a dict, or raises what it is told to."""

    answers: dict[str, Outcome | BaseException] = field(default_factory=dict)
    delay_s: float = 0.0
    calls: list[tuple[str, Any]] = field(default_factory=list)

    async def call(self, name: str, args: dict[str, Any], local: Any = None) -> Outcome:
        if local is not None:
            self.calls.append((name, args))
            reported: Outcome = await local()
            return reported
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        return self._answer(name, args)

    def _answer(self, name: str, args: dict[str, Any]) -> Outcome:
        self.calls.append((name, args))
        answer = self.answers.get(name, Outcome(ok=True, result={"echo": args}))
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def close(self, *, clean: bool) -> None:
        pass

    def unused(self) -> int:
        return 0


def agent(name: str, *args: str) -> list[str]:
    return [sys.executable, str(AGENTS / name), *args]


def run_case(
    argv: list[str],
    *,
    tools: FakeTools | None = None,
    allowed: tuple[str, ...] = ("search_docs",),
    limits: Limits = FAST,
    task_input: Any = None,
    env: dict[str, str] | None = None,
) -> AgentRun:
    return asyncio.run(
        run_agent(
            argv,
            case_id="t1",
            task_input={"ticket": "reset password"} if task_input is None else task_input,
            tools=tools or FakeTools(),  # type: ignore[arg-type]
            allowed_tools=allowed,
            limits=limits,
            env=env,
        )
    )


def event_types(run: AgentRun) -> list[str]:
    return [event["type"] for event in run.events]


# -- the happy path ----------------------------------------------------------------------------


def test_tool_call_then_final_output() -> None:
    tools = FakeTools({"search_docs": Outcome(ok=True, result={"hits": ["kb-1"]})})
    run = run_case(agent("echo_agent.py", "search_docs", "2"), tools=tools)
    assert run.failure is None
    assert run.output == {
        "echo": {"ticket": "reset password"},
        "results": [
            {
                "type": "tool_result",
                "call_id": f"c{i}",
                "ok": True,
                "result": {"hits": ["kb-1"]},
                "error": None,
            }
            for i in range(2)
        ],
    }
    assert [(c.name, c.call_id, c.ok) for c in run.tool_calls] == [
        ("search_docs", "c0", True),
        ("search_docs", "c1", True),
    ]
    assert tools.calls[0] == ("search_docs", {"input": {"ticket": "reset password"}, "n": 0})
    assert event_types(run) == [
        "task_start",
        "tool_call",
        "tool_result",
        "tool_call",
        "tool_result",
        "final_output",
    ]
    # It exits as its output is sent: it beats trialrun's stop or not, and either way says so.
    assert (run.exit_code, run.stopped_by_trialrun) in {(0, False), (None, True)}
    assert 0 < run.wall_ms < 5000


def test_events_use_the_peer_run_jsonl_shape() -> None:
    tools = FakeTools({"search_docs": Outcome(ok=False, error="down")})
    run = run_case(agent("echo_agent.py"), tools=tools)
    start, call, result, final = run.events
    assert start["type"] == "task_start" and start["case_id"] == "t1"
    assert start["task_id"] == "t1" and start["input"] == {"ticket": "reset password"}
    assert isinstance(start["timestamp"], float) and abs(start["timestamp"] - time.time()) < 60
    assert {k: call[k] for k in ("name", "call_id", "args")} == {
        "name": "search_docs",
        "call_id": "c0",
        "args": {"input": {"ticket": "reset password"}, "n": 0},
    }
    assert {k: result[k] for k in ("call_id", "ok", "result", "error")} == {
        "call_id": "c0",
        "ok": False,
        "result": None,
        "error": "down",
    }
    assert final["output"] == run.output
    assert run.tool_errors == 1
    json.dumps(run.events)  # plain data, ready for run.jsonl


def test_log_and_usage_messages_are_recorded_and_usage_accumulates() -> None:
    run = run_case(agent("usage.py"))
    assert run.failure is None
    assert (run.usage.tokens_in, run.usage.tokens_out, run.usage.model) == (30, 12, "fake-model-2")
    assert run.usage.cost_usd == pytest.approx(0.03)
    usage_events = [e for e in run.events if e["type"] == "usage"]
    assert usage_events[2] == {**usage_events[2], "tokens_in": None, "tokens_out": 2, "model": None}


def test_locale_independent_non_ascii_round_trip() -> None:
    text = {"ticket": "Grüße, 東京 — café ☕ 😀 ﷽"}
    env = {**os.environ, "LC_ALL": "C", "LANG": "C", "PYTHONCOERCECLOCALE": "0"}
    run = run_case(agent("echo_agent.py", "search_docs"), task_input=text, env=env)
    assert run.failure is None
    assert run.output is not None and run.output["echo"] == text
    assert run.output["results"][0]["result"] == {"echo": {"input": text, "n": 0}}


def test_lone_surrogates_from_the_case_and_from_the_agent_never_crash() -> None:
    run = run_case(agent("surrogates.py", "escapes"), task_input={"s": "\ud83d"})
    assert run.failure is None
    assert run.output == {"text": "\ud800", "input": {"s": "\ud83d"}}


def test_five_megabyte_final_output() -> None:
    run = run_case(agent("huge.py", str(5_000_000)))
    assert run.failure is None
    assert run.output is not None and len(run.output["blob"]) == 5_000_000
    assert run.wall_ms < 5000


# -- agent-side failures -------------------------------------------------------------------------


def test_crash_reports_the_exit_code_and_the_traceback() -> None:
    run = run_case(agent("crash.py", "3"))
    assert run.failure is not None
    assert (run.failure.kind, run.failure.status) == ("agent_crashed", "error")
    assert run.failure.message == "Agent exited with code 3 before sending final_output"
    assert "RuntimeError: fake agent crashed on purpose" in run.failure.stderr_tail
    assert run.stderr_tail == run.failure.stderr_tail
    assert run.exit_code == 3
    assert run.events[-1] == {**run.events[-1], "type": "agent_error", "kind": "agent_crashed"}


def test_agent_that_exits_without_reading_its_input() -> None:
    run = run_case(agent("exit_early.py", "0"))
    assert run.failure is not None
    assert run.failure.kind == "agent_crashed"
    assert "exited with code 0 before sending final_output" in run.failure.message


def test_agent_killed_by_a_signal_is_named() -> None:
    code = "import os, signal, sys; sys.stdin.readline(); os.kill(os.getpid(), signal.SIGSEGV)"
    run = run_case([sys.executable, "-c", code])
    assert run.failure is not None
    assert run.failure.message == "Agent was killed by SIGSEGV before sending final_output"


def test_agent_that_exits_while_a_child_holds_stdout_is_not_waited_for(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    started = time.monotonic()
    run = run_case(agent("spawn_child.py", str(pid_file), "exit"), limits=PATIENT)
    assert time.monotonic() - started < 30  # the idle timeout is 60 s: we did not wait for it
    assert run.failure is not None
    assert run.failure.kind == "agent_crashed"
    assert "code 3" in run.failure.message and "still holds its stdout open" in run.failure.message
    assert process_gone(int(pid_file.read_text()))


def test_a_line_sent_just_after_the_agent_exited_still_counts() -> None:
    # The agent exits at once; a helper still holding its stdout sends the final output later.
    late = json.dumps({"type": "final_output", "output": {"late": True}})
    helper = f"import time; time.sleep(0.05); print({late!r}, flush=True)"
    code = (
        "import subprocess, sys\n"
        "sys.stdin.readline()\n"
        f"subprocess.Popen([sys.executable, '-c', {helper!r}])\n"
    )
    run = run_case([sys.executable, "-c", code])
    assert run.failure is None
    assert (run.output, run.exit_code) == ({"late": True}, 0)


def test_task_error_fails_as_error_with_its_message() -> None:
    run = run_case(agent("task_error.py", "no idea, sorry"))
    assert run.failure is not None
    assert (run.failure.kind, run.failure.status, run.failure.message) == (
        "task_error",
        "error",
        "no idea, sorry",
    )
    assert run.events[-1]["type"] == "task_error"
    assert run.events[-1]["data"] == {"attempt": 1}
    assert "agent_error" not in event_types(run)


def test_stdout_noise_names_the_line_and_the_fix() -> None:
    run = run_case(agent("noise.py", "Loading model..."))
    assert run.failure is not None
    assert (run.failure.kind, run.failure.status) == ("stdout_noise", "error")
    assert run.failure.message == (
        "agent printed non-protocol text on stdout (line 1): Loading model...; print logs to stderr"
    )
    assert run.events[-1]["kind"] == "stdout_noise"


def test_a_truncated_protocol_line_is_invalid_json_not_noise() -> None:
    run = run_case(
        agent("raw_lines.py", '{"type":"log","message":"a"}', '{"type":"final_output","o')
    )
    assert run.failure is not None
    assert (run.failure.kind, run.failure.status) == ("protocol_error", "error")
    assert run.failure.message.startswith("agent sent invalid JSON on stdout (line 2): ")
    assert "ends before its JSON does" in run.failure.message
    assert "print logs to stderr" not in run.failure.message


def test_line_numbers_count_every_stdout_line() -> None:
    run = run_case(agent("raw_lines.py", '{"type":"log","message":"a"}', "", "oops"))
    assert run.failure is not None
    assert "(line 3): oops" in run.failure.message


def test_non_object_final_output_is_a_protocol_error() -> None:
    run = run_case(agent("non_object.py", '"just text"'))
    assert run.failure is not None
    assert (run.failure.kind, run.failure.status) == ("protocol_error", "error")
    assert "final_output.output must be a JSON object, found string" in run.failure.message
    assert run.output is None


def test_unknown_message_type_is_a_protocol_error() -> None:
    run = run_case(agent("raw_lines.py", '{"type":"progress","pct":5}'))
    assert run.failure is not None
    assert run.failure.kind == "protocol_error"
    assert "unknown message type 'progress'" in run.failure.message


def test_invalid_utf8_never_crashes() -> None:
    run = run_case(agent("surrogates.py", "invalid"))
    assert run.failure is not None
    assert (run.failure.kind, run.failure.status) == ("protocol_error", "error")
    assert "invalid UTF-8 on stdout (line 1" in run.failure.message
    noise = run_case(agent("surrogates.py", "noise"))
    assert noise.failure is not None
    assert noise.failure.kind == "stdout_noise"


def test_message_over_the_limit_fails_as_message_too_large() -> None:
    limits = Limits(wall_ms=None, idle_ms=2000, max_message_bytes=10_000, kill_grace_ms=500)
    run = run_case(agent("huge.py", "20000"), limits=limits)
    assert run.failure is not None
    assert (run.failure.kind, run.failure.status) == ("message_too_large", "error")
    assert "max_message_bytes=10000" in run.failure.message
    assert "(stdout line 1)" in run.failure.message


# -- tools ---------------------------------------------------------------------------------------


def test_disallowed_tool_fails_and_lists_the_allowed_ones() -> None:
    tools = FakeTools()
    run = run_case(agent("disallowed_tool.py"), tools=tools, allowed=("search_docs", "lookup"))
    assert run.failure is not None
    assert (run.failure.kind, run.failure.status) == ("tool_not_allowed", "fail")
    assert (
        run.failure.message
        == "Tool not allowed: delete_everything. Allowed tools: lookup, search_docs"
    )
    assert tools.calls == []
    assert [(c.name, c.ok) for c in run.tool_calls] == [("delete_everything", False)]
    assert event_types(run)[-2:] == ["tool_call", "agent_error"]


def test_a_tool_name_of_any_length_is_quoted_at_200_characters() -> None:
    # The whole name stays in the trace; every failure message quoting it would be that long.
    run = run_case(agent("disallowed_tool.py", "x" * 100_000), allowed=("lookup",))
    assert run.failure is not None
    assert run.failure.message == f"Tool not allowed: {'x' * 197}.... Allowed tools: lookup"
    assert run.tool_calls[0].name == "x" * 100_000


def test_each_call_records_when_it_started_on_the_case_clock() -> None:
    tools = FakeTools({"search_docs": Outcome(ok=True, result={"hits": []})})
    run = run_case(agent("echo_agent.py", "search_docs", "3"), tools=tools)
    starts = [call.start_ms for call in run.tool_calls]
    assert None not in starts and len(starts) == 3
    assert starts == sorted(starts)
    assert starts[0] > 0 and starts[-1] + run.tool_calls[-1].duration_ms <= run.wall_ms + 1
    refused = run_case(agent("disallowed_tool.py"), allowed=())
    [call] = refused.tool_calls
    assert call.start_ms is not None and 0 < call.start_ms <= refused.wall_ms + 1


def test_no_allowed_tools_says_none() -> None:
    run = run_case(agent("disallowed_tool.py"), allowed=())
    assert run.failure is not None
    assert run.failure.message.endswith("Allowed tools: <none>")


def test_cassette_mismatch_fails_with_the_nearest_recordings() -> None:
    mismatch = CassetteMismatch(
        tool="search_docs",
        args={"q": "x"},
        args_json='{"q":"x"}',
        nearest=[NearestRecording("search_docs", '{"q":"y"}', 0.9)],
    )
    run = run_case(agent("echo_agent.py"), tools=FakeTools({"search_docs": mismatch}))
    assert run.failure is not None
    assert (run.failure.kind, run.failure.status) == ("cassette_mismatch", "fail")
    assert run.failure.message == str(mismatch)
    assert "Closest matches:" in run.failure.message


@pytest.mark.parametrize(
    "refusal",
    [
        CassetteMismatch(tool="search_docs", args={}, args_json="{}", nearest=[]),
        CassetteError("line is not JSON", file="c.jsonl", line=2),
    ],
)
def test_a_refused_call_counts_as_a_call_and_not_as_a_tool_error(refusal: Exception) -> None:
    # No tool answered: the harness's miss is the case's failure, not the tool's error.
    run = run_case(agent("echo_agent.py"), tools=FakeTools({"search_docs": refusal}))
    assert run.failure is not None
    assert run.tool_call_count == 1
    assert run.tool_errors == 0
    assert run.tool_calls[0].refused


def test_a_disallowed_call_is_not_a_tool_error() -> None:
    run = run_case(agent("disallowed_tool.py"))
    assert run.failure is not None and run.failure.kind == "tool_not_allowed"
    assert (run.tool_call_count, run.tool_errors) == (1, 0)


def test_missing_tool_implementation_is_a_registry_error() -> None:
    from trialrun.tools.live import MissingToolError

    tools = FakeTools({"search_docs": MissingToolError(["search_docs"], ["other"])})
    run = run_case(agent("echo_agent.py"), tools=tools)
    assert run.failure is not None
    assert (run.failure.kind, run.failure.status) == ("tool_registry_error", "error")
    assert "search_docs" in run.failure.message


def test_corrupt_cassette_is_a_cassette_error() -> None:
    error = CassetteError("line is not JSON", file="c.jsonl", line=2)
    run = run_case(agent("echo_agent.py"), tools=FakeTools({"search_docs": error}))
    assert run.failure is not None
    assert (run.failure.kind, run.failure.message) == (
        "cassette_error",
        "c.jsonl:2: line is not JSON",
    )


def test_non_json_tool_result_fails_the_case_without_crashing() -> None:
    tools = FakeTools({"search_docs": Outcome(ok=True, result={1, 2})})
    run = run_case(agent("echo_agent.py"), tools=tools)
    assert run.failure is not None
    assert (run.failure.kind, run.failure.status) == ("tool_error", "error")
    assert "not JSON data" in run.failure.message


def test_non_json_case_input_fails_the_case_without_crashing() -> None:
    run = run_case(agent("echo_agent.py"), task_input={"when": object()})
    assert run.failure is not None
    assert run.failure.kind == "agent_error"
    assert "case input is not JSON data" in run.failure.message


def test_missing_agent_command_is_an_agent_error() -> None:
    run = run_case(["no-such-agent-xyz"])
    assert run.failure is not None
    assert (run.failure.kind, run.failure.status) == ("agent_error", "error")
    assert "Agent command not found" in run.failure.message
    assert event_types(run) == ["task_start", "agent_error"]


def test_an_agent_command_holding_a_nul_is_an_agent_error() -> None:
    # YAML lets "\0" into a command; spawning it raised ValueError through the whole run.
    run = run_case([sys.executable, "agent\0.py"])
    assert run.failure is not None
    assert (run.failure.kind, run.failure.status) == ("agent_error", "error")
    assert "embedded null byte" in run.failure.message
    assert event_types(run) == ["task_start", "agent_error"]


# -- deadlines and teardown ------------------------------------------------------------------------


def test_wall_deadline_kills_a_chatty_agent_promptly() -> None:
    # The agent chats forever: only the wall deadline, not the far idle timeout, can end it.
    limits = Limits(wall_ms=300, idle_ms=60_000, max_message_bytes=1024, kill_grace_ms=500)
    run = run_case(agent("chatty_hang.py", "50"), limits=limits)
    assert run.failure is not None
    assert (run.failure.kind, run.failure.status) == ("timeout", "fail")
    assert run.failure.message.startswith("Agent exceeded max_wall_ms=300 (killed after ")
    assert 300 <= run.wall_ms < 30_000
    assert event_types(run).count("log") >= 2  # it really was chatty


def test_wall_deadline_covers_slow_tool_calls() -> None:
    limits = Limits(wall_ms=300, idle_ms=60_000, max_message_bytes=1024, kill_grace_ms=500)
    run = run_case(agent("echo_agent.py"), tools=FakeTools(delay_s=120), limits=limits)
    assert run.failure is not None
    assert run.failure.kind == "timeout"
    assert run.wall_ms < 60_000  # half the tool's 120 s: the deadline did not wait for it


def test_idle_timeout_kills_a_silent_agent() -> None:
    # The agent hangs forever: only the idle timeout can end it.
    limits = Limits(wall_ms=None, idle_ms=500, max_message_bytes=1024, kill_grace_ms=500)
    run = run_case(agent("hang.py"), limits=limits)
    assert run.failure is not None
    assert (run.failure.kind, run.failure.status) == ("idle_timeout", "error")
    assert "idle_timeout_ms=500" in run.failure.message
    assert run.wall_ms >= 500
    assert run.exit_code == -signal.SIGTERM


def test_tool_time_is_not_agent_idleness() -> None:
    limits = Limits(wall_ms=None, idle_ms=500, max_message_bytes=1 << 20, kill_grace_ms=500)
    run = run_case(agent("echo_agent.py"), tools=FakeTools(delay_s=0.8), limits=limits)
    assert run.failure is None


def _calls_then(calls: int, pause_s: float, then: str) -> list[str]:
    """An agent making ``calls`` tool calls, ``pause_s`` apart, then running ``then``."""
    code = (
        "import json, sys, time\nsys.stdin.readline()\n"
        f"for i in range({calls}):\n"
        f"    time.sleep({pause_s})\n"
        "    print(json.dumps({'type': 'tool_call', 'name': 'search_docs', 'call_id': f'c{i}',"
        " 'args': {'i': i}}), flush=True)\n"
        "    sys.stdin.readline()\n"
        f"{then}\n"
    )
    return [sys.executable, "-c", code]


def test_the_idle_deadline_counts_from_each_read_not_the_first() -> None:
    # 6 x 0.3 s of talking outlasts idle_ms, yet the agent was never idle that long; each pause
    # leaves 0.7 s for a busy machine to deliver the call.
    limits = Limits(wall_ms=None, idle_ms=1000, max_message_bytes=1 << 20, kill_grace_ms=300)
    final = "print(json.dumps({'type': 'final_output', 'output': {}}), flush=True)"
    run = run_case(_calls_then(6, 0.3, final), limits=limits)
    assert run.failure is None, run.failure
    assert len(run.tool_calls) == 6


def test_an_agent_silent_after_many_fast_answers_times_out_on_time() -> None:
    limits = Limits(wall_ms=None, idle_ms=400, max_message_bytes=1 << 20, kill_grace_ms=300)
    started = time.monotonic()
    run = run_case(_calls_then(200, 0, "time.sleep(30)"), limits=limits)
    assert time.monotonic() - started < 15  # half the agent's 30 s of silence
    assert run.failure is not None
    assert (run.failure.kind, run.failure.status) == ("idle_timeout", "error")
    assert len(run.tool_calls) == 200


def test_no_deadline_of_a_finished_case_fires_in_its_task_later() -> None:
    limits = Limits(wall_ms=None, idle_ms=200, max_message_bytes=1 << 20, kill_grace_ms=300)

    async def scenario() -> AgentRun:
        run = await run_agent(
            agent("echo_agent.py", "search_docs", "2"),
            case_id="t1",
            task_input={"ticket": "x"},
            tools=FakeTools(),  # type: ignore[arg-type]
            allowed_tools=("search_docs",),
            limits=limits,
        )
        await asyncio.sleep(0.5)  # past idle_ms: a timer left behind would cancel this task
        return run

    assert asyncio.run(scenario()).failure is None


def test_sigterm_ignoring_agent_is_sigkilled_after_the_grace_and_wall_ms_excludes_it() -> None:
    limits = Limits(wall_ms=None, idle_ms=2000, max_message_bytes=1024, kill_grace_ms=300)
    started = time.monotonic()
    run = run_case(agent("ignore_sigterm.py", "final"), limits=limits)
    elapsed_ms = (time.monotonic() - started) * 1000
    assert run.failure is None and run.output == {"ok": True}
    assert (run.exit_code, run.stopped_by_trialrun) == (None, True)
    assert elapsed_ms >= 300  # the grace, then SIGKILL
    assert run.wall_ms < elapsed_ms - 300


def test_an_agent_done_with_its_output_is_stopped_at_once_not_waited_for(tmp_path: Path) -> None:
    # Were trialrun still waiting for a voluntary exit, the agent would see its stdin close and
    # leave the marker; stopped at once, the SIGTERM is there before the end of its input.
    marker = tmp_path / "marker"
    limits = replace(PATIENT, kill_grace_ms=60_000)
    run = run_case(agent("after_output.py", "read", str(marker)), limits=limits)
    assert run.failure is None and run.output == {"ok": True}
    assert not marker.exists()
    assert (run.exit_code, run.stopped_by_trialrun) == (None, True)


def test_a_stopped_agent_gets_its_grace_to_clean_up(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    limits = replace(PATIENT, kill_grace_ms=60_000)
    run = run_case(agent("after_output.py", "cleanup", str(marker)), limits=limits)
    assert run.failure is None
    assert marker.read_text() == "cleaned up"
    # Its handler exited 0 itself: that is its own status, whoever asked it to stop.
    assert (run.exit_code, run.stopped_by_trialrun) == (0, False)


@pytest.mark.parametrize("code", [0, 3])
def test_an_agent_that_exits_by_itself_after_its_output_keeps_its_exit_status(
    tmp_path: Path, code: int
) -> None:
    limits = replace(PATIENT, kill_grace_ms=60_000)
    run = run_case(agent("after_output.py", "exit", str(tmp_path / "m"), str(code)), limits=limits)
    assert run.failure is None and run.output == {"ok": True}
    assert (run.exit_code, run.stopped_by_trialrun) == (code, False)


@pytest.mark.parametrize("mode", ["hang", "finish"])
def test_grandchild_never_survives_the_case(tmp_path: Path, mode: str) -> None:
    pid_file = tmp_path / "pid"
    limits = Limits(wall_ms=1500, idle_ms=1000, max_message_bytes=1024, kill_grace_ms=300)
    run = run_case(agent("spawn_child.py", str(pid_file), mode), limits=limits)
    assert (run.failure is None) == (mode == "finish")
    assert process_gone(int(pid_file.read_text()))


def test_cancellation_kills_the_group_and_propagates(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"

    async def scenario() -> None:
        task = asyncio.ensure_future(
            run_agent(
                agent("spawn_child.py", str(pid_file), "hang"),
                case_id="t1",
                task_input={},
                tools=FakeTools(),  # type: ignore[arg-type]
                allowed_tools=(),
                limits=FAST,
            )
        )
        deadline = time.monotonic() + 30  # generous: only a broken agent takes that long
        while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    assert process_gone(int(pid_file.read_text()))


def test_agent_that_stops_reading_its_stdin_hits_the_idle_timeout() -> None:
    code = (
        "import json, sys, time; sys.stdin.readline();"
        "print(json.dumps({'type': 'tool_call', 'name': 'search_docs', 'call_id': 'c1',"
        " 'args': {}}), flush=True); time.sleep(30)"
    )
    tools = FakeTools({"search_docs": Outcome(ok=True, result="x" * 4_000_000)})
    limits = Limits(wall_ms=None, idle_ms=400, max_message_bytes=1 << 20, kill_grace_ms=300)
    run = run_case([sys.executable, "-c", code], tools=tools, limits=limits)
    assert run.failure is not None
    assert (run.failure.kind, run.failure.status) == ("idle_timeout", "error")
    assert "to read the tool_result of call 'c1' (search_docs) on its stdin" in run.failure.message


def test_agent_that_closes_stdout_but_keeps_running() -> None:
    code = "import os, sys, time; sys.stdin.readline(); os.close(1); time.sleep(30)"
    run = run_case([sys.executable, "-c", code])
    assert run.failure is not None
    assert run.failure.kind == "agent_crashed"
    assert run.failure.message == (
        "Agent closed its stdout before sending final_output (it was still running)"
    )
    assert run.exit_code == -signal.SIGTERM


def test_agent_that_closes_stdin_and_waits_fails_at_once_naming_the_unread_message() -> None:
    # Writing the tool_result fails with EPIPE: the agent can never get it, so waiting out the
    # idle timeout would only hide what happened.
    code = (
        "import json, os, sys, time; sys.stdin.readline(); os.close(0);"
        "print(json.dumps({'type': 'tool_call', 'name': 'search_docs', 'call_id': 'c1',"
        " 'args': {}}), flush=True); time.sleep(30)"
    )
    started = time.monotonic()
    run = run_case([sys.executable, "-c", code], limits=PATIENT)
    assert time.monotonic() - started < 15  # half the agent's 30 s: it was not waited for
    assert run.failure is not None
    assert (run.failure.kind, run.failure.status) == ("agent_crashed", "error")
    assert run.failure.message == (
        "Agent closed its stdin without reading the tool_result of call 'c1' (search_docs) "
        "before sending final_output (it was still running)"
    )


def test_agent_that_exits_before_reading_a_large_input_is_a_crash_not_a_broken_pipe() -> None:
    code = "import sys; print('gone', file=sys.stderr); sys.exit(2)"
    run = run_case([sys.executable, "-c", code], task_input={"blob": "x" * 3_000_000})
    assert run.failure is not None
    assert run.failure.kind == "agent_crashed"
    assert run.failure.message.startswith("Agent exited with code 2 before sending final_output")
    assert run.failure.stderr_tail == "gone"


def test_messages_split_across_writes_or_sharing_one_are_read_whole() -> None:
    # Each call arrives in three pieces a little apart, and the log line shares the write of
    # the final output: the session may never see half a message.
    code = (
        "import json, sys, time\nsys.stdin.readline()\n"
        "for i in range(5):\n"
        "    line = json.dumps({'type': 'tool_call', 'name': 'search_docs', 'call_id': f'c{i}',"
        " 'args': {'i': i, 'pad': 'x' * 300_000}}) + '\\n'\n"
        "    third = len(line) // 3\n"
        "    for piece in (line[:third], line[third:2 * third], line[2 * third:]):\n"
        "        sys.stdout.write(piece); sys.stdout.flush(); time.sleep(0.05)\n"
        "    sys.stdin.readline()\n"
        "sys.stdout.write(json.dumps({'type': 'log', 'message': 'done'}) + '\\n'"
        " + json.dumps({'type': 'final_output', 'output': {'n': 5}}) + '\\n')\n"
        "sys.stdout.flush()\n"
    )
    limits = Limits(wall_ms=None, idle_ms=1000, max_message_bytes=1 << 20, kill_grace_ms=300)
    run = run_case([sys.executable, "-c", code], limits=limits)
    assert run.failure is None, run.failure
    assert [call.args["i"] for call in run.tool_calls] == [0, 1, 2, 3, 4]
    assert event_types(run)[-2:] == ["log", "final_output"]
    assert run.output == {"n": 5}


def test_a_line_that_trickles_in_longer_than_the_idle_timeout_is_idle() -> None:
    # The idle timeout is per message: bytes that keep coming do not make a message on time.
    code = (
        "import sys, time\nsys.stdin.readline()\n"
        "for _ in range(40):\n"
        "    sys.stdout.write('{ '); sys.stdout.flush(); time.sleep(0.05)\n"
    )
    # Had the trickle kept the agent from being idle, it would end with a crash after 2 s.
    limits = Limits(wall_ms=None, idle_ms=600, max_message_bytes=1 << 20, kill_grace_ms=300)
    run = run_case([sys.executable, "-c", code], limits=limits)
    assert run.failure is not None
    assert run.failure.kind == "idle_timeout"


# -- the program under test is left as it is ---------------------------------------------------


@pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs a choice of CPUs to take away",
)
def test_a_replayed_conversation_leaves_the_agent_on_every_cpu_it_may_use(tmp_path: Path) -> None:
    from trialrun.tools.cassette import Cassette, ReplayBackend

    calls = 300
    cassette = tmp_path / "c.jsonl"
    cassette.write_text(
        "".join(
            json.dumps({"tool": "search_docs", "args": {"i": i}, "ok": True, "result": i}) + "\n"
            for i in range(calls)
        ),
        encoding="utf-8",
    )
    # Many quick answers in a row, the pattern trialrun once used to pin the agent to one CPU.
    then = (
        "import os; print(json.dumps({'type': 'final_output',"
        " 'output': {'cpus': sorted(os.sched_getaffinity(0))}}), flush=True)"
    )
    run = run_case(
        _calls_then(calls, 0, then),
        tools=ReplayBackend(Cassette.load(cassette)),  # type: ignore[arg-type]
    )
    assert run.failure is None, run.failure
    assert len(run.tool_calls) == calls
    assert run.output == {"cpus": sorted(os.sched_getaffinity(0))}
