"""Checks, commands, efficiency and triggers read from one arm's transcript and sandbox."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trialrun.compare.checkspec import REGEX_KINDS, Check
from trialrun.compare.evaluate import (
    CheckOutcome,
    Efficiency,
    commands_in,
    efficiency_of,
    evaluate_checks,
    trigger_fired,
)


def check(kind: str, param: str, line: int = 1) -> Check:
    return Check(kind, param, re.compile(param) if kind in REGEX_KINDS else None, line)


def assistant(*blocks: dict[str, Any]) -> str:
    return json.dumps({"type": "assistant", "message": {"content": list(blocks)}})


def text(words: str) -> dict[str, Any]:
    return {"type": "text", "text": words}


def tool(name: str, tool_input: Any, call_id: str = "") -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_use", "name": name, "input": tool_input}
    if call_id:
        block["id"] = call_id
    return block


def bash(command: str, call_id: str = "") -> dict[str, Any]:
    return tool("Bash", {"command": command}, call_id)


def stream(*lines: str) -> str:
    return "\n".join(lines) + "\n"


def run_one(
    kind: str, param: str, transcript: str = "", *, sandbox: Path, fmt: str = "stream-json"
) -> CheckOutcome:
    passed, total, outcomes = evaluate_checks(
        [check(kind, param)],
        transcript=transcript,
        transcript_format=fmt,  # type: ignore[arg-type]
        sandbox=sandbox,
        timeout_s=10,
    )
    assert (passed, total) == (int(outcomes[0].passed), 1)
    return outcomes[0]


INIT = json.dumps({"type": "system", "subtype": "init", "skills": ["deploy-check"], "tools": []})
TOOL_RESULT = json.dumps(
    {
        "type": "user",
        "message": {"content": [{"type": "tool_result", "tool_use_id": "t1", "content": "SECRET"}]},
    }
)
SESSION = stream(
    INIT,
    assistant(text("I will Deploy the service."), bash('git commit -m "fix bug"', "t1")),
    TOOL_RESULT,
    assistant(tool("Write", {"file_path": "notes.md", "content": "Grüße aus Köln"}, "t2")),
    "stderr noise that is not JSON",
    json.dumps({"type": "result", "result": "All done, STRASSE fixed.", "num_turns": 3}),
)


# ---- transcript_mentions / transcript_omits ----------------------------------------------------


@pytest.mark.parametrize(
    "needle",
    [
        "deploy the SERVICE",  # an assistant text block, case-insensitive
        "all done",  # the result text
        '"file_path": "notes.md"',  # the JSON of a tool input
        'git commit -m "fix bug"',  # a quoted value, found through the input's strings
        "grüße aus köln",  # non-ASCII kept as written
        "straße",  # case folding, not lower-casing
    ],
)
def test_mentions_searches_the_agents_words(needle: str, tmp_path: Path) -> None:
    outcome = run_one("transcript_mentions", needle, SESSION, sandbox=tmp_path)
    assert outcome.passed, outcome.detail
    assert not run_one("transcript_omits", needle, SESSION, sandbox=tmp_path).passed


@pytest.mark.parametrize("needle", ["SECRET", "deploy-check", "stderr noise", "subtype"])
def test_tool_results_init_and_noise_are_not_the_agents_words(needle: str, tmp_path: Path) -> None:
    outcome = run_one("transcript_mentions", needle, SESSION, sandbox=tmp_path)
    assert not outcome.passed
    assert outcome.detail == f"the transcript does not mention {needle!r}"
    assert run_one("transcript_omits", needle, SESSION, sandbox=tmp_path).passed


def test_text_transcript_is_searched_whole(tmp_path: Path) -> None:
    transcript = "Thinking...\n$ make test\nEverything PASSED\n"
    assert run_one("transcript_mentions", "passed", transcript, sandbox=tmp_path, fmt="text").passed
    assert run_one("transcript_omits", "failed", transcript, sandbox=tmp_path, fmt="text").passed


@given(st.text(min_size=1, max_size=40), st.text(max_size=20), st.text(max_size=20))
def test_any_slice_of_a_text_block_is_mentioned(needle: str, before: str, after: str) -> None:
    transcript = stream(assistant(text(before + needle + after)))
    passed, _, outcomes = evaluate_checks(
        [check("transcript_mentions", needle)],
        transcript=transcript,
        transcript_format="stream-json",
        sandbox=Path("."),
    )
    assert passed == 1, outcomes[0].detail


# ---- commands --------------------------------------------------------------------------------


def test_commands_are_bash_inputs_in_order_once_per_id() -> None:
    transcript = stream(
        assistant(bash("ls -la", "a"), tool("Read", {"command": "not a shell"}, "b")),
        assistant(bash("ls -la", "a")),  # a partial-message stream repeats the message
        assistant(bash("pytest -q", "c"), tool("Bash", {"cmd": "wrong key"}, "d")),
        assistant(bash("ls -la")),  # no id: cannot be told apart from a real second run
    )
    assert commands_in(transcript, "stream-json") == ["ls -la", "pytest -q", "ls -la"]


def test_text_commands_are_dollar_lines() -> None:
    transcript = "$ ls\r\n  $ git status  \nnot $ a command\n$\n$   \n\t$ echo $HOME\n"
    assert commands_in(transcript, "text") == ["ls", "git status", "echo $HOME"]


@given(st.lists(st.text(min_size=1).filter(lambda c: c == c.strip() and "\n" not in c)))
def test_text_commands_round_trip(commands: list[str]) -> None:
    rendered = "".join(f"output\n$ {command}\n" for command in commands)
    assert commands_in(rendered, "text") == commands


@given(st.lists(st.text(max_size=30), max_size=6))
def test_stream_commands_round_trip(commands: list[str]) -> None:
    lines = [assistant(bash(command, f"id{index}")) for index, command in enumerate(commands)]
    assert commands_in(stream(*lines), "stream-json") == commands


def test_command_matching(tmp_path: Path) -> None:
    hit = run_one("command_matching", r"git commit\b", SESSION, sandbox=tmp_path)
    assert hit.passed
    assert hit.detail == "/git commit\\b/ matched 'git commit -m \"fix bug\"' (1 command ran)"
    miss = run_one("command_matching", r"^pytest", SESSION, sandbox=tmp_path)
    assert not miss.passed
    assert miss.detail == "no command matched /^pytest/ (1 command ran)"


def test_no_command_matching(tmp_path: Path) -> None:
    transcript = "$ rm -rf build\n$ ls\n"
    forbidden = run_one("no_command_matching", r"rm -rf", transcript, sandbox=tmp_path, fmt="text")
    assert not forbidden.passed
    assert "matched 'rm -rf build' (2 commands ran)" in forbidden.detail
    assert run_one("no_command_matching", r"sudo", transcript, sandbox=tmp_path, fmt="text").passed


def test_command_regex_is_case_sensitive_like_the_engine(tmp_path: Path) -> None:
    assert not run_one("command_matching", "LS", "$ ls\n", sandbox=tmp_path, fmt="text").passed


def test_regex_kind_without_pattern_fails_only_that_check(tmp_path: Path) -> None:
    checks = [Check("command_matching", "ls", None, 4), check("transcript_omits", "zzz", 5)]
    passed, total, outcomes = evaluate_checks(
        checks, transcript="$ ls\n", transcript_format="text", sandbox=tmp_path
    )
    assert (passed, total) == (1, 2)
    assert outcomes[0].detail == "'command_matching' reached evaluation without a compiled pattern"
    assert outcomes[0].line == 4


def test_unknown_kind_fails_with_a_reason(tmp_path: Path) -> None:
    outcome = run_one("file_smells", "x", sandbox=tmp_path)
    assert (outcome.passed, outcome.detail) == (False, "unknown check kind 'file_smells'")


def test_unknown_transcript_format_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="expected transcript format 'stream-json' or 'text'"):
        commands_in("", "jsonl")  # type: ignore[arg-type]


# ---- files -----------------------------------------------------------------------------------


def test_file_exists_and_absent(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "report.txt").write_text("ok")
    assert run_one("file_exists", "out/report.txt", sandbox=tmp_path).detail == (
        "'out/report.txt' exists"
    )
    assert run_one("file_exists", "out\\report.txt", sandbox=tmp_path).passed
    assert run_one("file_exists", "out", sandbox=tmp_path).passed  # a directory is there too
    missing = run_one("file_exists", "out/missing.txt", sandbox=tmp_path)
    assert (missing.passed, missing.detail) == (False, "'out/missing.txt' is missing")
    assert run_one("file_absent", ".env", sandbox=tmp_path).passed
    assert not run_one("file_absent", "out/report.txt", sandbox=tmp_path).passed


def test_a_path_escaping_the_sandbox_fails_both_kinds(tmp_path: Path) -> None:
    sandbox = tmp_path / "sandbox"
    sandbox.mkdir()
    (tmp_path / "secret.txt").write_text("outside")
    (sandbox / "link").symlink_to(tmp_path / "secret.txt")
    (sandbox / "gone").symlink_to(tmp_path / "nowhere.txt")
    for kind in ("file_exists", "file_absent"):
        for param in ("link", "gone", "../secret.txt"):
            outcome = run_one(kind, param, sandbox=sandbox)
            assert not outcome.passed
            assert "outside the sandbox" in outcome.detail


def test_a_dangling_link_inside_is_neither_a_file_nor_absent(tmp_path: Path) -> None:
    (tmp_path / "dangling").symlink_to(tmp_path / "not-yet")
    for kind in ("file_exists", "file_absent"):
        outcome = run_one(kind, "dangling", sandbox=tmp_path)
        assert (outcome.passed, outcome.detail) == (False, "'dangling' is a dangling symlink")


def test_a_symlink_loop_fails_without_raising(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    assert not run_one("file_exists", "a", sandbox=tmp_path).passed


# ---- command_succeeds ------------------------------------------------------------------------


def test_command_succeeds_runs_bash_in_the_sandbox(tmp_path: Path) -> None:
    (tmp_path / "data.txt").write_text("42\n")
    outcome = run_one("command_succeeds", "[[ $(cat data.txt) == 42 ]]", sandbox=tmp_path)
    assert (outcome.passed, outcome.detail) == (True, "exit 0")


def test_command_failure_shows_its_exit_code_and_output_tail(tmp_path: Path) -> None:
    command = "for i in $(seq 1 400); do echo line$i; done; echo boom >&2; exit 3"
    outcome = run_one("command_succeeds", command, sandbox=tmp_path)
    assert not outcome.passed
    assert outcome.detail.startswith("exit 3: ")
    assert outcome.detail.endswith("line400\nboom")
    assert len(outcome.detail) <= len("exit 3: ") + 500


@pytest.mark.parametrize(
    ("command", "could_not_run"),
    [
        ("trialrun-no-such-tool --version", True),  # bash: command not found, exit 127
        ("./data.txt", True),  # found but not executable, exit 126
        ("exit 1", False),  # ran and failed: the arm's failure, not the setup's
        ("true", False),
    ],
)
def test_a_command_that_could_not_run_is_told_apart_from_one_that_failed(
    tmp_path: Path, command: str, could_not_run: bool
) -> None:
    (tmp_path / "data.txt").write_text("42\n")
    outcome = run_one("command_succeeds", command, sandbox=tmp_path)
    assert outcome.could_not_run is could_not_run
    other = run_one("file_exists", "data.txt", sandbox=tmp_path)
    assert other.could_not_run is False


def test_command_killed_by_a_signal(tmp_path: Path) -> None:
    outcome = run_one("command_succeeds", "kill -TERM $$", sandbox=tmp_path)
    assert (outcome.passed, outcome.detail) == (False, "killed by signal 15")


def test_command_timeout_kills_the_group(tmp_path: Path) -> None:
    started = time.monotonic()
    passed, _, outcomes = evaluate_checks(
        [check("command_succeeds", "sleep 30 & echo $! > child.pid; sleep 30")],
        transcript="",
        transcript_format="text",
        sandbox=tmp_path,
        timeout_s=0.5,
    )
    assert time.monotonic() - started < 15  # half the 30 s it would take: no wait for its sleeps
    assert passed == 0
    assert outcomes[0].detail == "timed out after 0.5s (its process group was killed)"
    assert_dead(int((tmp_path / "child.pid").read_text()))


def test_a_background_helper_neither_delays_nor_outlives_the_check(tmp_path: Path) -> None:
    started = time.monotonic()
    outcome = run_one("command_succeeds", "sleep 30 & echo $! > child.pid", sandbox=tmp_path)
    assert outcome.passed
    assert time.monotonic() - started < 15  # half the helper's 30 s: the check did not wait for it
    assert_dead(int((tmp_path / "child.pid").read_text()))


def assert_dead(pid: int) -> None:
    deadline = time.monotonic() + 30  # a dead process answers at once; this bounds a leak only
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        try:  # a killed child of ours stays a zombie until reaped; it is dead all the same
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return
        except ChildProcessError:
            if _is_zombie(pid):
                return
        time.sleep(0.05)
    pytest.fail(f"process {pid} outlived the check")


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")
    except (OSError, IndexError):
        return True


def test_command_without_bash_fails_with_a_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    outcome = run_one("command_succeeds", "true", sandbox=tmp_path)
    assert not outcome.passed and outcome.could_not_run
    assert outcome.detail.startswith("cannot start bash: ")


def test_command_in_a_missing_sandbox_fails(tmp_path: Path) -> None:
    outcome = run_one("command_succeeds", "true", sandbox=tmp_path / "gone")
    assert (outcome.passed, outcome.detail) == (
        False,
        f"the sandbox {tmp_path / 'gone'} is not a directory",
    )


def test_checks_run_in_order_and_see_earlier_commands(tmp_path: Path) -> None:
    checks = [
        check("file_exists", "made.txt", 1),
        check("command_succeeds", "touch made.txt", 2),
        check("file_exists", "made.txt", 3),
    ]
    passed, total, outcomes = evaluate_checks(
        checks, transcript="", transcript_format="text", sandbox=tmp_path
    )
    assert (passed, total) == (2, 3)
    assert [(o.line, o.passed) for o in outcomes] == [(1, False), (2, True), (3, True)]
    assert outcomes[1].name == "command_succeeds: touch made.txt"


def test_no_checks_is_zero_of_zero(tmp_path: Path) -> None:
    assert evaluate_checks([], transcript="", transcript_format="text", sandbox=tmp_path) == (
        0,
        0,
        [],
    )


# ---- efficiency ------------------------------------------------------------------------------


def result_event(**members: Any) -> str:
    return json.dumps({"type": "result", **members})


def test_efficiency_from_the_last_result_event() -> None:
    transcript = stream(
        result_event(num_turns=1, total_cost_usd=9.0),
        assistant(text("again")),
        result_event(
            num_turns=5,
            duration_ms=41200,
            total_cost_usd=0.2,
            cost_usd=0.3,
            usage={"input_tokens": 1000, "output_tokens": 234, "cache_read_input_tokens": 50},
        ),
    )
    efficiency = efficiency_of(transcript, "stream-json")
    assert efficiency == Efficiency(turns=5, tokens=1234, cost_usd=0.2, duration_ms=41200.0)
    assert efficiency.as_dict() == {
        "turns": 5,
        "tokens": 1234,
        "cost_usd": 0.2,
        "duration_ms": 41200.0,
    }


def test_efficiency_falls_back_to_cost_usd_and_drops_bad_values() -> None:
    transcript = stream(
        result_event(num_turns=2.5, duration_ms=float("nan"), cost_usd=0.11, usage="none")
    )
    assert efficiency_of(transcript, "stream-json") == Efficiency(
        turns=None, tokens=None, cost_usd=0.11, duration_ms=None
    )
    negative = stream(result_event(num_turns=True, total_cost_usd=-1, usage={"output_tokens": 7}))
    assert efficiency_of(negative, "stream-json") == Efficiency(None, 7, None, None)


def test_efficiency_drops_numbers_no_report_can_hold() -> None:
    # An agent's 1e308 turns made the report's rounding raise (its whole part has 309 digits);
    # two such costs add up to infinity, which the receipt cannot hold.
    huge = stream(
        result_event(
            num_turns=1e308,
            duration_ms=1e300,
            total_cost_usd=1e308,
            cost_usd=10**400,
            usage={"input_tokens": 2**53, "output_tokens": 3.0},
        )
    )
    assert efficiency_of(huge, "stream-json") == Efficiency(None, 3, None, None)
    at_bounds = stream(
        result_event(
            num_turns=2**53 - 1, duration_ms=1e12, total_cost_usd=1e9, usage={"input_tokens": 0}
        )
    )
    assert efficiency_of(at_bounds, "stream-json") == Efficiency(2**53 - 1, 0, 1e9, 1e12)


@pytest.mark.parametrize(
    ("transcript", "fmt"),
    [
        (stream(result_event(num_turns=3)), "text"),
        (stream(assistant(text("no result event"))), "stream-json"),
        (stream(result_event(subtype="error_during_execution")), "stream-json"),
        ("", "stream-json"),
    ],
)
def test_no_efficiency(transcript: str, fmt: str) -> None:
    assert efficiency_of(transcript, fmt) is None  # type: ignore[arg-type]


# ---- triggers --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "block",
    [
        tool("Skill", {"skill": "deploy-check"}),
        tool("Skill", {"command": "deploy-check"}),
        tool("Skill", {"skill": "team-plugin:deploy-check"}),
        tool("Read", {"file_path": "/sb/.claude/skills/deploy-check/SKILL.md"}),
        text('{"selected": ["other", "deploy-check"]}'),
    ],
)
def test_trigger_fires_when_the_agent_invokes_the_subject(block: dict[str, Any]) -> None:
    assert trigger_fired(stream(INIT, assistant(block)), "stream-json", "deploy-check")


@pytest.mark.parametrize(
    "block",
    [
        tool("Skill", {"skill": "deploy"}),
        tool("Skill", "deploy-check"),
        tool("Read", {"file_path": "/sb/.claude/skills/deploy-check/README.md"}),
        tool("Bash", {"command": "cat .claude/skills/deploy-check/SKILL.md"}),
        text("I could use deploy-check here but will not."),
        text('{"selected": "deploy-check"}'),
        text("{not json}"),
    ],
)
def test_trigger_does_not_fire_otherwise(block: dict[str, Any]) -> None:
    # The init event lists every installed skill; that is no use of it.
    assert not trigger_fired(stream(INIT, assistant(block)), "stream-json", "deploy-check")


def test_trigger_from_a_selection_answer() -> None:
    answer = stream(result_event(result='Answer: {"selected": [" deploy-check "]}'))
    assert trigger_fired(answer, "stream-json", "deploy-check")
    text_answer = 'thinking\n{"selected": ["deploy-check"]}\n'
    assert trigger_fired(text_answer, "text", "deploy-check")
    assert not trigger_fired('{"selected": []}\n', "text", "deploy-check")
    assert not trigger_fired("deploy-check\n", "text", "deploy-check")
