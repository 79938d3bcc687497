"""Files a suite points at are checked before any agent starts: every problem at once, exit 2."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from builders import call_cli
from paths import BEHAVING_AGENT
from trialrun.config import load_suite
from trialrun.errors import ConfigErrors
from trialrun.running.preflight import MAX_PROBLEMS_PER_FILE, preflight
from trialrun.running.runner import RunOptions, run_case

AGENT = BEHAVING_AGENT
GOOD = {"tool": "search_docs", "args": {"q": "reset password"}, "ok": True, "result": {"hits": []}}
# Writes a marker when started: proves that no agent ran when loading refused the suite.
MARKER_AGENT = "open('agent-started', 'w').close()"


def write_suite(
    root: Path, cases: int = 1, *, extra: str = "", agent: list[str] | None = None
) -> Path:
    suite = root / "suite"
    (suite / "cases").mkdir(parents=True)
    (suite / "cassettes").mkdir()
    command = agent or [sys.executable, "-c", MARKER_AGENT]
    (suite / "suite.yaml").write_text(
        f"suite_name: s\nagent_command: {json.dumps(command)}\nmode: replay\n"
        f"cases_path: cases\ntool_registry: [search_docs]\n{extra}",
        encoding="utf-8",
    )
    for number in range(1, cases + 1):
        case = {"id": f"t{number}", "input": {"ticket": "reset password"}}
        case["cassette"] = f"cassettes/t{number}.jsonl"
        (suite / "cases" / f"t{number}.yaml").write_text(json.dumps(case), encoding="utf-8")
        write_lines(suite / "cassettes" / f"t{number}.jsonl", [GOOD])
    return suite


def write_lines(path: Path, lines: list[Any]) -> None:
    text = "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)
    path.write_text(text, encoding="utf-8")


def test_every_problem_of_every_cassette_is_reported_before_any_agent_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = write_suite(tmp_path, cases=2)
    write_lines(
        suite / "cassettes/t1.jsonl",
        [GOOD, "not json", "[1, 2]", {"tool": 3, "args": {}, "ok": True}, {"args": [], "ok": "y"}],
    )
    (suite / "cassettes/t2.jsonl").write_bytes(json.dumps(GOOD).encode() + b"\n\x89PNG\xff\x00\n")
    monkeypatch.chdir(tmp_path)
    code, out, err = call_cli(["run", "suite", "--no-baseline"], capsys)
    assert code == 2
    assert err.splitlines() == [
        "error: suite/cassettes/t1.jsonl:2: invalid JSON: Expecting value at column 1",
        "error: suite/cassettes/t1.jsonl:3: expected a JSON object per line, found an array",
        "error: suite/cassettes/t1.jsonl:4: 'tool' must be a string, found a number",
        "error: suite/cassettes/t1.jsonl:5: entry is missing required key 'tool' (expected a "
        "string); 'args' must be an object, found an array; 'ok' must be true or false, "
        "found a string",
        "error: suite/cassettes/t2.jsonl:2: expected UTF-8 text, found byte 0x89 that is not "
        "valid UTF-8",
    ]
    assert out == ""
    assert not (tmp_path / "agent-started").exists()
    assert not (tmp_path / "trialrun_out").exists()


def test_doctor_reports_the_same_problems(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = write_suite(tmp_path)
    write_lines(suite / "cassettes/t1.jsonl", ["{", GOOD, "7"])
    monkeypatch.chdir(tmp_path)
    code, out, _ = call_cli(["doctor", "suite"], capsys)
    assert code == 1
    failing = [line for line in out.splitlines() if line.startswith("fail cassette: ")]
    assert [line.split(" (record it")[0] for line in failing] == [
        "fail cassette: suite/cassettes/t1.jsonl:1: invalid JSON: Expecting property name "
        "enclosed in double quotes at column 2",
        "fail cassette: suite/cassettes/t1.jsonl:3: expected a JSON object per line, found a "
        "number",
    ]


def test_a_binary_file_reports_its_first_problems_and_how_many_more(tmp_path: Path) -> None:
    suite = write_suite(tmp_path)
    garbage = b"\n".join(bytes([0xFF, n]) for n in range(MAX_PROBLEMS_PER_FILE + 5))
    (suite / "cassettes/t1.jsonl").write_bytes(garbage)
    with pytest.raises(ConfigErrors) as caught:
        preflight(load_suite(suite), "replay")
    lines = str(caught.value).splitlines()
    assert len(lines) == MAX_PROBLEMS_PER_FILE + 1
    assert lines[-1].endswith(
        f"t1.jsonl:{MAX_PROBLEMS_PER_FILE}: 5 more problems after this line not shown"
    )


def test_an_empty_cassette_loads_and_a_missing_one_is_left_to_its_case(tmp_path: Path) -> None:
    suite_dir = write_suite(tmp_path, cases=2)
    (suite_dir / "cassettes/t1.jsonl").write_text("", encoding="utf-8")
    (suite_dir / "cassettes/t2.jsonl").unlink()
    suite = load_suite(suite_dir)
    checked = preflight(suite, "replay")
    assert [len(c.entries) for c in checked.cassettes.values()] == [0]
    # As in RunLedger: the case errors with cassette_error, the others still run.
    result = asyncio.run(run_case(suite, suite.cases[1], RunOptions("replay", preflight=checked)))
    assert (result.status, result.failure and result.failure.kind) == ("error", "cassette_error")
    assert result.failure is not None and "cassette file not found" in result.failure.message


def test_record_mode_does_not_read_the_cassettes_it_replaces(tmp_path: Path) -> None:
    suite = write_suite(tmp_path)
    (suite / "cassettes/t1.jsonl").write_bytes(b"\xff\xfe garbage")
    checked = preflight(load_suite(suite), "record")
    assert checked.cassettes == {} and checked.tools is not None


def test_the_run_replays_the_cassette_parsed_at_load(tmp_path: Path) -> None:
    suite = load_suite(write_suite(tmp_path, agent=[sys.executable, str(AGENT)]))
    checked = preflight(suite, "replay")
    # Reading the file again would fail now: the run must use what the check parsed.
    suite.cases[0].cassette_path.unlink()
    result = asyncio.run(run_case(suite, suite.cases[0], RunOptions("replay", preflight=checked)))
    assert result.status == "pass", result.failure
    assert [call.name for call in result.run.tool_calls] == ["search_docs"]


def test_cases_sharing_a_cassette_each_get_every_recording(tmp_path: Path) -> None:
    suite_dir = write_suite(tmp_path, cases=2, agent=[sys.executable, str(AGENT)])
    for number in (1, 2):
        case_file = suite_dir / "cases" / f"t{number}.yaml"
        case = json.loads(case_file.read_text(encoding="utf-8"))
        case_file.write_text(json.dumps({**case, "cassette": "cassettes/t1.jsonl"}), "utf-8")
    suite = load_suite(suite_dir)
    checked = preflight(suite, "replay")
    options = RunOptions("replay", preflight=checked)
    results = [asyncio.run(run_case(suite, case, options)) for case in suite.cases]
    assert [r.status for r in results] == ["pass", "pass"]


def test_mcp_and_model_recordings_are_checked_at_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    extra = "mcp_servers: {docs: {command: [server]}}\nmodel_gateway: {}\n"
    suite = write_suite(tmp_path, cases=2, extra=extra)
    write_lines(suite / "cassettes/t1.mcp-docs.jsonl", ["nope", {"tool": "a"}])
    write_lines(suite / "cassettes/t1.model.jsonl", [{"format": "other"}])
    # t2 has no MCP or model recording: its case fails when it runs, as a missing cassette does.
    monkeypatch.chdir(tmp_path)
    code, _, err = call_cli(["run", "suite", "--no-baseline"], capsys)
    assert code == 2
    assert err.splitlines() == [
        "error: suite/cassettes/t1.mcp-docs.jsonl:1: invalid JSON: Expecting value at column 1",
        "error: suite/cassettes/t1.mcp-docs.jsonl:2: missing required key 'args' (expected an "
        "object)",
        'error: suite/cassettes/t1.model.jsonl:1: expected the header line {"format": '
        '"trialrun-model-cassette", "schema_version": 1}',
    ]
    assert not (tmp_path / "agent-started").exists()


@pytest.mark.parametrize(
    ("module", "expected"),
    [
        ("missing_tools", "suite/suite.yaml:6: tool_module 'missing_tools' not found"),
        ("broken_tools", "suite/suite.yaml:6: tool_module 'broken_tools' raised ZeroDivisionError"),
        ("other_tools", "suite/suite.yaml:5: Tools not found in registry: lookup_order"),
    ],
)
def test_a_tool_module_that_cannot_serve_the_registry_is_a_load_error(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    module: str,
    expected: str,
) -> None:
    suite = write_suite(tmp_path, extra=f"tool_module: {module}\n")
    yaml = (suite / "suite.yaml").read_text(encoding="utf-8")
    (suite / "suite.yaml").write_text(
        yaml.replace("[search_docs]", "[search_docs, lookup_order]"), encoding="utf-8"
    )
    (suite / "broken_tools.py").write_text("1 / 0\n", encoding="utf-8")
    (suite / "other_tools.py").write_text("TOOLS = {}\n", encoding="utf-8")
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.chdir(tmp_path)
    code, _, err = call_cli(["run", "suite", "--mode", "live"], capsys)
    assert code == 2
    [line] = err.splitlines()
    assert line.startswith(f"error: {expected}")
    assert not (tmp_path / "agent-started").exists()


def test_a_bad_baseline_and_a_bad_cassette_are_reported_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = write_suite(tmp_path)
    write_lines(suite / "cassettes/t1.jsonl", ["oops"])
    (tmp_path / "base.json").write_text("{not json", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    code, _, err = call_cli(["run", "suite", "--baseline", "base.json"], capsys)
    assert code == 2
    lines = err.splitlines()
    assert lines[0].startswith("error: suite/cassettes/t1.jsonl:1: invalid JSON")
    assert lines[1].startswith("error: base.json:1: invalid JSON")
    assert len(lines) == 2


def test_a_bad_price_table_is_a_load_error_and_no_run_directory_is_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = write_suite(tmp_path, extra="model_gateway: {prices: prices.yaml}\n")
    (suite / "prices.yaml").write_text("gpt-x: {input_per_mtok: cheap}\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    code, _, err = call_cli(["run", "suite", "--mode", "record"], capsys)
    assert code == 2
    assert err.splitlines() == [
        "error: suite/prices.yaml:1: prices of 'gpt-x': 'input_per_mtok' must be a number, "
        "found string 'cheap'",
        "error: suite/prices.yaml:1: missing required key 'output_per_mtok' in prices of 'gpt-x'",
    ]
    assert not (tmp_path / "trialrun_out").exists()
    monkeypatch.chdir(tmp_path)
    code, out, _ = call_cli(["doctor", "suite"], capsys)
    assert "fail prices: suite/prices.yaml:1: missing required key 'output_per_mtok'" in out


@pytest.mark.parametrize("how", ["option", "suite"])
def test_a_baseline_that_is_a_directory_is_a_load_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    suite = write_suite(tmp_path, extra="baseline_path: baselines\n" if how == "suite" else "")
    (suite / "baselines").mkdir()
    extra = ["--baseline", "suite/baselines"] if how == "option" else []
    monkeypatch.chdir(tmp_path)
    code, _, err = call_cli(["run", "suite", *extra], capsys)
    assert code == 2
    assert err.endswith("baselines: expected a baseline file, found a directory\n")
    assert not (tmp_path / "agent-started").exists()
