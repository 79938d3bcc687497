"""incident.promote: an incident becomes a case + cassette the suite loader and runner accept."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trialrun.config import load_suite
from trialrun.errors import ConfigError
from trialrun.incident.model import Incident, IncidentCall
from trialrun.incident.promote import case_file_for, cassette_text, promote
from trialrun.runner import RunOptions, RunProgress, run_suite
from trialrun.tools.cassette import Cassette

# Makes the calls listed in its input's "plan", in order; with --diverge it changes the last
# call's arguments, as a fixed (or differently broken) agent would.
AGENT = """
import json, sys
def send(m):
    sys.stdout.write(json.dumps(m) + "\\n"); sys.stdout.flush()
start = json.loads(sys.stdin.readline())
plan = start["input"]["plan"]
if "--diverge" in sys.argv:
    plan[-1] = {"tool": plan[-1]["tool"], "args": {"order_id": "other"}}
for n, step in enumerate(plan):
    send({"type": "tool_call", "name": step["tool"], "call_id": f"c{n}", "args": step["args"]})
    sys.stdin.readline()
send({"type": "final_output", "output": {"status": "refunded"}})
"""

REFUND = {"order_id": "A-1", "amount": 20}


def incident(**overrides: Any) -> Incident:
    calls = [
        IncidentCall(0, "lookup_order", {"order_id": "A-1"}, True, {"status": "paid"}),
        IncidentCall(1, "issue_refund", REFUND, True, {"refund_id": "r1"}),
        IncidentCall(2, "issue_refund", REFUND, False, None, "already refunded"),
    ]
    plan = [{"tool": c.name, "args": c.args} for c in calls]
    fields: dict[str, Any] = {
        "source_format": "otel",
        "source_file": "export.json",
        "input": {"ticket": "refund please", "plan": plan},
        "final_output": {"status": "refunded"},
        "calls": calls,
        "missing": [],
    }
    fields.update(overrides)
    return Incident(**fields)


def make_suite(root: Path, *, diverge: bool = False) -> Path:
    suite = root / "suite"
    (suite / "cases").mkdir(parents=True)
    agent = root / "agent.py"
    agent.write_text(AGENT, encoding="utf-8")
    command = [sys.executable, str(agent)] + (["--diverge"] if diverge else [])
    (suite / "suite.yaml").write_text(
        "suite_name: incidents\n"
        f"agent_command: {json.dumps(command)}\n"
        "mode: replay\ncases_path: cases\ntool_registry: [lookup_order, issue_refund]\n"
        "idle_timeout_ms: 10000\nkill_grace_ms: 200\n",
        encoding="utf-8",
    )
    return suite


def run_case(suite_dir: Path) -> Any:
    suite = load_suite(suite_dir)
    (result,) = asyncio.run(run_suite(suite, RunOptions(mode="replay"), RunProgress()))
    return result


def test_promoted_case_loads_and_passes_against_an_agent_repeating_the_calls(
    tmp_path: Path,
) -> None:
    suite_dir = make_suite(tmp_path)
    case_path, cassette_path = promote(incident(), suite_dir / "cases" / "refund-incident.json")
    assert case_path == suite_dir / "cases" / "refund-incident.yaml"
    assert cassette_path == suite_dir / "cassettes" / "refund-incident.jsonl"
    suite = load_suite(suite_dir)
    (case,) = suite.cases
    assert case.config.id == "refund-incident"
    assert case.config.input["ticket"] == "refund please"
    assert case.cassette_path == cassette_path.resolve()
    result = run_case(suite_dir)
    assert result.status == "pass", result.failure
    assert [call.name for call in result.run.tool_calls] == [
        "lookup_order",
        "issue_refund",
        "issue_refund",
    ]


def test_an_agent_making_a_different_call_is_a_cassette_mismatch(tmp_path: Path) -> None:
    suite_dir = make_suite(tmp_path, diverge=True)
    promote(incident(), suite_dir / "cases" / "refund-incident.yaml")
    result = run_case(suite_dir)
    assert result.status != "pass"
    assert result.failure is not None
    assert result.failure.kind == "cassette_mismatch"


def test_cassette_keeps_order_and_failed_calls(tmp_path: Path) -> None:
    _, cassette_path = promote(incident(), tmp_path / "cases" / "x.yaml")
    lines = [json.loads(line) for line in cassette_path.read_text(encoding="utf-8").splitlines()]
    assert [(e["tool"], e["ok"]) for e in lines] == [
        ("lookup_order", True),
        ("issue_refund", True),
        ("issue_refund", False),
    ]
    assert list(lines[0]) == ["tool", "args", "ok", "result"]
    assert lines[2]["error"] == "already refunded"
    loaded = Cassette.load(cassette_path)
    assert [entry.tool for entry in loaded.entries] == [e["tool"] for e in lines]


def test_case_file_outside_a_cases_directory_puts_the_cassette_beside_it(tmp_path: Path) -> None:
    case_path, cassette_path = promote(incident(), tmp_path / "one")
    assert case_path == tmp_path / "one.yaml"
    assert cassette_path == tmp_path / "cassettes" / "one.jsonl"
    case = json.loads(case_path.read_text(encoding="utf-8"))
    assert case["cassette"] == "cassettes/one.jsonl"
    assert case["id"] == "one"


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"missing": ["tool results"]}, "missing capture: tool results"),
        (
            {"calls": [IncidentCall(0, "issue_refund", None, True, {})]},
            "call 0 (issue_refund): arguments were not captured",
        ),
        (
            {"calls": [IncidentCall(4, "issue_refund", {"order_id": "A"}, None)]},
            "call 4 (issue_refund): the result was not captured",
        ),
        ({"input": "just text"}, "the input must be a JSON object"),
    ],
)
def test_refuses_an_inconclusive_incident_saying_what_is_missing(
    tmp_path: Path, overrides: dict[str, Any], expected: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        promote(incident(**overrides), tmp_path / "cases" / "x.json")
    assert expected in str(caught.value)
    assert "export.json" in str(caught.value)
    assert not (tmp_path / "cases").exists()
    assert not (tmp_path / "cassettes").exists()


def test_case_file_for_maps_targets_to_loadable_names() -> None:
    assert case_file_for(Path("cases/a.json")) == Path("cases/a.yaml")
    assert case_file_for(Path("cases/a.yml")) == Path("cases/a.yml")
    assert case_file_for(Path("cases/a.yaml")) == Path("cases/a.yaml")
    assert case_file_for(Path("cases/a")) == Path("cases/a.yaml")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.text(min_size=1),
            st.dictionaries(st.text(), json_values, max_size=3),
            st.booleans(),
            json_values,
        ),
        max_size=5,
    )
)
def test_cassette_text_round_trips_through_the_cassette_parser(
    tmp_path_factory: pytest.TempPathFactory, raw: list[tuple[str, dict[str, Any], bool, Any]]
) -> None:
    calls = [
        IncidentCall(i, name, args, ok, result, None if ok else "failed")
        for i, (name, args, ok, result) in enumerate(raw)
    ]
    path = tmp_path_factory.mktemp("cassette") / "c.jsonl"
    path.write_text(cassette_text(calls), encoding="utf-8")
    loaded = Cassette.load(path)
    assert [(e.tool, e.args, e.ok) for e in loaded.entries] == [
        (c.name, c.args, c.ok) for c in calls
    ]
    assert [e.result for e in loaded.entries if e.ok] == [c.result for c in calls if c.ok]
