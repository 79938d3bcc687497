"""The judge protocol: payload, answer parsing, both orderings, retries, escalation, timeouts."""

from __future__ import annotations

import fcntl
import io
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trialrun.compare import fake_judge
from trialrun.compare.judge import (
    TRANSCRIPT_TAIL_CHARS,
    JudgeDecision,
    ask_both_orders,
    judge_payload,
    parse_answer,
)
from trialrun.errors import JudgeError

FAKE = [sys.executable, "-m", "trialrun.compare.fake_judge"]
LONG = "the candidate explains every step " * 4
SHORT = "done"


def fake(*args: str) -> list[str]:
    return [*FAKE, *args]


def ask(command: list[str], **overrides: object) -> JudgeDecision:
    arguments: dict[str, object] = {
        "task": "fix the bug",
        "rubric": "prefer the clearer answer",
        "candidate_transcript": LONG,
        "opponent_transcript": SHORT,
        "retry_backoff_s": 0.0,
        "timeout_s": 30.0,
    }
    arguments.update(overrides)
    return ask_both_orders(command, **arguments)  # type: ignore[arg-type]


# ---- payload and parsing ------------------------------------------------------------------


def test_payload_sends_the_redacted_tail_of_each_transcript() -> None:
    secret = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    a = "x" * 10_000 + f" token {secret} end"
    document = json.loads(judge_payload("task", "rubric", a, "short"))
    assert set(document) == {"task", "rubric", "a", "b"}
    assert len(document["a"]) == TRANSCRIPT_TAIL_CHARS
    assert document["a"].endswith("[REDACTED] end")
    assert secret not in document["a"]
    assert document["b"] == "short"


@given(st.text(max_size=200), st.text(max_size=200))
def test_payload_round_trips_short_transcripts(a: str, b: str) -> None:
    document = json.loads(judge_payload("t", "r", a, b))
    assert len(document["a"]) <= TRANSCRIPT_TAIL_CHARS
    assert (document["task"], document["rubric"]) == ("t", "r")


@pytest.mark.parametrize("winner", ["A", "B", "tie"])
def test_parse_answer_accepts_the_protocol(winner: str) -> None:
    answer = parse_answer(json.dumps({"winner": winner, "reason": "because"}) + "\n")
    assert (answer.winner, answer.reason) == (winner, "because")


def test_parse_answer_takes_the_last_json_line_after_logs() -> None:
    answer = parse_answer('loading model...\n{"winner": "B"}\n')
    assert (answer.winner, answer.reason) == ("B", "")


@pytest.mark.parametrize(
    ("stdout", "message"),
    [
        ("", "found empty output"),
        ("A is better", "expected a JSON object on stdout, found 'A is better'"),
        ('["A"]', "expected a JSON object"),
        ('{"winner": "a"}', 'expected "winner" to be "A", "B" or "tie", found \'a\''),
        ('{"reason": "x"}', "found None"),
        ('{"winner": "A", "reason": 3}', 'expected "reason" to be a string, found int'),
        ('{"winner": ' + "[" * 100_000 + "]" * 100_000 + "}", "expected a JSON object"),
    ],
)
def test_parse_answer_says_what_it_expected_and_found(stdout: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_answer(stdout)


@given(st.text(max_size=100))
def test_parse_answer_either_returns_a_verdict_or_raises_value_error(stdout: str) -> None:
    try:
        answer = parse_answer(stdout)
    except ValueError:
        return
    assert answer.winner in ("A", "B", "tie")


# ---- the fake judge in-process ------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "a", "b", "winner"),
    [
        ("longer", "aaa", "b", "A"),
        ("longer", "a", "bbb", "B"),
        ("shorter", "aaa", "b", "B"),
        ("longer", "ab", "cd", "tie"),
        ("tie", "aaa", "b", "tie"),
        ("B", "aaa", "b", "B"),
    ],
)
def test_fake_judge_answers_are_deterministic(mode: str, a: str, b: str, winner: str) -> None:
    assert fake_judge.answer_for(mode, a, b)["winner"] == winner


def test_fake_judge_rejects_a_bad_request(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO('{"task": "t", "a": "x"}'))
    assert fake_judge.main(["--prefer", "A"]) == 2
    assert "missing or not a string: ['rubric', 'b']" in capsys.readouterr().err


# ---- both orderings through a real subprocess ---------------------------------------------


def test_agreement_gives_the_winner() -> None:
    result = ask(fake("--prefer", "longer"))
    assert (result.winner, result.cause, result.agreed, result.split) == (
        "candidate",
        "judge",
        True,
        False,
    )
    assert result.errors == ()
    assert len(result.raw_answers) == 2
    assert result.reason.startswith("A is longer")
    assert not result.escalated


def test_agreement_for_the_opponent_and_on_a_tie() -> None:
    assert ask(fake("--prefer", "shorter")).winner == "opponent"
    tie = ask(fake("--prefer", "tie"))
    assert (tie.winner, tie.cause, tie.agreed) == ("tie", "judge", True)


def test_position_bias_is_a_split_tie() -> None:
    result = ask(fake("--prefer", "A"))
    assert (result.winner, result.cause, result.agreed, result.split) == (
        "tie",
        "judge-split",
        False,
        True,
    )
    assert result.reason == "orderings disagree (candidate vs opponent)"


