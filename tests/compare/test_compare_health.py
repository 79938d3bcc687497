"""compare.health: how often each user command was asked and failed, and when that is a broken
setup. The end-to-end runs are in test_compare_broken_setup.py; these pin the counting rules."""

from __future__ import annotations

from trialrun.compare.health import CommandHealth, command_health
from trialrun.compare.judge import JudgeCause, JudgeDecision
from trialrun.compare.outcome import build_outcome
from trialrun.compare.records import ArmSampleResult, CompareRow, TriggerProbe, trigger_outcome
from trialrun.compare.report import format_report
from trialrun.compare.rows import ArmResult, decide_row


def judged_row(rep: int, cause: JudgeCause, error: str = "") -> CompareRow:
    decision = JudgeDecision(
        winner="candidate" if cause == "judge" else "tie",
        reason=error or "ok",
        agreed=cause == "judge",
        split=cause == "judge-split",
        errors=(error,) if error else (),
        raw_answers=(),
        cause=cause,
    )
    same = ArmResult("x", 1, 1)
    return CompareRow("explain", rep, "baseline", decide_row(same, same, lambda: decision))


def sample(case: str, rep: int, arm: str, **fields: object) -> ArmSampleResult:
    return ArmSampleResult(case, rep, arm, **fields)  # type: ignore[arg-type]


def test_a_split_is_an_answer_and_a_refusal_is_a_failure() -> None:
    rows = [
        judged_row(0, "judge"),
        judged_row(1, "judge-split"),
        judged_row(2, "judge-refused", "refused: 'I can't help'"),
    ]
    [judge] = command_health(rows, [], None)
    assert (judge.command, judge.asked, judge.failed) == ("judge", 3, 1)
    assert judge.causes == (("judge-refused", 1),)
    assert not judge.broken and not judge.mostly_failed
    assert judge.message() == (
        "judge: 1 of 3 calls failed (1 judge-refused); each failed call is a tie; "
        "first error: refused: 'I can't help'"
    )


def test_every_call_failing_is_broken_and_every_call_answered_says_nothing() -> None:
    failing = [judged_row(rep, "judge-timeout", f"timeout {rep}") for rep in range(2)]
    [judge] = command_health(failing, [], None)
    assert judge.broken
    message = judge.message()
    assert message is not None and message.startswith("BROKEN SETUP: the judge failed")
    assert message.endswith("(2 of 2: 2 judge-timeout); first error: timeout 0")
    [fine] = command_health([judged_row(0, "judge")], [], None)
    assert fine.message() is None and not fine.broken


def test_nothing_asked_is_no_entry_rather_than_a_broken_one() -> None:
    assert command_health([], [], None) == ()
    assert not CommandHealth("judge", 0, 0, (), None).broken


def test_a_session_run_counts_once_for_all_its_sub_cases() -> None:
    samples = [
        sample("one", 0, "candidate", status="failed", error="agent exited with code 1"),
        sample("two", 0, "candidate", status="failed", error="agent exited with code 1"),
        sample("one", 0, "baseline", status="ok"),
        sample("two", 0, "baseline", status="ok"),
    ]
    [agent] = command_health([], samples, None, session_cases={"one", "two"})
    assert (agent.asked, agent.failed) == (2, 1)
    assert agent.message() == (
        "agent: 1 of 2 arm runs failed (1 failed); each dead arm is a hole; "
        "first error: agent exited with code 1"
    )


def test_a_check_broken_in_every_arm_is_named_even_when_other_checks_ran() -> None:
    ran = ("command_succeeds: make", True)
    missing = ("command_succeeds: nope", False)
    blocked = (("command_succeeds: nope", "exit 127: nope: command not found"),)
    samples = [
        sample("build", rep, arm, status="ok", checks=(ran, missing), unrunnable=blocked)
        for rep in range(2)
        for arm in ("baseline", "candidate")
    ]
    agent, checks = command_health([], samples, None)
    assert (agent.command, agent.failed) == ("agent", 0)
    assert (checks.asked, checks.failed) == (8, 4)
    assert checks.never_ran == ("build: command_succeeds: nope",)
    assert checks.broken


def test_a_check_that_ran_somewhere_is_counted_but_not_broken() -> None:
    check = ("command_succeeds: flaky", False)
    blocked = (("command_succeeds: flaky", "exit 126"),)
    samples = [
        sample("c", 0, "baseline", status="ok", checks=(check,), unrunnable=blocked),
        sample("c", 0, "candidate", status="ok", checks=(check,)),
    ]
    _, checks = command_health([], samples, None)
    assert (checks.failed, checks.never_ran, checks.broken) == (1, (), False)


def test_the_lines_sit_right_under_the_verdict() -> None:
    probes = [TriggerProbe("p", True, None, "cannot start selector 'x'")]
    outcome = build_outcome(
        samples=[],
        rows=[judged_row(0, "judge-error", "exit 3")],
        opponents=["baseline"],
        planned=[("explain", 0)],
        triggers=trigger_outcome(probes),
    )
    lines = format_report(outcome).splitlines()
    assert lines[0].startswith("verdict: NEUTRAL")
    assert lines[1].startswith("BROKEN SETUP: the judge failed on every call")
    assert lines[2].startswith("BROKEN SETUP: every trigger probe errored")
    assert lines[3].startswith("why: ")
    assert [health.command for health in outcome.broken_setup] == ["judge", "triggers"]
