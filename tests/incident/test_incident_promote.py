"""incident.promote: an incident becomes a case + cassette the suite loader and runner accept."""

from __future__ import annotations

import asyncio
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import write_suite
from trialrun.config import load_suite
from trialrun.errors import ConfigError
from trialrun.incident.model import Incident, IncidentCall
from trialrun.incident.promote import cassette_text, promote
from trialrun.running.runner import RunOptions, RunProgress, run_suite
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
    agent = root / "agent.py"
    agent.write_text(AGENT, encoding="utf-8")
    return write_suite(
        root,
        name="incidents",
        agent=[sys.executable, agent, *(["--diverge"] if diverge else [])],
        tools=["lookup_order", "issue_refund"],
        settings="idle_timeout_ms: 10000\nkill_grace_ms: 200\n",
    )


def run_case(suite_dir: Path) -> Any:
    suite = load_suite(suite_dir)
    (result,) = asyncio.run(run_suite(suite, RunOptions(mode="replay"), RunProgress()))
    return result


def test_promoted_case_loads_and_passes_against_an_agent_repeating_the_calls(
    tmp_path: Path,
) -> None:
    suite_dir = make_suite(tmp_path)
    case_path, cassette_path = promote(incident(), suite_dir / "cases" / "refund-incident.json")
    assert case_path == suite_dir / "cases" / "refund-incident.json"
    assert sorted(p.name for p in case_path.parent.iterdir()) == ["refund-incident.json"]
    assert json.loads(case_path.read_text(encoding="utf-8"))["id"] == "refund-incident"
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
    case_path, cassette_path = promote(incident(), tmp_path / "one.yml")
    assert case_path == tmp_path / "one.yml"
    assert cassette_path == tmp_path / "cassettes" / "one.jsonl"
    case = yaml.safe_load(case_path.read_text(encoding="utf-8"))
    assert case["cassette"] == "cassettes/one.jsonl"
    assert case["id"] == "one"


@pytest.mark.parametrize("name", ["x.json", "x.yaml", "x.yml"])
def test_the_case_file_is_written_exactly_where_asked_and_loads_the_same(
    tmp_path: Path, name: str
) -> None:
    # 1e-05 is what json.dumps writes for 0.00001, and YAML 1.1 would read it as a string.
    wanted = {"ticket": "refund please", "amount": 0.00001, "big": 1e300, "note": "a\tb\u2028"}
    suite_dir = make_suite(tmp_path)
    case_path, _ = promote(incident(input=wanted), suite_dir / "cases" / name)
    assert sorted(p.name for p in case_path.parent.iterdir()) == [name]
    is_json = case_path.read_text(encoding="utf-8").startswith("{")
    assert is_json == (name == "x.json")
    (case,) = load_suite(suite_dir).cases
    assert case.config.input == wanted


@pytest.mark.parametrize("name", ["x", "x.txt", "x.jsonl", "x.JSON"])
def test_a_case_file_name_the_suite_would_not_load_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(
        ConfigError, match=re.escape("expected a case file ending in .yaml, .yml, .json")
    ):
        promote(incident(), tmp_path / "cases" / name)
    assert not (tmp_path / "cases").exists() and not (tmp_path / "cassettes").exists()


def test_the_case_description_names_the_source_file_only(tmp_path: Path) -> None:
    source = "/home/dana/exports/prod-7/refund.jsonl"
    case_path, _ = promote(incident(source_file=source), tmp_path / "cases" / "x.json")
    text = case_path.read_text(encoding="utf-8")
    assert "refund.jsonl" in text and "/home/dana" not in text


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


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=50)
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
