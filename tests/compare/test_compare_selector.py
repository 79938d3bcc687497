"""Trigger evaluation by selector: a ``triggers.command`` picks subjects from a catalog.

The scripted selector (tests/compare_agents/selector.py) answers each prompt as the
``SELECTOR_PLAN`` environment variable says, so every test states the selector's behaviour.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from paths import COMPARE_AGENTS_DIR
from trialrun.compare.config import load_eval_assets
from trialrun.compare.outcome import build_outcome
from trialrun.compare.records import TriggerProbe, trigger_outcome
from trialrun.compare.report import format_report
from trialrun.compare.selector import (
    CatalogEntry,
    SelectorCallError,
    build_catalog,
    parse_selection,
    read_description,
    selection_payload,
)
from trialrun.compare.stats import wilson_interval
from trialrun.compare.triggers import evaluate_with_selector
from trialrun.errors import ConfigError

SELECTOR = COMPARE_AGENTS_DIR / "selector.py"
AGENT_COMMAND = json.dumps([sys.executable, "-c", "pass"])
TRIGGERS = {
    "should_trigger": ["deploy the staging stack", "ship it to staging"],
    "should_not_trigger": ["rename this variable", "fix the typo in README"],
}


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def skill_md(name: str | None, description: str) -> str:
    head = f"name: {name}\n" if name else ""
    return f"---\n{head}description: {json.dumps(description)}\n---\n# body\n"


def make_library(
    root: Path,
    *,
    selector: list[str] | None = None,
    triggers: dict[str, list[str]] | None = TRIGGERS,
) -> Path:
    """A Library root with the evaluated subject ``deployer`` and two siblings."""
    subject = root / "deployer"
    write(subject / "SKILL.md", skill_md("deployer", "Deploys stacks to staging"))
    command = json.dumps(selector if selector is not None else [sys.executable, str(SELECTOR)])
    compare = f"name: deployer\nagent:\n  command: {AGENT_COMMAND}\n"
    compare += f"triggers:\n  command: {command}\n"
    write(subject / "evals" / "compare.yaml", compare)
    write(subject / "evals" / "cases" / "one.yaml", "task: x\nchecks:\n  - file_exists: a\n")
    if triggers is not None:
        write(subject / "evals" / "triggers.yaml", json.dumps(triggers))
    write(root / "renamer" / "SKILL.md", skill_md(None, "Renames symbols"))
    write(root / "linter" / "SKILL.md", skill_md("lint-fixer", "Fixes lint"))
    write(root / "notes" / "README.md", "not a subject\n")
    write(root / ".hidden" / "SKILL.md", skill_md("hidden", "never listed"))
    return subject


@pytest.fixture
def plan(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    def set_plan(answers: dict[str, Any]) -> Path:
        record = tmp_path / "calls.jsonl"
        monkeypatch.setenv("SELECTOR_PLAN", json.dumps(answers))
        monkeypatch.setenv("SELECTOR_RECORD", str(record))
        return record

    return set_plan


def run(subject: Path, *, k: int = 1, timeout_s: float = 20.0) -> list[TriggerProbe]:
    return evaluate_with_selector(load_eval_assets(subject), subject, k=k, timeout_s=timeout_s)


def test_hits_miss_and_false_fire_count_into_their_cells(tmp_path: Path, plan: Any) -> None:
    subject = make_library(tmp_path)
    plan(
        {
            "deploy the staging stack": {"select": ["deployer", "renamer"]},
            "ship it to staging": {"select": ["lint-fixer"]},
            "rename this variable": {"select": ["deployer"]},
            "fix the typo in README": {"select": []},
        }
    )
    probes = run(subject)
    assert [(p.prompt, p.should_trigger, p.fired) for p in probes] == [
        ("deploy the staging stack", True, True),
        ("ship it to staging", True, False),
        ("rename this variable", False, True),
        ("fix the typo in README", False, False),
    ]
    outcome = trigger_outcome(probes)
    assert (outcome.tp, outcome.fn, outcome.fp, outcome.tn, outcome.errored) == (1, 1, 1, 1, 0)
    assert outcome.recall == 0.5 and outcome.precision == 0.5
    report = report_for(probes)
    assert "triggers: recall=0.50 precision=0.50 (tp=1 fn=1 fp=1 tn=1)" in report
    assert '  MISS: "ship it to staging"' in report
    assert '  FALSE-FIRE: "rename this variable"' in report
    assert "deploy the staging stack" not in report
    low, high = _wilson(1, 2)
    assert f"triggers 95% CI (Wilson): recall [{low}, {high}]" in report


def _wilson(successes: int, total: int) -> tuple[str, str]:
    interval = wilson_interval(successes, total)
    assert interval is not None
    return f"{interval.low:.2f}", f"{interval.high:.2f}"


def report_for(probes: list[TriggerProbe]) -> str:
    outcome = build_outcome(
        samples=[], rows=[], opponents=["baseline"], planned=[], triggers=trigger_outcome(probes)
    )
    return format_report(outcome)


def test_the_catalog_lists_the_subject_and_its_siblings(tmp_path: Path, plan: Any) -> None:
    subject = make_library(tmp_path, triggers={"should_trigger": ["go"]})
    record = plan({})
    run(subject)
    call = json.loads(record.read_text(encoding="utf-8"))
    assert call["payload"] == {
        "catalog": [
            {"name": "deployer", "description": "Deploys stacks to staging"},
            {"name": "lint-fixer", "description": "Fixes lint"},
            {"name": "renamer", "description": "Renames symbols"},
        ],
        "prompt": "go",
    }


def test_the_catalog_keeps_the_subject_when_a_sibling_takes_its_name(tmp_path: Path) -> None:
    subject = tmp_path / "mine"
    write(subject / "SKILL.md", "no frontmatter here\n")
    write(tmp_path / "other" / "SKILL.md", skill_md("staged-name", "an impostor"))
    write(tmp_path / "broken" / "SKILL.md", "---\nname: [unclosed\n---\n")
    catalog = build_catalog(subject, "staged-name")
    assert catalog == [CatalogEntry("broken", ""), CatalogEntry("staged-name", "")]


def test_read_description_tolerates_missing_and_malformed_files(tmp_path: Path) -> None:
    assert read_description(tmp_path) == (None, "")
    write(tmp_path / "SKILL.md", "---\nname: x\ndescription: never closed\n")
    assert read_description(tmp_path) == (None, "")
    write(tmp_path / "SKILL.md", "---\n- a list\n---\n")
    assert read_description(tmp_path) == (None, "")
    write(tmp_path / "SKILL.md", "---\nname: '  '\ndescription: 7\n---\n")
    assert read_description(tmp_path) == (None, "")
    write(tmp_path / "SKILL.md", "---\nname: ok\ndescription: '  Does X.  '\n---\nbody")
    assert read_description(tmp_path) == ("ok", "Does X.")


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("---\nname: x\ndescription: never closed\n", ":1: the frontmatter opened here"),
        ("---\nname: x\ndescription: [unclosed\n---\n", ":3: invalid YAML in the frontmatter"),
        ("---\n- a list\n---\n", ":2: expected the frontmatter to be a mapping"),
        ("---\nname: x\ndescription: 7\n---\n", ":3: expected 'description' to be text"),
    ],
)
def test_the_subjects_own_broken_description_is_an_error_at_its_line(
    tmp_path: Path, text: str, where: str
) -> None:
    # Read as empty, it would change what the selector picks, and so the verdict, silently.
    write(tmp_path / "SKILL.md", text)
    with pytest.raises(ConfigError) as caught:
        read_description(tmp_path, strict=True)
    assert str(caught.value).startswith(f"{tmp_path / 'SKILL.md'}{where}")
    assert read_description(tmp_path) == (None, "")  # a sibling's is tolerated


def test_a_broken_subject_description_stops_the_load_when_triggers_are_evaluated(
    tmp_path: Path,
) -> None:
    subject = make_library(tmp_path)
    write(subject / "SKILL.md", "---\nname: deployer\ndescription: [oops\n---\n")
    with pytest.raises(ConfigError, match=r"SKILL.md:3: invalid YAML in the frontmatter"):
        load_eval_assets(subject)
    (subject / "evals" / "triggers.yaml").unlink()
    assert load_eval_assets(subject).triggers is None  # no selector, nothing reads it


def test_errored_calls_count_in_neither_cell_and_are_reported(tmp_path: Path, plan: Any) -> None:
    subject = make_library(tmp_path)
    plan(
        {
            "deploy the staging stack": {"exit": 3},
            "ship it to staging": {"raw": "I think deployer fits"},
            "rename this variable": {"raw": '{"selected": "deployer"}'},
            "fix the typo in README": {"select": []},
        }
    )
    probes = run(subject)
    assert [p.fired for p in probes] == [None, None, None, False]
    assert probes[0].error is not None and "exited with code 3, expected 0" in probes[0].error
    assert probes[1].error is not None and "I think deployer fits" in probes[1].error
    assert probes[2].error is not None and 'expected {"selected": [names]}' in probes[2].error
    outcome = trigger_outcome(probes)
    assert (outcome.tp, outcome.fn, outcome.fp, outcome.tn, outcome.errored) == (0, 0, 0, 1, 3)
    report = report_for(probes)
    assert "(tp=0 fn=0 fp=0 tn=1 errored=3)" in report
    assert '  ERROR: "deploy the staging stack" (selector exited with code 3' in report
    assert "MISS" not in report and "FALSE-FIRE" not in report


def test_a_hung_selector_times_out_and_its_group_is_killed(tmp_path: Path, plan: Any) -> None:
    subject = make_library(tmp_path, triggers={"should_not_trigger": ["wait"]})
    plan({"wait": {"sleep": 30, "select": ["deployer"]}})
    (probe,) = run(subject, timeout_s=0.5)
    assert probe.fired is None
    assert probe.error == "selector gave no answer within 0.5s (its process group was killed)"


def test_a_selector_that_cannot_start_errors_every_call(tmp_path: Path, plan: Any) -> None:
    missing = str(tmp_path / "no-such-selector")
    subject = make_library(tmp_path, selector=[missing])
    probes = run(subject, k=2)
    assert len(probes) == 8
    assert all(p.fired is None for p in probes)
    assert all(p.error and p.error.startswith(f"cannot start selector {missing!r}") for p in probes)


def test_the_selector_command_expands_evals_and_name(tmp_path: Path, plan: Any) -> None:
    subject = make_library(tmp_path, selector=[sys.executable, "{evals}/selector.py", "{name}"])
    (subject / "evals" / "selector.py").write_text(SELECTOR.read_text(encoding="utf-8"))
    plan({"deploy the staging stack": {"select": ["deployer"]}})
    probes = run(subject)
    assert [p.error for p in probes] == [None] * 4
    assert [p.fired for p in probes] == [True, False, False, False]


def test_k_repeats_each_prompt_with_its_repetition_number(tmp_path: Path, plan: Any) -> None:
    subject = make_library(
        tmp_path, triggers={"should_trigger": ["a"], "should_not_trigger": ["b"]}
    )
    record = plan(
        {
            "a": {"select": ["deployer"], "by_rep": {"1": {"select": []}}},
            "b": {"select": [], "by_rep": {"2": {"exit": 1}}},
        }
    )
    probes = run(subject, k=3)
    assert [(p.prompt, p.fired) for p in probes] == [
        ("a", True),
        ("a", False),
        ("a", True),
        ("b", False),
        ("b", False),
        ("b", None),
    ]
    calls = [json.loads(line) for line in record.read_text(encoding="utf-8").splitlines()]
    assert [(c["payload"]["prompt"], c["rep"]) for c in calls] == [
        ("a", "0"),
        ("a", "1"),
        ("a", "2"),
        ("b", "0"),
        ("b", "1"),
        ("b", "2"),
    ]
    outcome = trigger_outcome(probes)
    assert (outcome.tp, outcome.fn, outcome.fp, outcome.tn, outcome.errored) == (2, 1, 0, 2, 1)
    assert report_for(probes).count('  MISS: "a"') == 1


def test_no_triggers_file_means_no_probes_and_no_calls(tmp_path: Path, plan: Any) -> None:
    subject = make_library(tmp_path, triggers=None)
    record = plan({})
    assert run(subject, k=2) == []
    assert not record.exists()


def test_misuse_is_refused_with_what_was_expected(tmp_path: Path) -> None:
    subject = make_library(tmp_path)
    with pytest.raises(ConfigError, match="expected a whole number >= 1, found 0"):
        run(subject, k=0)
    compare = subject / "evals" / "compare.yaml"
    write(compare, f"name: deployer\nagent:\n  command: {AGENT_COMMAND}\n")
    with pytest.raises(ConfigError, match="found no 'triggers' section"):
        run(subject)


def test_the_triggers_section_is_validated(tmp_path: Path) -> None:
    subject = make_library(tmp_path, selector=[])
    with pytest.raises(ConfigError, match="triggers"):
        load_eval_assets(subject)


def test_parse_selection_takes_the_last_line_after_logs() -> None:
    assert parse_selection('log\n{"selected": ["a", "b"]}\n') == ["a", "b"]
    assert parse_selection('{"selected": []}') == []
    nested_past_the_stack = '{"selected": ' + "[" * 100_000 + "]" * 100_000 + "}"
    five_thousand_digits = '{"selected": ' + "9" * 5000 + "}"
    for garbage in (
        "", "[]", '{"selected": [1]}', '{"chosen": ["a"]}', "not json",
        nested_past_the_stack, five_thousand_digits,
    ):  # fmt: skip
        with pytest.raises(SelectorCallError, match="expected"):
            parse_selection(garbage)


names = st.text(min_size=1, max_size=12)


@given(st.lists(names, max_size=5), st.text(max_size=40))
def test_parse_selection_reads_back_any_answer(selected: list[str], noise: str) -> None:
    answer = json.dumps({"selected": selected}, ensure_ascii=False)
    assert parse_selection(answer) == selected
    assert parse_selection(noise.replace("\n", " ") + "\n" + answer) == selected


@given(st.lists(st.tuples(names, st.text(max_size=30)), max_size=4), st.text(max_size=40))
def test_the_payload_round_trips(entries: list[tuple[str, str]], prompt: str) -> None:
    catalog = [CatalogEntry(name, description) for name, description in entries]
    doc = json.loads(selection_payload(catalog, prompt))
    assert doc["prompt"] == prompt
    assert [CatalogEntry(e["name"], e["description"]) for e in doc["catalog"]] == catalog
