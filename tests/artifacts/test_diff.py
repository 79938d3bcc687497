"""``trialrun diff``: two real runs of a small suite, each kind of change, --json, exit codes."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from builders import call_cli
from trialrun.artifacts.diffing import (
    OUTPUT_DIFF_LINE_MAX_CHARS,
    OUTPUT_DIFF_MAX_LINES,
    WallChange,
    diff_runs,
    is_wall_change,
    load_run,
    output_diff,
    pretty_output,
)
from trialrun.cli import run_cli

# Reads what to do from behaviour.json, keyed by the case's input "case".
AGENT = """\
import json, pathlib, sys
plan = json.loads((pathlib.Path(__file__).parent / "behaviour.json").read_text())
for line in sys.stdin:
    message = json.loads(line)
    if message["type"] == "task_start":
        steps = plan[message["input"]["case"]]
        pending = list(steps["tools"])
    if pending:
        name = pending.pop(0)
        print(json.dumps({"type": "tool_call", "name": name, "call_id": name,
                          "args": {"q": name}}), flush=True)
        continue
    print(json.dumps({"type": "final_output", "output": steps["output"]}), flush=True)
    break
"""

CASSETTE = "".join(
    json.dumps({"tool": name, "args": {"q": name}, "ok": True, "result": {"hits": []}}) + "\n"
    for name in ("search", "lookup", "search", "lookup")
)

PASSING = {"tools": ["search"], "output": {"category": "account", "reply": "done"}}
NO_WALL = ["--wall-threshold-ms", "1000000"]
"""Real runs differ in wall time by chance; tests of other changes switch that comparison off."""


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    root = tmp_path / "suite"
    (root / "cases").mkdir(parents=True)
    (root / "agent.py").write_text(AGENT, encoding="utf-8")
    (root / "suite.yaml").write_text(
        f"suite_name: diffdemo\nagent_command: [{json.dumps(sys.executable)}, agent.py]\n"
        "mode: replay\ncases_path: cases\ntool_registry: [search, lookup]\n"
        "assertions:\n  - type: required_fields\n    fields: [category, reply]\n",
        encoding="utf-8",
    )
    for case_id in ("c1", "c2"):
        (root / "cases" / f"{case_id}.yaml").write_text(
            f"id: {case_id}\ninput: {{case: {case_id}}}\ncassette: {case_id}.jsonl\n",
            encoding="utf-8",
        )
        (root / f"{case_id}.jsonl").write_text(CASSETTE, encoding="utf-8")
    behave(root, c1=PASSING, c2=PASSING)
    return root


def behave(root: Path, **plans: dict[str, Any]) -> None:
    (root / "behaviour.json").write_text(json.dumps(plans), encoding="utf-8")


def run_once(suite: Path, out: Path, *extra: str) -> Path:
    before = set(out.glob("*/*"))
    run_cli(["run", str(suite), "--out", str(out), "--no-baseline", *extra])
    (created,) = set(out.glob("*/*")) - before
    return created


def test_identical_runs_do_not_differ(
    suite: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = run_once(suite, tmp_path / "out")
    b = run_once(suite, tmp_path / "out")
    code, out, _ = call_cli(["diff", str(a), str(b), *NO_WALL], capsys)
    assert code == 0, out
    assert "No differences (2 cases compared)." in out


def test_status_tools_and_output_changes_are_reported(
    suite: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = run_once(suite, tmp_path / "out")
    behave(
        suite,
        c1={"tools": ["search", "lookup"], "output": PASSING["output"]},
        c2={"tools": ["search"], "output": {"category": "billing"}},
    )
    b = run_once(suite, tmp_path / "out")
    code, out, _ = call_cli(["diff", str(a), str(b), *NO_WALL], capsys)
    assert code == 1
    assert "Status changed (1):\n  c2: pass -> fail" in out
    assert "Tool sequence changed (1):\n  c1:\n    A: search\n    B: search, lookup" in out
    assert "Final output changed (1):\n  c2:" in out
    assert '-  "category": "account",' in out and '+  "category": "billing"' in out
    assert out.rstrip().endswith("2 cases differ (2 compared).")


def test_json_shape(suite: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = run_once(suite, tmp_path / "out")
    behave(suite, c1=PASSING, c2={"tools": [], "output": PASSING["output"]})
    b = run_once(suite, tmp_path / "out", "--case", "c2")
    code, out, _ = call_cli(["diff", str(a / "summary.json"), str(b), "--json", *NO_WALL], capsys)
    document = json.loads(out)
    assert code == 1
    assert document["schema_version"] == 1 and document["differs"] is True
    assert document["run_a"]["run_id"] == a.name and document["run_b"]["suite"] == "diffdemo"
    assert document["cases_compared"] == 1
    assert (document["only_in_a"], document["only_in_b"]) == (["c1"], [])
    assert document["tools_changed"] == [{"id": "c2", "a": ["search"], "b": []}]
    assert document["status_changed"] == [] and document["output_changed"] == []
    assert document["thresholds"] == {"wall_pct": 50.0, "wall_ms": 1000000.0}
    assert document["notes"] == []


def test_cases_in_one_run_only_are_not_counted_as_differing(
    suite: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = run_once(suite, tmp_path / "out")
    b = run_once(suite, tmp_path / "out", "--case", "c2")  # c2 behaves exactly as in A
    code, out, _ = call_cli(["diff", str(a), str(b), *NO_WALL], capsys)
    assert code == 1  # the runs are not the same: c1 is missing from B
    assert "Only in A (1): c1" in out
    assert out.rstrip().endswith("No compared case differs (1 compared); 1 case in one run only.")
    code, out, _ = call_cli(["diff", str(a), str(b), "--json", *NO_WALL], capsys)
    document = json.loads(out)
    assert code == 1 and document["differs"] is True
    assert (document["cases_compared"], document["cases_differing"]) == (1, 0)
    assert (document["differing"], document["only_in_a"]) == ([], ["c1"])


def test_differing_counts_compared_cases_only(
    suite: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = run_once(suite, tmp_path / "out", "--case", "c1")
    behave(suite, c1={"tools": [], "output": PASSING["output"]}, c2=PASSING)
    b = run_once(suite, tmp_path / "out")
    code, out, _ = call_cli(["diff", str(a), str(b), *NO_WALL], capsys)
    assert code == 1 and "Only in B (1): c2" in out
    assert out.rstrip().endswith("1 case differs (1 compared); 1 case in one run only.")
    document = json.loads(call_cli(["diff", str(a), str(b), "--json", *NO_WALL], capsys)[1])
    assert (document["cases_differing"], document["differing"]) == (1, ["c1"])


def test_wall_time_change_needs_both_thresholds(
    suite: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = run_once(suite, tmp_path / "out")
    b = tmp_path / "b"
    shutil.copytree(a, b)
    summary = json.loads((b / "summary.json").read_text(encoding="utf-8"))
    walls = {"c1": 1000, "c2": 10}
    for case in summary["cases"]:
        original = case["wall_ms"]
        case["wall_ms"] = original + walls[case["id"]]
    (b / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    code, out, _ = call_cli(["diff", str(a), str(b), "--json"], capsys)
    changes = json.loads(out)["wall_changed"]
    assert code == 1
    assert [change["id"] for change in changes] == ["c1"]  # c2 moved 10 ms: noise
    assert changes[0]["delta_ms"] == 1000
    code, out, _ = call_cli(["diff", str(a), str(b)], capsys)
    assert "Wall time changed (1; over 50% and 50 ms):\n  c1: " in out
    assert call_cli(["diff", str(a), str(b), "--wall-threshold-ms", "5000"], capsys)[0] == 0


def test_a_summary_without_its_event_log_is_compared_on_status_only(
    suite: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = run_once(suite, tmp_path / "out")
    lone = tmp_path / "lone"
    lone.mkdir()
    shutil.copy(a / "summary.json", lone / "summary.json")
    behave(suite, c1={"tools": ["lookup"], "output": PASSING["output"]}, c2=PASSING)
    b = run_once(suite, tmp_path / "out")
    code, out, _ = call_cli(["diff", str(lone), str(b), *NO_WALL], capsys)
    assert code == 0
    assert "note: " in out and "has no run.jsonl" in out


def test_missing_run_is_invalid_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = call_cli(["diff", str(tmp_path / "nope"), str(tmp_path)], capsys)
    assert code == 2 and out == ""
    assert err.startswith("error: ") and "summary.json" in err and "Traceback" not in err


@pytest.mark.parametrize("side", ["a", "b"])
def test_a_missing_run_has_no_line_number(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], side: str
) -> None:
    existing = tmp_path / "run"
    existing.mkdir()
    (existing / "summary.json").write_text('{"cases": []}', encoding="utf-8")
    missing = tmp_path / "nonexistent"
    args = [str(missing), str(existing)] if side == "a" else [str(existing), str(missing)]
    code, out, err = call_cli(["diff", *args], capsys)
    assert (code, out) == (2, "")
    assert err == (
        f"error: {missing}: expected a run directory holding summary.json, or a summary.json "
        "file; found no such file\n"
    )


def test_corrupt_summary_names_the_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "summary.json").write_text('{"cases": [\n  oops\n]}', encoding="utf-8")
    code, _, err = call_cli(["diff", str(bad), str(bad)], capsys)
    assert code == 2
    assert f"{bad / 'summary.json'}:2: expected JSON" in err


@pytest.mark.parametrize("content", ["", "\n  \n"])
def test_an_empty_summary_has_no_line_number(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str
) -> None:
    summary = tmp_path / "summary.json"
    summary.write_text(content, encoding="utf-8")
    code, _, err = call_cli(["diff", str(tmp_path), str(tmp_path)], capsys)
    assert code == 2
    assert err == f"error: {summary}: expected a run summary (JSON), found an empty file\n"


@pytest.mark.parametrize(
    ("summary", "expected"),
    [
        ({"cases": "nope"}, "an object with a 'cases' list"),
        ({"cases": [{"status": "pass"}]}, "cases[0]: expected an object with a string 'id'"),
    ],
)
def test_summary_of_the_wrong_shape_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], summary: dict[str, Any], expected: str
) -> None:
    (tmp_path / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    code, _, err = call_cli(["diff", str(tmp_path), str(tmp_path)], capsys)
    assert code == 2 and expected in err


def test_corrupt_event_log_names_the_line(
    suite: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = run_once(suite, tmp_path / "out")
    with (a / "run.jsonl").open("a", encoding="utf-8") as stream:
        stream.write("\n[1, 2]\n")
    lines = (a / "run.jsonl").read_text(encoding="utf-8").splitlines()
    code, _, err = call_cli(["diff", str(a), str(a)], capsys)
    assert code == 2
    assert f"run.jsonl:{len(lines)}: expected a JSON object per line, found list" in err


def test_an_event_without_a_type_names_its_line(
    suite: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = run_once(suite, tmp_path / "out")
    events = a / "run.jsonl"
    events.write_text(events.read_text("utf-8").replace('"type"', '"tpye"', 1), "utf-8")
    code, _, err = call_cli(["diff", str(a), str(a)], capsys)
    assert code == 2
    assert f"{events}:1: expected an event with a string 'type'" in err


def test_an_empty_event_log_beside_a_summary_of_cases_is_invalid(
    suite: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = run_once(suite, tmp_path / "out")
    (a / "run.jsonl").write_text("", encoding="utf-8")
    code, _, err = call_cli(["diff", str(a), str(a)], capsys)
    assert code == 2
    assert err == (
        f"error: {a / 'run.jsonl'}: expected the events of 2 cases listed in summary.json, "
        "found an empty event log\n"
    )


def test_different_suites_are_noted(suite: Path, tmp_path: Path) -> None:
    a = load_run(run_once(suite, tmp_path / "out"))
    other = type(a)(label="other", run_id=None, suite_name="other", cases=a.cases, has_events=True)
    result = diff_runs(a, other, wall_threshold_ms=1e9)
    assert not result.differs
    assert result.notes == ["the runs are of different suites: 'diffdemo' and 'other'"]


def test_output_diff_is_bounded() -> None:
    old = pretty_output({f"k{i}": "x" * 500 for i in range(100)})
    new = pretty_output({f"k{i}": "y" * 500 for i in range(100)})
    lines = output_diff(old, new)
    assert len(lines) == OUTPUT_DIFF_MAX_LINES + 1
    assert lines[-1].startswith("... (") and lines[-1].endswith(" more diff lines)")
    assert all(len(line) <= OUTPUT_DIFF_LINE_MAX_CHARS for line in lines)


def test_missing_output_is_shown_as_such() -> None:
    lines = output_diff(None, pretty_output({"a": 1}))
    assert "-(no final output)" in lines and '+  "a": 1' in lines


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=20,
)


@given(json_values, json_values)
def test_outputs_differ_exactly_when_their_json_differs(old: Any, new: Any) -> None:
    lines = output_diff(pretty_output(old), pretty_output(new))
    same = json.dumps(old, sort_keys=True) == json.dumps(new, sort_keys=True)
    assert (lines == []) == same
    assert len(lines) <= OUTPUT_DIFF_MAX_LINES + 1


@given(
    st.floats(min_value=0, max_value=1e6),
    st.floats(min_value=0, max_value=1e6),
    st.floats(min_value=0, max_value=500),
    st.floats(min_value=0, max_value=1e4),
)
def test_wall_change_needs_the_absolute_and_the_relative_threshold(
    a_ms: float, b_ms: float, pct: float, ms: float
) -> None:
    change = WallChange("c", a_ms, b_ms)
    flagged = is_wall_change(change, pct, ms)
    if abs(b_ms - a_ms) < ms or a_ms == b_ms or (a_ms > 0 and abs(b_ms - a_ms) * 100 / a_ms <= pct):
        assert not flagged
    else:
        assert flagged
