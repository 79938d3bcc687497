"""compare.yaml, cases, session.yaml and triggers.yaml as ``config.spec`` records: the error
paths the conversion from pydantic worded anew, and the values it reads as written."""

from __future__ import annotations

from pathlib import Path

import pytest

from trialrun.compare.arms import _configured_timeout_s
from trialrun.compare.config import load_eval_assets
from trialrun.errors import ConfigErrors

COMPARE = "name: s\nagent:\n  command: [run, '{task}']\n  timeout_minutes: 30\n"


def _subject(tmp_path: Path, **files: str) -> Path:
    subject = tmp_path / "subject"
    for relpath, text in {"compare.yaml": COMPARE, "cases/a.yaml": "task: t\n", **files}.items():
        path = subject / "evals" / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return subject


def _errors(subject: Path) -> list[str]:
    with pytest.raises(ConfigErrors) as caught:
        load_eval_assets(subject)
    return [str(e).split("evals/", 1)[-1] for e in caught.value.errors]


@pytest.mark.parametrize(
    ("relpath", "text", "expected"),
    [
        ("cases/a.yaml", "task: ''\n", "cases/a.yaml:1: 'task' must not be empty"),
        ("cases/a.yaml", "task: t\ntimeout_minutes: 121\n",
         "cases/a.yaml:2: 'timeout_minutes' must be <= 120, found 121"),
        ("cases/a.yaml", "task: t\nrequires: 5\n",
         "cases/a.yaml:2: 'requires' must be a list, found integer 5"),
        ("cases/a.yaml", "task: t\nfiles: {a.txt: [x]}\n",
         "cases/a.yaml:2: 'a.txt' must be a string, found a list"),
        ("cases/a.yaml", "task: t\nbucket: explict\n",
         "cases/a.yaml:2: 'bucket' must be one of explicit, implicit, contextual, negative, "
         "adversarial; found string 'explict' (did you mean 'explicit'?)"),
        ("session.yaml", "task: t\ncases:\n  - name: ''\n    checks: [{file_exists: a}]\n",
         "session.yaml:3: 'name' must not be empty"),
        ("session.yaml", "task: t\ncases:\n  - name: one\n    checks: []\n",
         "session.yaml:4: 'checks' must not be empty"),
        ("session.yaml", "task: t\ncases: []\n", "session.yaml:2: 'cases' must not be empty"),
        ("compare.yaml", COMPARE + "arms: {incumbent: {version: 1.5}}\n",
         "compare.yaml:5: 'version' must be a string, found number 1.5"),
        ("compare.yaml", COMPARE + "triggers: {command: []}\n",
         "compare.yaml:5: 'command' must not be empty"),
        ("compare.yaml", COMPARE + "triggers: {comand: [x]}\n",
         "compare.yaml:5: unknown key 'comand' in triggers (did you mean 'command'?)"),
        ("compare.yaml", "name: s\n",
         "compare.yaml:1: missing required key 'agent' in compare.yaml"),
        ("triggers.yaml", "should_trigger: [true]\n",
         "triggers.yaml:1: 'should_trigger[0]' must be a string, found boolean true"),
    ],
)  # fmt: skip
def test_each_problem_at_its_line(tmp_path: Path, relpath: str, text: str, expected: str) -> None:
    assert _errors(_subject(tmp_path, **{relpath: text})) == [expected]


def test_numbers_are_read_as_the_text_they_meant(tmp_path: Path) -> None:
    subject = _subject(
        tmp_path,
        **{
            "compare.yaml": COMPARE + "arms: {incumbent: {version: 7}}\n",
            "triggers.yaml": "should_trigger: [1.5, 42]\nshould_not_trigger: [rename]\n",
        },
    )
    assets = load_eval_assets(subject)
    assert assets.config.arms.incumbent is not None
    assert assets.config.arms.incumbent.version == "7"
    assert assets.triggers is not None and assets.triggers.should_trigger == ["1.5", "42"]
    assert assets.triggers.should_not_trigger == ["rename"]


def test_only_a_written_case_timeout_overrides_the_agent_timeout(tmp_path: Path) -> None:
    subject = _subject(
        tmp_path,
        **{
            "cases/b.yaml": "task: t\ntimeout_minutes: 120\n",
            "session.yaml": "task: t\ntimeout_minutes: 5\ncases:\n"
            "  - name: one\n    checks: [{file_exists: a}]\n",
        },
    )
    assets = load_eval_assets(subject)
    written = {case.name: case.config.timeout_written for case in assets.cases}
    assert written == {"a": False, "b": True}
    by_name = {case.name: case for case in assets.cases}
    # a: the default 120 is not written, so compare.yaml's 30 minutes apply; b wrote 120.
    assert _configured_timeout_s(by_name["a"], assets) == 30 * 60
    assert _configured_timeout_s(by_name["b"], assets) == 120 * 60
    assert assets.session is not None
    assert _configured_timeout_s(assets.session, assets) == 5 * 60