def test_garbage_is_retried_once_and_then_answers(tmp_path: Path) -> None:
    state = tmp_path / "count"
    result = ask(fake("--prefer", "longer", "--garbage-first", "1", "--state", str(state)))
    assert (result.winner, result.cause) == ("candidate", "judge")
    assert len(result.raw_answers) == 3
    assert result.raw_answers[0].startswith(fake_judge.GARBAGE)
    assert result.errors == (
        "candidate as A, attempt 1 (judge): expected a JSON object on stdout, found "
        f"{fake_judge.GARBAGE!r}",
    )
    assert not result.escalated


def test_garbage_first_counts_under_a_lock(tmp_path: Path) -> None:
    # compare asks its judges concurrently: an unlocked counter let two read the same count
    state = tmp_path / "count"
    state.write_text("0\n", encoding="utf-8")
    request = json.dumps({"task": "t", "rubric": "r", "a": "aa", "b": "b"})
    command = [sys.executable, "-m", "trialrun.compare.fake_judge", "--garbage-first", "1"]
    with state.open("r+") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        judge = subprocess.Popen(
            [*command, "--state", str(state)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert judge.stdin is not None
        judge.stdin.write(request)
        judge.stdin.close()
        with pytest.raises(subprocess.TimeoutExpired):
            judge.wait(timeout=1.5)
        held.seek(0)
        held.write("1\n")
    assert judge.stdout is not None and judge.wait(timeout=60) == 0
    assert judge.stdout.read().strip() == json.dumps(fake_judge.answer_for("longer", "aa", "b"))
    assert state.read_text(encoding="utf-8") == "2\n"


def test_two_unparseable_answers_escalate(tmp_path: Path) -> None:
    result = ask(fake("--prefer", "garbage"), escalate_command=fake("--prefer", "longer"))
    assert (result.winner, result.cause, result.escalated) == ("candidate", "judge", True)
    # ordering 1: garbage, garbage, escalation; ordering 2: garbage, garbage, escalation
    assert len(result.raw_answers) == 6
    assert len(result.errors) == 4


def test_unparseable_after_retry_and_escalation_is_a_tie_and_skips_the_second_ordering() -> None:
    result = ask(fake("--prefer", "garbage"), escalate_command=fake("--prefer", "garbage"))
    assert (result.winner, result.cause, result.agreed, result.split) == (
        "tie",
        "judge-unparseable",
        False,
        False,
    )
    assert len(result.raw_answers) == 3
    assert [e.split(":")[0] for e in result.errors] == [
        "candidate as A, attempt 1 (judge)",
        "candidate as A, attempt 2 (judge)",
        "candidate as A, attempt 3 (escalation)",
    ]


def test_without_escalation_the_chain_is_two_attempts() -> None:
    result = ask(fake("--prefer", "garbage"))
    assert result.cause == "judge-unparseable"
    assert len(result.raw_answers) == 2


def test_a_refusal_is_a_tie_at_once() -> None:
    result = ask(fake("--prefer", "refuse"), escalate_command=fake("--prefer", "longer"))
    assert (result.winner, result.cause, result.escalated) == ("tie", "judge-refused", False)
    assert len(result.raw_answers) == 1
    assert "refused" in result.reason


def test_a_failing_judge_is_retried_and_then_a_tie() -> None:
    result = ask(fake("--prefer", "fail"))
    assert (result.winner, result.cause) == ("tie", "judge-error")
    assert "expected exit code 0, found 3: fake_judge: simulated failure" in result.errors[0]
    assert len(result.errors) == 2


def test_a_missing_command_is_a_tie(tmp_path: Path) -> None:
    result = ask([str(tmp_path / "no-such-judge")])
    assert (result.winner, result.cause) == ("tie", "judge-error")
    assert "cannot start" in result.errors[0]


def test_a_command_holding_a_nul_cannot_start_and_is_a_tie() -> None:
    # Popen raises ValueError for it; ask_command words it as any command that cannot start.
    result = ask([sys.executable, "jud\0ge.py"])
    assert (result.winner, result.cause) == ("tie", "judge-error")
    assert f"cannot start {sys.executable!r}: embedded null byte" in result.errors[0]


def test_an_empty_command_is_a_configuration_error() -> None:
    with pytest.raises(JudgeError, match="judge command is empty"):
        ask([])


def test_a_timeout_kills_the_process_group_and_is_not_retried(tmp_path: Path) -> None:
    pid_file = tmp_path / "helper.pid"
    script = f"sleep 30 & echo $! > {pid_file}; wait"
    started = time.monotonic()
    result = ask(["sh", "-c", script], timeout_s=0.5, escalate_command=fake("--prefer", "A"))
    assert time.monotonic() - started < 15  # half the helper's 30 s: no wait for it to end
    assert (result.winner, result.cause, result.escalated) == ("tie", "judge-timeout", False)
    assert result.errors == (
        "candidate as A, attempt 1 (judge): no answer within 0.5s (its process group was killed)",
    )
    helper = int(pid_file.read_text())
    assert not _alive(helper)


def test_the_fake_judge_hang_mode_times_out() -> None:
    result = ask(fake("--prefer", "hang"), timeout_s=0.5)
    assert result.cause == "judge-timeout"


def _alive(pid: int) -> bool:
    deadline = time.monotonic() + 30  # a dead process answers at once; this bounds a leak only
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        # a killed child of a dead shell is a zombie until init reaps it
        try:
            status = Path(f"/proc/{pid}/stat").read_text().split()[2]
        except OSError:
            return False
        if status == "Z":
            return False
        time.sleep(0.05)
    return True
