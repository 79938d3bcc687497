"""End to end: a ``session.yaml`` run (one agent session per arm, many scored sub-cases).

The scripted agent (tests/compare_agents/scripted.py) takes its plan from the task's ``#agent``
line (what the baseline does) and from the staged subject's ``agent.json`` (what the candidate
and the incumbent do instead). One session per arm and rep answers four sub-cases:

=========  ========  =========  ==========  ==========================
sub-case   baseline  candidate  incumbent   candidate-vs-baseline / -incumbent
=========  ========  =========  ==========  ==========================
made_out   fail      pass       pass        win / tie
ran_tests  fail      pass       fail        win / win
no_force   fail      pass       fail        win / win
mentions   fail      pass       pass        win / tie
=========  ========  =========  ==========  ==========================

With k = 2 that is 8W / 0L / 0T against the baseline, whose row sign test would say p=0.008;
the rows share sessions, so p is pinned to 1.0 in the report and in the receipt. The ordinary
case ``solo`` runs beside it: both candidate and incumbent pass its check, so its rubric goes to
the fake judge (the longer transcript, the candidate's, wins); a session sub-case is never judged.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from builders import row_table, write_subject
from paths import COMPARE_AGENTS_DIR
from trialrun.cli import run_cli
from trialrun.compare.arms import ArmSpec, plan_runs, run_arm
from trialrun.compare.config import load_eval_assets

SCRIPTED = COMPARE_AGENTS_DIR / "scripted.py"
PYTHON = json.dumps(sys.executable)

COMPARE_YAML = f"""\
name: demo
agent:
  command: [{PYTHON}, {json.dumps(str(SCRIPTED))}, "{{task}}", --max-turns, "{{max_turns}}"]
  timeout_minutes: 1
arms:
  incumbent: {{path: incumbent}}
k: 2
judge:
  command: [{PYTHON}, -m, trialrun.compare.fake_judge, --prefer, longer]
seed: 3
"""
BASELINE = {"run": ["rm -rf scratch"], "say": "done", "turns": 9, "cost_usd": 0.5}
CANDIDATE = {"write": {"out.txt": "x\n"}, "run": ["echo pytest passed"], "say": "summary: ok"}
INCUMBENT = {"write": {"out.txt": "x\n"}, "run": ["rm -rf scratch"], "say": "summary: meh"}
SESSION_YAML = f"""\
task: |
  do the chores
  #agent {json.dumps(BASELINE)}
max_turns: 7
cases:
  - name: made_out
    checks: [{{file_exists: out.txt}}]
  - name: ran_tests
    checks: [{{command_matching: pytest}}]
  - name: no_force
    checks: [{{no_command_matching: 'rm -rf'}}]
  - name: mentions
    checks: [{{transcript_mentions: summary}}]
"""
SOLO_YAML = f"""\
task: |
  say something
  #agent {json.dumps({"say": "hi"})}
