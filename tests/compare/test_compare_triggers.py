"""Trigger probes of trialrun compare: one candidate run per prompt, fired or not, errors apart.

The scripted agent (tests/compare_agents/scripted.py) takes its plan from ``#agent {...}`` lines
of its task, and a trigger prompt is the task, so each prompt below says how the agent answers
it: a selection answer naming the subject fires it, anything else does not, a non-zero exit
(twice, as it is retried once) leaves the probe errored.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from builders import write_subject
from paths import COMPARE_AGENTS_DIR
from trialrun.cli import run_cli
from trialrun.compare.arms import ArmRun
from trialrun.compare.config import load_eval_assets
from trialrun.compare.engine import CompareOptions, run_compare
from trialrun.compare.store import RunDir, read_run_log
from trialrun.compare.triggers import TRIGGER_PROBE_EVENT, plan_probes, probe_from_run

AGENT = COMPARE_AGENTS_DIR / "scripted.py"
FIRES = {"say": json.dumps({"selected": ["my-skill"]})}
STAYS_OUT = {"say": "I will just do it myself"}


def prompt(text: str, plan: dict[str, Any]) -> str:
    return f"{text}\n#agent {json.dumps(plan)}"


HIT = prompt("deploy the staging stack", FIRES)
MISS = prompt("ship it to staging", STAYS_OUT)
CRASH = prompt("roll back staging", {"exit": 3})
FALSE_FIRE = prompt("rename this variable", FIRES)
QUIET = prompt("fix the typo in README", STAYS_OUT)


def make_subject(root: Path, triggers: dict[str, list[str]] | None) -> Path:
    subject = root / "subject"
    command = json.dumps([sys.executable, str(AGENT), "{task}"])
    files = {"SKILL.md": "# my skill\n"}
    if triggers is not None:
        files["evals/triggers.yaml"] = json.dumps(triggers)
    return write_subject(
        subject,
        f"name: my-skill\nagent:\n  command: {command}\nk: 1\nseed: 3\n",
        cases={"trigger-01": "task: note\nchecks:\n  - transcript_mentions: done\n"},
        files=files,
    )


@pytest.fixture
def subject(tmp_path: Path) -> Path:
    return make_subject(
        tmp_path,
        {"should_trigger": [HIT, MISS, CRASH], "should_not_trigger": [FALSE_FIRE, QUIET]},
    )


def receipts(home: Path) -> list[Path]:
    return sorted(home.glob("evals/local/*/*/receipt.json"))


def probe_events(run_dir: Path) -> list[dict[str, Any]]:
    return [data for kind, data in read_run_log(RunDir(run_dir)) if kind == TRIGGER_PROBE_EVENT]


def test_report_and_receipt_show_the_miss_the_false_fire_and_the_errored_probe(
    home: Path, subject: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = run_cli(["compare", str(subject), "-j", "4"])
    out, err = capsys.readouterr()

    assert code == 0, err
    lines = out.splitlines()
    start = lines.index("triggers: recall=0.50 precision=0.50 (tp=1 fn=1 fp=1 tn=1 errored=1)")
    assert lines[start + 1] == f"  MISS: {json.dumps(MISS)}"
    assert lines[start + 2].startswith(f"  ERROR: {json.dumps(CRASH)} (agent exited with code 3")
    assert lines[start + 3] == f"  FALSE-FIRE: {json.dumps(FALSE_FIRE)}"
    assert lines[start + 4].startswith("efficiency:")
    [path] = receipts(home)
    triggers = json.loads(path.read_text())["triggers"]
    assert {key: triggers[key] for key in ("recall", "precision", "tp", "fn", "fp", "tn")} == {
        "recall": 0.5,
        "precision": 0.5,
        "tp": 1,
        "fn": 1,
        "fp": 1,
        "tn": 1,
    }
    assert triggers["errored"] == 1
    # Stored like the arms: a transcript per probe and one event each, in prompt order.
    events = probe_events(path.parent)
    assert [(e["prompt"], e["should_trigger"], e["fired"]) for e in events] == [
        (HIT, True, True),
        (MISS, True, False),
        (CRASH, True, None),
        (FALSE_FIRE, False, True),
        (QUIET, False, False),
    ]
    assert events[2]["run"]["status"] == "failed" and events[2]["run"]["attempts"] == 2
    transcripts = path.parent / "transcripts"
    for event in events:
        assert (transcripts / event["run"]["transcript_file"]).is_file()
    # The probe names steer clear of the case called trigger-01: no shared sandbox or file.
    assert (transcripts / "trigger-01.candidate.0.jsonl").is_file()
    assert events[0]["run"]["transcript_file"] == "_trigger-01.candidate.0.jsonl"
    staged = path.parent / "sandboxes" / "_trigger-01" / "0" / "candidate" / ".claude" / "skills"
    assert (staged / "my-skill" / "SKILL.md").is_file()


def test_rescore_redecides_the_probes_from_stored_transcripts(
    home: Path, subject: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_compare(CompareOptions(subject, jobs=4)).outcome.triggers is not None
    [first] = receipts(home)
    (subject / "evals" / "compare.yaml").write_text(
        (subject / "evals" / "compare.yaml").read_text().replace(str(AGENT), "/nonexistent")
    )

    again = run_compare(CompareOptions(subject, rescore=first.parent.name))

    triggers = again.outcome.triggers
    assert triggers is not None
    assert (triggers.tp, triggers.fn, triggers.fp, triggers.tn, triggers.errored) == (1, 1, 1, 1, 1)
    assert [probe.fired for probe in triggers.probes] == [True, False, None, True, False]
    assert len(probe_events(again.run_dir.path)) == 5
    assert not any(again.run_dir.sandboxes.iterdir())  # no agent ran


def test_no_triggers_file_and_case_narrowing_give_no_trigger_eval(
    home: Path, subject: Path, tmp_path: Path
) -> None:
    narrowed = run_compare(CompareOptions(subject, case_names=("trigger-01",)))
    bare = run_compare(CompareOptions(make_subject(tmp_path / "bare", None)))

    assert narrowed.outcome.triggers is None and narrowed.receipt["triggers"] is None
    assert bare.outcome.triggers is None and bare.receipt["triggers"] is None
    assert probe_events(narrowed.run_dir.path) == []


def test_plan_probes_puts_should_trigger_first_and_avoids_taken_names(tmp_path: Path) -> None:
    subject = make_subject(tmp_path, {"should_not_trigger": ["b"], "should_trigger": ["a", "  "]})
    assets = load_eval_assets(subject)

    plans = plan_probes(assets, taken={"trigger-02", "_trigger-03"})

    assert [(p.prompt, p.should_trigger, p.run.case) for p in plans] == [
        ("a", True, "__trigger-01"),
        ("  ", True, "__trigger-02"),
        ("b", False, "__trigger-03"),
    ]
    assert all(p.run.arm_order == ("candidate",) and p.run.rep == 0 for p in plans)
    assert plan_probes(load_eval_assets(make_subject(tmp_path / "none", None))) == []


def test_a_probe_that_never_finished_is_errored_not_a_miss(tmp_path: Path) -> None:
    assets = load_eval_assets(make_subject(tmp_path, {"should_trigger": ["a"]}))
    [plan] = plan_probes(assets)
    timed_out = ArmRun(
        plan.run.case, 0, "candidate", "timeout", FIRES["say"], tmp_path, None, 1, 9.0
    )

    never = probe_from_run(plan, None, "stream-json", "my-skill")
    dead = probe_from_run(plan, timed_out, "stream-json", "my-skill")
    answered = probe_from_run(plan, replace(timed_out, status="ok"), "text", "my-skill")

    assert never.fired is None and never.error is not None and "interrupted" in never.error
    assert dead.fired is None and dead.error == "the agent run ended as timeout"
    assert answered.fired is True and answered.error is None


SELECTOR = COMPARE_AGENTS_DIR / "selector.py"


def test_a_selector_command_decides_the_prompts_through_the_cli_and_rescore_replays_it(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    subject = make_subject(
        tmp_path, {"should_trigger": ["deploy it", "ship it"], "should_not_trigger": ["rename x"]}
    )
    config = subject / "evals" / "compare.yaml"
    selector = json.dumps([sys.executable, str(SELECTOR)])
    config.write_text(config.read_text() + f"triggers:\n  command: {selector}\n")
    plan = {
        "deploy it": {"select": ["my-skill"]},
        "ship it": {"select": [], "by_rep": {"1": {"raw": "no idea"}}},
        "rename x": {"select": ["my-skill"], "by_rep": {"1": {"select": []}}},
    }
    monkeypatch.setenv("SELECTOR_PLAN", json.dumps(plan))

    code = run_cli(["compare", str(subject), "--triggers-k", "2"])
    out, err = capsys.readouterr()

    assert code == 0, err
    lines = out.splitlines()
    # deploy it x2 hits, ship it: one miss and one garbage answer, rename x: one false fire.
    start = lines.index("triggers: recall=0.67 precision=0.67 (tp=2 fn=1 fp=1 tn=1 errored=1)")
    assert lines[start + 1] == '  MISS: "ship it"'
    assert lines[start + 2].startswith('  ERROR: "ship it"')
    assert lines[start + 3] == '  FALSE-FIRE: "rename x"'
    [first] = receipts(home)
    assert json.loads(first.read_text())["triggers"]["errored"] == 1

    # Rescoring re-decides rows, never the selector: its stored decisions are replayed as made.
    monkeypatch.setenv("SELECTOR_PLAN", "{}")
    again = run_compare(CompareOptions(subject, rescore=first.parent.name))
    triggers = again.outcome.triggers
    assert triggers is not None
    assert (triggers.tp, triggers.fn, triggers.fp, triggers.tn, triggers.errored) == (2, 1, 1, 1, 1)
