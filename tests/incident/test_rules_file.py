"""Incident rules files read as spec records: every problem at its line, named by its rule."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trialrun.errors import ConfigError
from trialrun.incident.rules import Rule, load_rules


def _problems(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "rules.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_rules(path)
    prefix = f"{path}:"
    lines = str(caught.value).splitlines()
    assert all(line.startswith(prefix) for line in lines)
    return [line.removeprefix(prefix) for line in lines]


def test_every_problem_of_every_rule_is_reported_at_once(tmp_path: Path) -> None:
    text = (
        "rules:\n"
        "  - {id: a, tool: t, max_calls_per: x, at_most: many}\n"
        "  - id: b\n"
        "    tool: ''\n"
        "    forbid_when_arg: [x]\n"
        "  - just a rule\n"
    )
    assert _problems(tmp_path, text) == [
        "2: rule 'a': 'at_most' must be an integer, found string 'many'",
        "4: rule 'b': 'tool' must not be empty",
        "5: rule 'b': 'forbid_when_arg' must be a mapping, found a list",
        "6: rule #3: 'rules[2]' must be a mapping, found string 'just a rule'",
    ]


def test_rules_that_parse_are_all_checked_for_how_their_keys_go_together(tmp_path: Path) -> None:
    text = (
        "- {id: a, tool: t}\n"
        "- {id: b, tool: t, forbid_when_arg: {x: 1}, at_most: 2}\n"
        "- {id: a, tool: t, max_calls_per: x}\n"
    )
    assert _problems(tmp_path, text) == [
        "1: rule 'a': expected 'max_calls_per' (with 'at_most') or 'forbid_when_arg'",
        "2: rule 'b': 'at_most' goes with 'max_calls_per', not 'forbid_when_arg'",
        "3: rule id 'a' is used twice (first at line 1); ids must be unique",
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("rules: 3\n", "1: 'rules' must be a list, found integer 3"),
        ("5\n", "1: expected a list of rules, or a mapping with a 'rules' list, found integer 5"),
        ("- {id: 7, tool: t, max_calls_per: x}\n", "1: rule #1: 'id' must be a string, found"),
        ("- {id: a, tool: t, max_calls_per: ''}\n", "1: rule 'a': 'max_calls_per' must not be"),
        (
            "- {id: a, tool: t, max_calls_per: x, 3: y}\n",
            "1: rule 'a': keys of '[0]' must be strings",
        ),
    ],
)
def test_a_wrong_shape_is_named_at_its_line(tmp_path: Path, text: str, expected: str) -> None:
    problems = _problems(tmp_path, text)
    assert any(p.startswith(expected) for p in problems), problems


def test_at_most_defaults_to_one_and_zero_forbids_every_call(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(
        "- {id: a, tool: t, max_calls_per: x}\n- {id: b, tool: t, max_calls_per: x, at_most: 0}\n"
    )
    assert [rule.at_most for rule in load_rules(path)] == [1, 0]


_KEYS = st.sampled_from(["id", "tool", "max_calls_per", "at_most", "forbid_when_arg", "colour"])
_VALUES = (
    st.none()
    | st.booleans()
    | st.integers(-2, 3)
    | st.text(max_size=4)
    | st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)
)
_ENTRIES = st.dictionaries(_KEYS, _VALUES, max_size=5) | _VALUES


@settings(max_examples=200, deadline=None)
@given(st.lists(_ENTRIES, max_size=4), st.booleans())
def test_any_rules_file_loads_or_fails_with_located_config_errors(
    entries: list[Any], wrapped: bool
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "rules.json"
        path.write_text(json.dumps({"rules": entries} if wrapped else entries), encoding="utf-8")
        try:
            rules = load_rules(path)
        except ConfigError as exc:
            lines = str(exc).splitlines()
            assert lines and all(line.startswith(f"{path}:") for line in lines)
            return
    assert len(rules) == len(entries)
    for rule, entry in zip(rules, entries, strict=True):
        assert isinstance(rule, Rule) and rule.id == entry["id"] and rule.tool == entry["tool"]
        assert (rule.max_calls_per is None) == ("max_calls_per" not in entry)
        assert rule.forbid_when_arg == entry.get("forbid_when_arg", {})
