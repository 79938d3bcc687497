"""``requires``: an unmet requirement skips its case (or the session) before any arm runs."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from builders import write_subject
from paths import COMPARE_AGENTS_DIR
from trialrun.cli import run_cli
from trialrun.compare import requires
from trialrun.compare.config import load_eval_assets
from trialrun.compare.records import Hole
from trialrun.compare.requires import RequirementProbe, apply_requirements, probe_requirement

SCRIPTED = COMPARE_AGENTS_DIR / "scripted.py"
MISSING_PROGRAM = "trialrun-no-such-program-4f1c"

COMPARE_YAML = f"""\
name: demo
agent:
  command: [{json.dumps(sys.executable)}, {json.dumps(str(SCRIPTED))}, "{{task}}"]
  timeout_minutes: 1
"""
# The staged subject makes the candidate write out.txt; the baseline does nothing.
AGENT_JSON = {"write": {"out.txt": "built\n"}}


def case_yaml(required: list[str] | str | None) -> str:
    text = "task: build out.txt\nchecks:\n  - file_exists: out.txt\n"
    return text if required is None else text + f"requires: {json.dumps(required)}\n"


def make_subject(root: Path, cases: dict[str, str], session: str | None = None) -> Path:
    files = {"agent.json": json.dumps(AGENT_JSON)}
    if session is not None:
        files["evals/session.yaml"] = session
    return write_subject(root / "demo", COMPARE_YAML, cases=cases, files=files)


def only_run_dir(home: Path) -> Path:
    [receipt] = sorted(home.glob("evals/local/*/*/receipt.json"))
    return receipt.parent


def load_json(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return loaded


# ---- probing one requirement -------------------------------------------------------------------


def test_a_program_on_path_is_met_and_a_missing_one_says_so() -> None:
    assert probe_requirement("sh") is None
    assert probe_requirement(MISSING_PROGRAM) == f"program '{MISSING_PROGRAM}' is not on PATH"


def test_a_module_is_probed_with_python3() -> None:
    assert probe_requirement("python3:json") is None
    reason = probe_requirement("python3:trialrun_no_such_module")
    assert reason is not None
    assert "module 'trialrun_no_such_module' is not importable by" in reason
    assert "ModuleNotFoundError" in reason


def test_without_python3_on_path_a_module_is_unmet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert probe_requirement("python3:json") == (
        "python3 is not on PATH, so module 'json' cannot be imported"
    )


def test_a_module_import_that_hangs_is_cut_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "slow_to_import.py").write_text("import time\ntime.sleep(30)\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setattr(requires, "PROBE_TIMEOUT_S", 0.3)
    reason = probe_requirement("python3:slow_to_import")
    assert reason is not None and "did not finish within 0.3s" in reason


def test_each_distinct_requirement_is_probed_once() -> None:
    asked: list[str] = []

    def probe(requirement: str) -> str | None:
        asked.append(requirement)
        return "absent" if requirement == "jq" else None

    checker = RequirementProbe(probe)
    assert checker.missing(["jq", "git", "jq"]) == [("jq", "absent")]
    assert checker.missing(["git", "jq"]) == [("jq", "absent")]
    assert asked == ["jq", "git"]


# ---- choosing what runs ------------------------------------------------------------------------


def test_unmet_cases_and_sessions_become_environment_skip_holes(tmp_path: Path) -> None:
    session = (
        "task: chores\nrequires: [python3:json, jq]\ncases:\n"
        "  - name: one\n    checks: [{file_exists: one.txt}]\n"
        "  - name: two\n    checks: [{file_exists: two.txt}]\n"
    )
    subject = make_subject(
        tmp_path,
        {
            "alpha": case_yaml("jq"),
            "beta": case_yaml(["git", "python3:json"]),
            "gamma": case_yaml(None),
        },
        session,
    )
    assets = load_eval_assets(subject)
    assert assets.session is not None
    checker = RequirementProbe(lambda req: "not here" if req == "jq" else None)
    kept, holes = apply_requirements([*assets.cases, assets.session], checker)
    assert [getattr(unit, "name", "session") for unit in kept] == ["beta", "gamma"]
    assert holes == [
        Hole("alpha", None, "environment-skip", "skipped: requires 'jq': not here"),
        Hole("one", None, "environment-skip", "skipped with the session: requires 'jq': not here"),
        Hole("two", None, "environment-skip", "skipped with the session: requires 'jq': not here"),
    ]
    assert sorted(checker.answers) == ["git", "jq", "python3:json"]


# ---- end to end --------------------------------------------------------------------------------


def test_a_skipped_case_is_named_never_run_and_never_a_zero(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    subject = make_subject(
        tmp_path,
        {
            "needs_tool": case_yaml(MISSING_PROGRAM),
            "needs_module": case_yaml(["python3:trialrun_no_such_module", MISSING_PROGRAM]),
            "plain": case_yaml(["sh", "python3:json"]),
        },
    )
    asked: list[str] = []

    def counting_probe(requirement: str) -> str | None:
        asked.append(requirement)
        return probe_requirement(requirement)

    monkeypatch.setattr(requires, "probe_requirement", counting_probe)
    assert run_cli(["compare", str(subject)]) == 0
    out = capsys.readouterr().out

    assert sorted(asked) == sorted(
        [MISSING_PROGRAM, "python3:trialrun_no_such_module", "sh", "python3:json"]
    )
    run_dir = only_run_dir(home)
    receipt = load_json(run_dir / "receipt.json")
    # Only "plain" was planned: 1 case x 1 rep x 1 opponent, and it was a win, not diluted.
    assert (receipt["expected_rows"], receipt["scored_rows"]) == (1, 1)
    assert receipt["comparisons"]["candidate-vs-baseline"]["win"] == 1
    assert receipt["comparisons"]["candidate-vs-baseline"]["net_lift"] == 1.0
    assert receipt["verdict"] == "PASS"
    assert receipt["execution_status"] == "partial"
    assert receipt["provenance"]["cases"] == ["plain"]
    assert [(h["case"], h["rep"], h["kind"]) for h in receipt["holes"]] == [
        ("needs_module", None, "environment-skip"),
        ("needs_tool", None, "environment-skip"),
    ]
    assert "trialrun_no_such_module" in receipt["holes"][0]["detail"]
    assert MISSING_PROGRAM in receipt["holes"][0]["detail"]
    assert receipt["holes"][1]["detail"] == (
        f"skipped: requires '{MISSING_PROGRAM}': program '{MISSING_PROGRAM}' is not on PATH"
    )
    assert f"hole (environment-skip): needs_tool — skipped: requires '{MISSING_PROGRAM}'" in out
    assert sorted(p.name for p in (run_dir / "sandboxes").iterdir()) == ["plain"]
    # Never planned: no arm ran, and the run log's plan, samples and rows do not name it.
    assert "needs_tool" not in (run_dir / "run.jsonl").read_text()


def test_a_run_where_every_case_is_skipped_is_failed_not_zero(
    tmp_path: Path, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    subject = make_subject(tmp_path, {"needs_tool": case_yaml(MISSING_PROGRAM)})
    assert run_cli(["compare", str(subject), "--gate"]) == 0
    capsys.readouterr()
    receipt = load_json(only_run_dir(home) / "receipt.json")
    assert (receipt["expected_rows"], receipt["scored_rows"]) == (0, 0)
    assert receipt["execution_status"] == "failed"
    assert receipt["verdict"] == "NEUTRAL"
    assert [hole["case"] for hole in receipt["holes"]] == ["needs_tool"]