checks: [{{transcript_mentions: summary}}]
judge: the longer answer wins
"""
SUB_CASES = ["made_out", "ran_tests", "no_force", "mentions"]


def make_subject(root: Path) -> Path:
    files = {
        "agent.json": json.dumps(CANDIDATE),
        "evals/incumbent/agent.json": json.dumps(INCUMBENT),
        "evals/session.yaml": SESSION_YAML,
    }
    return write_subject(root / "demo", COMPARE_YAML, cases={"solo": SOLO_YAML}, files=files)


def only_run_dir(home: Path) -> Path:
    [receipt] = sorted(home.glob("evals/local/*/*/receipt.json"))
    return receipt.parent


def load_json(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return loaded


def test_session_run_scores_every_sub_case_and_pins_p(
    tmp_path: Path, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    subject = make_subject(tmp_path)
    assert run_cli(["compare", str(subject), "-j", "3"]) == 0
    out = capsys.readouterr().out
    run_dir = only_run_dir(home)
    receipt = load_json(run_dir / "receipt.json")

    # One session per arm and rep, whatever the number of sub-cases.
    sessions = sorted(
        p.relative_to(run_dir / "sandboxes" / "session").as_posix()
        for p in (run_dir / "sandboxes" / "session").glob("*/*")
    )
    assert sessions == [
        f"{rep}/{arm}" for rep in "01" for arm in ("baseline", "candidate", "incumbent")
    ]
    transcripts = sorted(p.name for p in (run_dir / "transcripts").glob("session.*"))
    assert len(transcripts) == 6

    expected = []
    for rep in (0, 1):
        expected += [
            ("solo", rep, "baseline", "win", "checks"),
            ("solo", rep, "incumbent", "win", "judge"),
        ]
    for case in SUB_CASES:
        for rep in (0, 1):
            against_incumbent = "tie" if case in ("made_out", "mentions") else "win"
            decided = "checks" if against_incumbent == "win" else "checks-equal-no-judge"
            expected += [
                (case, rep, "baseline", "win", "checks"),
                (case, rep, "incumbent", against_incumbent, decided),
            ]
    assert sorted(row_table(receipt)) == sorted(expected)

    # (1 case + 4 sub-cases) x k=2 x 2 opponents.
    assert (receipt["expected_rows"], receipt["scored_rows"]) == (20, 20)
    assert receipt["execution_status"] == "complete" and receipt["holes"] == []
    assert receipt["sign_p_pinned"] is True
    baseline = receipt["comparisons"]["candidate-vs-baseline"]
    incumbent = receipt["comparisons"]["candidate-vs-incumbent"]
    assert (baseline["win"], baseline["loss"], baseline["tie"]) == (10, 0, 0)
    assert (incumbent["win"], incumbent["loss"], incumbent["tie"]) == (6, 0, 4)
    assert baseline["sign_p"] == 1.0 and incumbent["sign_p"] == 1.0
    assert receipt["verdict"] == "PASS"
    assert receipt["arm_scores"] == {"baseline": 0.0, "candidate": 1.0, "incumbent": 0.6}
    # A shared session counts once in the efficiency means: k sessions + k solo runs per arm.
    assert receipt["efficiency"]["baseline"]["samples"] == 4
    assert receipt["efficiency"]["baseline"]["turns"] == 5.0  # (9 + 9 + 1 + 1) / 4
    assert receipt["case_digests"]["made_out"] == receipt["case_digests"]["mentions"]

    assert out.startswith("verdict: PASS\n")
    pinned = "sign test p=1.000 pinned: rows share one agent session)"
    assert (
        f"candidate-vs-baseline: +100% net lift (10W / 0L / 0T over 10 comparisons, {pinned}" in out
    )
    assert (
        f"candidate-vs-incumbent: +60% net lift (6W / 0L / 4T over 10 comparisons, {pinned}" in out
    )


def test_max_turns_reaches_the_agent_as_placeholder_and_env(
    tmp_path: Path, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    subject = make_subject(tmp_path)
    record = tmp_path / "seen.json"
    plan = {**CANDIDATE, "record": str(record)}
    (subject / "agent.json").write_text(json.dumps(plan))
    assert run_cli(["compare", str(subject), "--k", "1", "--case", "solo"]) == 0
    capsys.readouterr()
    seen = load_json(record)
    assert seen["argv"][-2:] == ["--max-turns", "200"]  # solo does not set it: the default

    (subject / "evals" / "compare.yaml").write_text(
        COMPARE_YAML.replace(
            f'[{PYTHON}, {json.dumps(str(SCRIPTED))}, "{{task}}", --max-turns, "{{max_turns}}"]',
            '[/bin/sh, -c, "echo $TRIALRUN_MAX_TURNS {max_turns} > turns.txt"]',
        )
    )
    assets = load_eval_assets(subject)
    assert assets.session is not None
    [planned] = plan_runs([assets.session], 1, [ArmSpec("baseline", None)], seed=0)
    done = asyncio.run(run_arm(planned, ArmSpec("baseline", None), assets, workdir=tmp_path / "w"))
    assert done.status == "ok"
    assert (done.sandbox / "turns.txt").read_text() == "7 7\n"


def test_case_narrowing_leaves_the_session_out(
    tmp_path: Path, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    subject = make_subject(tmp_path)
    assert run_cli(["compare", str(subject), "--case", "solo"]) == 0
    out = capsys.readouterr().out
    receipt = load_json(only_run_dir(home) / "receipt.json")
    assert (receipt["expected_rows"], receipt["scored_rows"]) == (4, 4)
    assert receipt["sign_p_pinned"] is False
    assert receipt["comparisons"]["candidate-vs-baseline"]["sign_p"] == 0.5
    assert "pinned" not in out
    assert not (only_run_dir(home) / "sandboxes" / "session").exists()
