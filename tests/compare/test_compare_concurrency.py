"""``agent.max_concurrent`` and ``judge.max_concurrent``: provider caps below ``-j`` (issue 18).

Every agent and judge call of a scripted compare appends the moments it started and ended (taken
inside the process, so within the time it held its slot) to a log; the most intervals open at
once must never exceed the cap. The same compare without a cap must exceed it, or the test would
prove nothing.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from builders import call_cli, write_subject
from trialrun.cli import run_cli

# Real agents or real runs end to end: seconds each (pytest -m "not slow" skips them).
pytestmark = pytest.mark.slow

RECORDING = r"""
import json, os, sys, time
log, kind, pause, meet = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
start = time.monotonic()  # one clock for every process of the machine
# Each call marks its start; with MEET above 0 it waits (60 s at most) until that many calls
# have started, so that calls not held back by a cap are seen running together however a busy
# machine schedules them.
marks = log + ".started"
os.makedirs(marks, exist_ok=True)
open(os.path.join(marks, str(os.getpid())), "w").close()
deadline = time.monotonic() + 60
while len(os.listdir(marks)) < meet and time.monotonic() < deadline:
    time.sleep(0.01)
time.sleep(pause)
if kind == "judge":
    sys.stdin.read()
    print(json.dumps({"winner": "tie", "reason": "same"}))
else:
    print("done")
with open(log, "a") as out:
    out.write(json.dumps([start, time.monotonic()]) + "\n")
"""

CASES = 4
K = 2


def make_subject(
    root: Path, *, agent_cap: int | None, judge_cap: int | None, meet: tuple[int, int] = (0, 0)
) -> Path:
    """``meet``: how many agents, and how many judges, must have started before any goes on."""
    python = json.dumps(sys.executable)
    agent_log, judge_log = (
        json.dumps(str(root / "agents.log")),
        json.dumps(str(root / "judges.log")),
    )
    lines = [
        "name: capped",
        "agent:",
        f'  command: [{python}, "{{evals}}/record.py", {agent_log}, agent, "0.3", "{meet[0]}"]',
        "  transcript: text",
        "  timeout_minutes: 1",
        *([f"  max_concurrent: {agent_cap}"] if agent_cap is not None else []),
        f"k: {K}",
        "judge:",
        f'  command: [{python}, "{{evals}}/record.py", {judge_log}, judge, "0.15", "{meet[1]}"]',
        *([f"  max_concurrent: {judge_cap}"] if judge_cap is not None else []),
    ]
    # No checks: every row ties on them and goes to the judge.
    cases = {
        f"c{index}": f"task: chore {index}\njudge: the better answer wins\n"
        for index in range(CASES)
    }
    return write_subject(
        root / "capped",
        "\n".join(lines) + "\n",
        cases=cases,
        files={"SKILL.md": "skill\n", "evals/record.py": RECORDING},
    )


def most_at_once(log: Path) -> int:
    """The most recorded intervals open at the same moment."""
    moments: list[tuple[float, int]] = []
    for line in log.read_text().splitlines():
        start, end = json.loads(line)
        moments += [(start, 1), (end, -1)]
    open_now = most = 0
    for _, step in sorted(moments):  # at a tie an end (-1) sorts before a start
        open_now += step
        most = max(most, open_now)
    return most


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRIALRUN_HOME", str(tmp_path / "home"))


def compare(subject: Path, jobs: int, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = call_cli(
        ["compare", str(subject), "-j", str(jobs), "--no-commit", "-q"], capsys
    )
    assert code == 0, err
    assert out.startswith("verdict:")


def test_caps_bound_the_agents_and_judges_running_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    subject = make_subject(tmp_path, agent_cap=2, judge_cap=1)
    compare(subject, 6, capsys)
    agents, judges = tmp_path / "agents.log", tmp_path / "judges.log"
    assert len(agents.read_text().splitlines()) == CASES * K * 2  # baseline and candidate
    assert len(judges.read_text().splitlines()) == CASES * K * 2  # both orders of every row
    assert most_at_once(agents) <= 2
    assert most_at_once(judges) == 1


def test_without_caps_minus_j_alone_bounds_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Three agents and two judges wait for each other: more than a cap of 2 and 1 would allow.
    subject = make_subject(tmp_path, agent_cap=None, judge_cap=None, meet=(3, 2))
    compare(subject, 6, capsys)
    assert 2 < most_at_once(tmp_path / "agents.log") <= 6
    assert 1 < most_at_once(tmp_path / "judges.log") <= 6


def test_a_cap_above_minus_j_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    subject = make_subject(tmp_path, agent_cap=10, judge_cap=10)
    compare(subject, 2, capsys)
    assert most_at_once(tmp_path / "agents.log") <= 2
    assert most_at_once(tmp_path / "judges.log") <= 2


def test_a_bad_cap_is_one_error_line_before_any_agent_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    subject = make_subject(tmp_path, agent_cap=0, judge_cap=None)
    code = run_cli(["compare", str(subject), "--no-commit"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.splitlines() == [
        f"error: {subject / 'evals' / 'compare.yaml'}:6: 'max_concurrent' must be >= 1, found 0"
    ]
    assert not (tmp_path / "agents.log").exists()
