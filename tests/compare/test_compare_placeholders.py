"""One placeholder grammar for every command field of compare.yaml (trialrun.compare.placeholders).

Issue 15 item 1: ``judge.command: [python3, "{evals}/judge.py"]`` ran the braces verbatim. Every
command field now expands the same way and an unknown placeholder is refused at load time.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trialrun.cli import run_cli
from trialrun.compare.config import load_eval_assets
from trialrun.compare.placeholders import (
    FIELD_PLACEHOLDERS,
    PLACEHOLDERS,
    expand,
    expand_argv,
    placeholder_problems,
)
from trialrun.errors import ConfigErrors

AGENT = json.dumps([sys.executable, "{evals}/agent.py", "{task}"])


def subject_with(tmp_path: Path, compare_tail: str, *, agent: str = AGENT) -> Path:
    subject = tmp_path / "demo"
    (subject / "evals" / "cases").mkdir(parents=True)
    (subject / "evals" / "compare.yaml").write_text(
        f"name: demo\nagent:\n  command: {agent}\n{compare_tail}", encoding="utf-8"
    )
    (subject / "evals" / "cases" / "one.yaml").write_text(
        "task: do it\nchecks:\n  - file_exists: out.txt\n", encoding="utf-8"
    )
    return subject


def load_errors(subject: Path) -> list[str]:
    with pytest.raises(ConfigErrors) as caught:
        load_eval_assets(subject)
    return [str(error).split("evals/", 1)[-1] for error in caught.value.errors]


# -- the grammar -------------------------------------------------------------------------------


def test_expand_replaces_placeholders_and_unescapes_doubled_braces() -> None:
    values = {"evals": "/e", "name": "demo"}
    assert expand("{evals}/judge.py", values) == "/e/judge.py"
    assert expand('{{"subject": "{name}"}}', values) == '{"subject": "demo"}'
    assert expand("{{evals}}", values) == "{evals}"
    assert expand_argv(["x", "{name}-{name}"], values) == ["x", "demo-demo"]


def test_expand_refuses_a_placeholder_without_a_value_rather_than_passing_it_on() -> None:
    with pytest.raises(KeyError, match="evalz"):
        expand("{evalz}/judge.py", {"evals": "/e"})


@given(text=st.text())
def test_expanded_text_is_never_expanded_again(text: str) -> None:
    assert expand("[{task}]", {"task": text}) == f"[{text}]"


@given(literal=st.text())
def test_any_literal_text_survives_escaping(literal: str) -> None:
    escaped = literal.replace("{", "{{").replace("}", "}}")
    assert placeholder_problems(escaped, "judge.command") == []
    assert expand(escaped, {}) == literal


def test_every_field_uses_names_of_the_one_vocabulary() -> None:
    assert FIELD_PLACEHOLDERS["agent.command"] == PLACEHOLDERS
    for field, names in FIELD_PLACEHOLDERS.items():
        assert set(names) <= set(PLACEHOLDERS), field


def test_problems_name_the_placeholder_the_field_and_the_valid_ones() -> None:
    [unknown] = placeholder_problems("{evalz}/judge.py", "judge.command")
    assert unknown == (
        "unknown placeholder '{evalz}' in judge.command (did you mean '{evals}'?); "
        "placeholders here: {task}, {evals}, {name}, {max_turns}"
    )
    [no_value] = placeholder_problems("{sandbox}", "judge.command")
    assert "'{sandbox}' has no value in judge.command: it belongs to an arm's run" in no_value
    [case_only] = placeholder_problems("{task}", "triggers.command")
    assert "'{task}' has no value in triggers.command: it belongs to a case" in case_only
    [json_arg] = placeholder_problems('{"k": 1}', "agent.command")
    assert "a literal brace is written '{{' or '}}'" in json_arg
    [lone] = placeholder_problems("a}b", "agent.command")
    assert lone.startswith("a lone '}' in agent.command")


# -- at load time ------------------------------------------------------------------------------


def test_every_command_field_is_checked_at_its_line(tmp_path: Path) -> None:
    tail = (
        "judge:\n"
        '  command: [judge, "{evalz}/judge.py"]\n'
        '  escalate_command: [judge, "--sandbox={sandbox}"]\n'
        "triggers:\n"
        '  command: [select, "{task}"]\n'
    )
    errors = load_errors(subject_with(tmp_path, tail))
    assert [error.split(": ", 1)[0] for error in errors] == [
        "compare.yaml:5",
        "compare.yaml:6",
        "compare.yaml:8",
    ]
    assert "'{evalz}' in judge.command (did you mean '{evals}'?)" in errors[0]
    assert "'{sandbox}' has no value in judge.escalate_command" in errors[1]
    assert "'{task}' has no value in triggers.command" in errors[2]


def test_escaped_braces_load_and_reach_the_command_as_single_braces(tmp_path: Path) -> None:
    tail = 'judge:\n  command: [judge, \'{{"mode": "{name}"}}\']\n'
    assets = load_eval_assets(subject_with(tmp_path, tail))
    assert assets.config.judge is not None
    assert expand_argv(assets.config.judge.command, {"name": "demo"}) == [
        "judge",
        '{"mode": "demo"}',
    ]


def test_an_unknown_placeholder_exits_2_with_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    subject = subject_with(tmp_path, 'judge:\n  command: [python3, "{evalz}/judge.py"]\n')
    code = run_cli(["compare", str(subject)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1, err
    assert err.startswith("error: ") and "compare.yaml:5: unknown placeholder '{evalz}'" in err
    assert "judge.command (did you mean '{evals}'?)" in err
    assert "placeholders here: {task}, {evals}, {name}, {max_turns}" in err


def test_judge_command_option_is_checked_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRIALRUN_HOME", str(tmp_path / "home"))
    subject = subject_with(tmp_path, "")
    code = run_cli(["compare", str(subject), "--judge-command", "judge {evals}/{sandbox}"])
    err = capsys.readouterr().err
    assert code == 2
    assert err == (
        "error: placeholder '{sandbox}' has no value in --judge-command: it belongs to an arm's "
        "run, and --judge-command does not run for one; placeholders here: {task}, {evals}, "
        "{name}, {max_turns}\n"
    )
    assert not (tmp_path / "home").exists()  # refused before any run was created
