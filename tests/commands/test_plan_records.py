"""The verify plan as ``config.spec`` records: every problem at once, each at its line."""

from __future__ import annotations

from pathlib import Path

import pytest

from trialrun.commands.verify_plan import load_plan
from trialrun.errors import ConfigErrors

SUITE = {
    "suite.yaml": "suite_name: s\nagent_command: [python3, agent.py]\nmode: replay\n"
    "cases_path: cases\ntool_registry: [lookup]\n",
    "cases/a_reset.yaml": "id: a_reset\ninput: {}\ncassette: a.jsonl\n",
    "a.jsonl": "",
    "agent.py": "",
}
EXPECT = "    expect: [{case: a_reset, failure: call_order}]\n"


def _plan(tmp_path: Path, text: str) -> Path:
    for relpath, content in SUITE.items():
        path = tmp_path / "suite" / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
    plan = tmp_path / "verify.yaml"
    plan.write_text("suite: suite\n" + text, encoding="utf-8")
    return plan


def _errors(plan: Path) -> list[str]:
    with pytest.raises(ConfigErrors) as caught:
        load_plan(plan)
    return [str(e).split("verify.yaml:", 1)[-1] for e in caught.value.errors]


def test_the_one_change_rule_is_reported_with_the_other_problems(tmp_path: Path) -> None:
    text = (
        "repeat: x\nregressions:\n  - name: r\n    env: {X: '1'}\n"
        "    patch: {file: suite.yaml, replace: a, with: b}\n" + EXPECT + "  - expect: []\n"
    )
    assert _errors(_plan(tmp_path, text)) == [
        "2: 'repeat' must be an integer, found string 'x'",
        "4: regression 'r' needs exactly one of env, agent_command, patch (found: env, patch)",
        "8: missing required key 'name' in regressions[1]",
        "8: 'expect' must not be empty",
        "8: a regression needs exactly one of env, agent_command, patch (found: none)",
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("regressions:\n  - name: r\n    patch: {file: suite.yaml, replace: a}\n" + EXPECT,
         "4: missing required key 'with' in patch"),
        ("regressions:\n  - name: r\n    patch: {file: suite.yaml, replace: a, with_: b}\n"
         + EXPECT, "4: unknown key 'with_' in patch (did you mean 'with'?)"),
        ("regressions:\n  - name: ''\n    env: {X: '1'}\n" + EXPECT, "3: 'name' must not be empty"),
        ("regressions:\n  - name: r\n    agent_command: []\n" + EXPECT,
         "4: 'agent_command' must not be empty"),
        ("regressions:\n  - name: r\n    env: {X: 1}\n" + EXPECT,
         "4: 'X' must be a string, found integer 1"),
        ("limits: {max_seconds: 0}\n", "2: 'max_seconds' must be > 0, found 0"),
        ("limits: {max_seconds: '9'}\n", "2: 'max_seconds' must be a number, found string '9'"),
        ("recovery: yes please\n",
         "2: 'recovery' must be true or false, found string 'yes please'"),
    ],
)  # fmt: skip
def test_each_problem_at_its_line(tmp_path: Path, text: str, expected: str) -> None:
    assert _errors(_plan(tmp_path, text)) == [expected]


def test_a_valid_plan_reads_every_key(tmp_path: Path) -> None:
    text = (
        "repeat: 2\nrecovery: true\nlimits: {max_seconds: 90}\nregressions:\n"
        "  - name: r\n    patch: {file: suite.yaml, replace: 'mode: replay', with: ''}\n" + EXPECT
    )
    plan = load_plan(_plan(tmp_path, text))
    assert plan.config.repeat == 2 and plan.config.recovery is True
    assert plan.config.limits is not None and plan.config.limits.max_seconds == 90
    (step,) = plan.config.regressions
    assert step.patch is not None and step.patch.with_ == ""
    assert [(e.case, e.failure) for e in step.expect] == [("a_reset", "call_order")]
