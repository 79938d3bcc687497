"""pack.yaml and scenario files read as spec records: every problem at its line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trialrun.config.yamlload import parse_json, parse_yaml
from trialrun.errors import ConfigError
from trialrun.scenario.pack import check_scenario, load_pack

SCENARIO = {
    "id": "s",
    "orders": {"A1": {"total": 5, "status": "paid"}},
    "task": "refund A1",
    "faults": [{"tool": "issue_refund", "kind": "slow", "delay_ms": 1}],
}


def _scenario_problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        check_scenario(parse_yaml(text, file="s.yaml"))
    return str(caught.value).splitlines()


def test_a_well_formed_scenario_passes_and_orders_keep_their_other_keys() -> None:
    check_scenario(parse_json(json.dumps(SCENARIO), file="s.json"))


def test_every_problem_of_a_scenario_is_reported_at_once() -> None:
    text = (
        "id: ''\n"
        "orders: {A1: {total: 5}}\n"
        "task: t\n"
        "faults:\n"
        "  - {kind: slow, delay_ms: -1}\n"
        "  - {tool: issue_refund, kind: slow, call: 0, colour: red}\n"
    )
    assert _scenario_problems(text) == [
        "s.yaml:1: 'id' must not be empty",
        "s.yaml:5: missing required key 'tool' in faults[0]",
        "s.yaml:5: faults[0]: 'delay_ms' must be >= 0, found -1",
        "s.yaml:6: unknown key 'colour' in faults[1]",
        "s.yaml:6: faults[1]: 'call' must be >= 1, found 0",
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("id: s\norders: {A1: 5}\ntask: t\n", "s.yaml:2: 'A1' must be a mapping, found integer 5"),
        ("id: s\norders: {A1: {}}\ntask: t\n", "s.yaml:2: orders.A1: expected a mapping with a"),
        ("id: s\norders: []\ntask: t\n", "s.yaml:2: 'orders' must be a mapping, found a list"),
        ("id: s\norders: {}\n", "s.yaml:1: missing required key 'task' in the scenario"),
    ],
)
def test_a_wrong_scenario_value_is_named_at_its_line(text: str, expected: str) -> None:
    assert _scenario_problems(text)[0].startswith(expected)


def test_pack_yaml_problems_name_the_agent(tmp_path: Path) -> None:
    (tmp_path / "pack.yaml").write_text(
        "name: p\nagents:\n  naive: {command: [x], comand: [y]}\n  fixed: {command: [1]}\n"
        "scenarios: []\n"
    )
    with pytest.raises(ConfigError) as caught:
        load_pack(tmp_path)
    assert [line.split(": ", 1)[1] for line in str(caught.value).splitlines()] == [
        "unknown key 'comand' in agents.naive (did you mean 'command'?)",
        "agents.fixed: 'command[0]' must be a string, found integer 1",
    ]


_VALUES: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers(-1, 2) | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=4), inner, max_size=2)
    ),
    max_leaves=6,
)
_FAULT = st.fixed_dictionaries(
    {},
    optional={
        "tool": st.sampled_from(["issue_refund", "lookup", "x"]),
        "kind": st.sampled_from(["slow", "timeout_after_commit", "y"]),
        "call": _VALUES,
        "delay_ms": _VALUES,
    },
)


@settings(max_examples=150, deadline=None)
@given(
    st.fixed_dictionaries(
        {"id": _VALUES, "task": _VALUES},
        optional={"orders": _VALUES, "faults": st.lists(_FAULT | _VALUES, max_size=3) | _VALUES},
    )
)
def test_any_scenario_passes_or_fails_with_located_config_errors(data: dict[str, Any]) -> None:
    try:
        check_scenario(parse_json(json.dumps(data), file="s.json"))
    except ConfigError as exc:
        assert all(line.startswith("s.json:") for line in str(exc).splitlines())
    else:
        assert isinstance(data["id"], str) and data["id"] and isinstance(data["orders"], dict)
