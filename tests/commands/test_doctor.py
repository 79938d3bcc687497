"""``trialrun doctor``: one test per check, on a healthy suite and on a suite broken that way."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from builders import call_cli
from paths import BEHAVING_AGENT
from trialrun.cli import run_cli
from trialrun.commands.doctor import Check

AGENT = BEHAVING_AGENT
RECORDING = {"tool": "search_docs", "args": {"q": "reset password"}, "ok": True, "result": {}}
MARKER_AGENT = """\
import json, pathlib, sys
pathlib.Path(sys.argv[1]).write_text("started")
json.loads(sys.stdin.readline())
print(json.dumps({"type": "final_output", "output": {"category": "x", "reply": "y"}}), flush=True)
"""


def write_suite(
    root: Path, *, recordings: int = 1, agent: list[str] | None = None, git: bool = True
) -> Path:
    """A healthy suite in a git repository: agent, cassette, baseline and CI workflow."""
    suite = root / "suites" / "demo"
    (suite / "cases").mkdir(parents=True)
    (suite / "cassettes").mkdir()
    write_cassette(suite, [RECORDING] * recordings)
    command = agent or [sys.executable, str(AGENT)]
    (suite / "suite.yaml").write_text(
        "suite_name: demo\n"
        f"agent_command: {json.dumps(command)}\n"
        "mode: replay\ncases_path: cases\ntool_registry: [search_docs]\n"
        "baseline_path: baseline.json\nkill_grace_ms: 200\n",
        encoding="utf-8",
    )
    case = {"id": "a_ok", "input": {"ticket": "reset password"}, "cassette": "cassettes/t.jsonl"}
    (suite / "cases" / "a_ok.yaml").write_text(json.dumps(case), encoding="utf-8")
    write_baseline(suite, ["a_ok"])
    workflows = root / ".github" / "workflows"
    workflows.mkdir(parents=True)
    (workflows / "agents.yml").write_text(
        "jobs:\n  eval:\n    steps:\n      - run: trialrun run suites/demo --mode replay\n",
        encoding="utf-8",
    )
    if git:
        subprocess.run(["git", "init", "-q", str(root)], check=True)
    return suite


def write_cassette(suite: Path, recordings: list[dict[str, object]]) -> None:
    lines = "".join(json.dumps(recording) + "\n" for recording in recordings)
    (suite / "cassettes" / "t.jsonl").write_text(lines, encoding="utf-8")


def write_baseline(suite: Path, case_ids: list[str]) -> None:
    cases = [{"id": case_id, "status": "pass"} for case_id in case_ids]
    (suite / "baseline.json").write_text(json.dumps({"cases": cases}), encoding="utf-8")


@pytest.fixture
def suite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return write_suite(tmp_path)


def lines_of(lines: list[str], name: str) -> list[str]:
    return [line for line in lines if line.split(" ", 2)[1] == f"{name}:"]


def test_healthy_suite_passes_every_check(suite: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = call_cli(["doctor", str(suite)], capsys)
    lines = out.splitlines()
    assert code == 0
    assert all(line.startswith("ok ") for line in lines), lines
    names = {line.split(" ", 2)[1].rstrip(":") for line in lines}
    assert names == {
        "suite",
        "schemas",
        "agent",
        "cassette",
        "secrets",
        "baseline",
        "ci",
        "versions",
    }
    assert lines_of(lines, "ci") == ["ok ci: .github/workflows/agents.yml runs this suite"]
    assert lines_of(lines, "baseline") == [
        "ok baseline: suites/demo/baseline.json covers the suite's 1 case"
    ]


def test_versions_line_names_python_and_packages(
    suite: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out, _ = call_cli(["doctor", str(suite)], capsys)
    lines = out.splitlines()
    (versions,) = lines_of(lines, "versions")
    assert versions.startswith(f"ok versions: python {sys.version_info.major}.")
    assert "trialrun " in versions and "pydantic " in versions


@pytest.mark.parametrize("target", ["missing_dir", "empty_dir"])
def test_a_path_that_is_no_suite_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], target: str
) -> None:
    monkeypatch.chdir(tmp_path)
    if target == "empty_dir":
        (tmp_path / target).mkdir()
    code = run_cli(["doctor", target])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    assert "error:" in captured.err and target in captured.err


def test_suite_that_does_not_load_lists_every_config_error(
    suite: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (suite / "suite.yaml").read_text(encoding="utf-8")
    (suite / "suite.yaml").write_text(text + "tool_regsitry: []\n", encoding="utf-8")
    (suite / "cases" / "b.yaml").write_text("id: b\ncassette: x.jsonl\n", encoding="utf-8")
    code, out, _ = call_cli(["doctor", str(suite)], capsys)
    lines = out.splitlines()
    assert code == 2  # invalid input, as `trialrun run` would exit on this suite
    failures = lines_of(lines, "suite")
    assert len(failures) >= 2
    assert all(line.startswith("fail suite: ") for line in failures)
    assert any("suite.yaml:" in line and "tool_regsitry" in line for line in failures)
    assert any("b.yaml:" in line for line in failures)
    assert lines_of(lines, "versions"), "the versions line is shown even for a broken suite"


def test_a_deprecated_suite_key_is_a_warning_at_its_line(
    suite: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (suite / "suite.yaml").read_text(encoding="utf-8")
    (suite / "suite.yaml").write_text(text + "share_cpu: true\n", encoding="utf-8")
    code, out, _ = call_cli(["doctor", str(suite)], capsys)
    lines = out.splitlines()
    assert code == 0
    line = text.count("\n") + 1
    assert [row for row in lines_of(lines, "suite") if row.startswith("warn ")] == [
        f"warn suite: suites/demo/suite.yaml:{line}: 'share_cpu' is deprecated: has no effect "
        "(trialrun no longer changes which CPUs the agent runs on) and may be removed "
        "(remove the key)"
    ]


def test_agent_command_that_resolves_nowhere_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    suite = write_suite(tmp_path, agent=["no-such-agent-binary-xyz", "--serve"])
    code, out, _ = call_cli(["doctor", str(suite)], capsys)
    lines = out.splitlines()
    assert code == 1
    (agent,) = lines_of(lines, "agent")
    assert agent.startswith("fail agent: ")
    assert "'no-such-agent-binary-xyz' is not on PATH" in agent
    assert agent.endswith("(install it or set agent_command in suite.yaml to its full path)")


def test_an_agent_script_that_does_not_exist_fails_with_the_name_it_missed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "agent").mkdir()
    (tmp_path / "agent" / "agent.py").write_text("print()\n", encoding="utf-8")
    suite = write_suite(tmp_path, agent=["python3", "-u", "agent/agnet.py", "--serve"])
    code, out, _ = call_cli(["doctor", str(suite)], capsys)
    lines = out.splitlines()
    assert code == 1
    (agent,) = lines_of(lines, "agent")
    assert agent == (
        "fail agent: agent_command script 'agent/agnet.py' does not exist (looked in the suite "
        "directory suites/demo and in the directory the agent runs in, .) "
        "(did you mean 'agent/agent.py'?) "
        "(fix the path in agent_command in suite.yaml)"
    )


@pytest.mark.parametrize(
    "command",
    [
        ["python3", "-m", "no_such_module_but_not_a_file"],
        ["python3", "-c", "print(1)"],
        ["python3", "agent/agent.py"],
        ["bash", "-c", "exec python3 agent/agent.py"],
    ],
)
def test_an_agent_command_without_a_missing_script_is_ok(
    command: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "agent").mkdir()
    (tmp_path / "agent" / "agent.py").write_text("print()\n", encoding="utf-8")
    suite = write_suite(tmp_path, agent=command)
    _, out, _ = call_cli(["doctor", str(suite)], capsys)
    lines = out.splitlines()
    (agent,) = lines_of(lines, "agent")
    assert agent.startswith("ok agent: "), agent


def test_missing_cassette_fails(suite: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (suite / "cassettes" / "t.jsonl").unlink()
    code, out, _ = call_cli(["doctor", str(suite)], capsys)
    lines = out.splitlines()
    assert code == 1
    (cassette,) = lines_of(lines, "cassette")
    assert cassette.startswith("fail cassette: ") and "cassette file not found" in cassette


def test_corrupt_cassette_fails_naming_the_line(
    suite: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = json.dumps(RECORDING)
    (suite / "cassettes" / "t.jsonl").write_text(f"{good}\n{{not json\n", encoding="utf-8")
    code, out, _ = call_cli(["doctor", str(suite)], capsys)
    lines = out.splitlines()
    assert code == 1
    (cassette,) = lines_of(lines, "cassette")
    assert cassette.startswith("fail cassette: ") and "t.jsonl:2" in cassette


def test_recording_of_a_tool_outside_the_registry_warns(
    suite: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stray = {"tool": "delete_everything", "args": {}, "ok": True, "result": None}
    write_cassette(suite, [RECORDING, stray])
    code, out, _ = call_cli(["doctor", str(suite)], capsys)
    lines = out.splitlines()
    assert code == 0, "a warning never fails the doctor"
    (cassette,) = lines_of(lines, "cassette")
    assert cassette.startswith("warn cassette: suites/demo/cassettes/t.jsonl:2: ")
    assert "'delete_everything' is not in tool_registry" in cassette


def test_cassettes_are_not_read_outside_replay_mode(
    suite: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (suite / "suite.yaml").read_text(encoding="utf-8")
    (suite / "suite.yaml").write_text(text.replace("mode: replay", "mode: live"), encoding="utf-8")
    (suite / "cassettes" / "t.jsonl").unlink()
    code, out, _ = call_cli(["doctor", str(suite)], capsys)
    lines = out.splitlines()
    assert code == 0
    assert lines_of(lines, "cassettes") == ["ok cassettes: not read in live mode"]


def test_secret_in_a_cassette_fails_naming_file_and_line(
    suite: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    leaked = {**RECORDING, "result": {"api_key": "sk-live-1234567890abcdef"}}
    write_cassette(suite, [RECORDING, leaked])
    code, out, _ = call_cli(["doctor", str(suite)], capsys)
    lines = out.splitlines()
    assert code == 1
    (secret,) = lines_of(lines, "secrets")
    assert secret.startswith("fail secrets: suites/demo/cassettes/t.jsonl:2: ")
    assert "sk-live" not in "\n".join(lines), "the doctor must not print the secret it found"


def test_redacted_placeholder_is_not_a_secret(
    suite: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_cassette(suite, [{**RECORDING, "result": {"api_key": "[REDACTED]"}}])
    code, out, _ = call_cli(["doctor", str(suite)], capsys)
    lines = out.splitlines()
    assert code == 0
    assert lines_of(lines, "secrets") == ["ok secrets: redaction finds no secret in the cassettes"]


def test_missing_baseline_file_warns(suite: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (suite / "baseline.json").unlink()
    code, out, _ = call_cli(["doctor", str(suite)], capsys)
    lines = out.splitlines()
    assert code == 0
    assert lines_of(lines, "baseline") == [
        "warn baseline: suites/demo/baseline.json does not exist (run `trialrun baseline promote`)"
    ]


def test_baseline_with_missing_and_extra_cases_warns_for_each(
    suite: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_baseline(suite, ["old_case"])
    code, out, _ = call_cli(["doctor", str(suite)], capsys)
    lines = out.splitlines()
    assert code == 0
    missing, extra = lines_of(lines, "baseline")
    assert missing.startswith("warn baseline: ") and "no entry for case a_ok" in missing
    assert (
        extra.startswith("warn baseline: ")
        and "holds a case the suite no longer has: old_case" in extra
    )


def test_unreadable_baseline_fails(suite: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (suite / "baseline.json").write_text("{not json", encoding="utf-8")
    code, out, _ = call_cli(["doctor", str(suite)], capsys)
    lines = out.splitlines()
    assert code == 1
    (baseline,) = lines_of(lines, "baseline")
    assert baseline.startswith("fail baseline: ") and "invalid JSON" in baseline


def test_no_baseline_configured_warns(suite: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = (suite / "suite.yaml").read_text(encoding="utf-8")
    (suite / "suite.yaml").write_text(text.replace("baseline_path: baseline.json\n", ""))
    code, out, _ = call_cli(["doctor", str(suite)], capsys)
    lines = out.splitlines()
    assert code == 0
    (baseline,) = lines_of(lines, "baseline")
    assert baseline.startswith("warn baseline: no baseline_path in suite.yaml")


@pytest.mark.parametrize(
    "workflow",
    [None, "steps:\n  - run: trialrun run suites/other\n", "steps:\n  - run: pytest suites/demo\n"],
)
def test_no_workflow_running_this_suite_warns(
    suite: Path, capsys: pytest.CaptureFixture[str], workflow: str | None
) -> None:
    path = suite.parents[1] / ".github" / "workflows" / "agents.yml"
    if workflow is None:
        path.unlink()
    else:
        path.write_text(workflow, encoding="utf-8")
    code, out, _ = call_cli(["doctor", str(suite)], capsys)
    lines = out.splitlines()
    assert code == 0
    (ci,) = lines_of(lines, "ci")
    assert ci.startswith("warn ci: no workflow in .github/workflows runs `trialrun run` on ")
    assert "suites/demo" in ci


def test_workflow_in_the_working_directory_counts_without_a_repository(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    suite = write_suite(tmp_path, git=False)
    _, out, _ = call_cli(["doctor", str(suite)], capsys)
    lines = out.splitlines()
    assert lines_of(lines, "ci") == ["ok ci: .github/workflows/agents.yml runs this suite"]


def test_without_probe_the_agent_never_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "agent-started"
    script = tmp_path / "marker_agent.py"
    script.write_text(MARKER_AGENT, encoding="utf-8")
    suite = write_suite(tmp_path, agent=[sys.executable, str(script), str(marker)])
    code, out, _ = call_cli(["doctor", str(suite)], capsys)
    lines = out.splitlines()
    assert code == 0
    assert not marker.exists()
    assert not [line for line in lines if line.startswith("note: ")]
    # The same suite with --probe does start it: the marker proves the test can see a start.
    call_cli(["doctor", str(suite), "--probe"], capsys)
    assert marker.read_text(encoding="utf-8") == "started"


def test_probe_replays_the_first_case(suite: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = call_cli(["doctor", str(suite), "--probe"], capsys)
    lines = out.splitlines()
    assert code == 0
    assert lines_of(lines, "probe") == [
        "ok probe: case a_ok passed in replay with 1 tool call",
        "ok probe: every recording of the cassette was used",
    ]
    assert lines[-1].startswith("note: replay answered tool calls from the cassette")


def test_probe_of_a_gateway_suite_says_model_calls_were_answered_from_recordings(
    suite: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (suite / "suite.yaml").read_text(encoding="utf-8")
    (suite / "suite.yaml").write_text(text + "model_gateway: {}\n", encoding="utf-8")
    header = {"format": "trialrun-model-cassette", "schema_version": 1}
    (suite / "cassettes" / "t.model.jsonl").write_text(json.dumps(header) + "\n")
    code, out, _ = call_cli(["doctor", str(suite), "--probe"], capsys)
    lines = out.splitlines()
    assert code == 0, lines
    note = lines[-1]
    assert note.startswith("note: replay answered tool calls from the cassette, ")
    assert "model calls from the gateway's recordings" in note
    assert "does not isolate model" not in note


def test_probe_of_an_open_network_suite_says_what_is_not_isolated(
    suite: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (suite / "suite.yaml").read_text(encoding="utf-8")
    (suite / "suite.yaml").write_text(text + "network: open\n", encoding="utf-8")
    code, out, _ = call_cli(["doctor", str(suite), "--probe"], capsys)
    lines = out.splitlines()
    assert code == 0, lines
    assert "model calls" not in lines[-1]
    assert lines[-1].endswith(
        "network: open: a connection that ignores the proxy variables is not isolated."
    )


def test_probe_reports_unused_recordings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    suite = write_suite(tmp_path, recordings=3)
    code, out, _ = call_cli(["doctor", str(suite), "--probe"], capsys)
    lines = out.splitlines()
    assert code == 0
    unused = lines_of(lines, "probe")[1]
    assert unused.startswith("warn probe: 2 recordings of suites/demo/cassettes/t.jsonl")


def test_probe_of_a_failing_case_fails(suite: Path, capsys: pytest.CaptureFixture[str]) -> None:
    case = {
        "id": "a_ok",
        "input": {"behaviour": "crash", "ticket": "reset password"},
        "cassette": "cassettes/t.jsonl",
    }
    (suite / "cases" / "a_ok.yaml").write_text(json.dumps(case), encoding="utf-8")
    code, out, _ = call_cli(["doctor", str(suite), "--probe"], capsys)
    lines = out.splitlines()
    assert code == 1
    status = lines_of(lines, "probe")[0]
    assert status.startswith("fail probe: case a_ok error in replay with 0 tool calls: ")
    assert lines[-1].startswith("note: replay answered tool calls from the cassette")


def test_probe_is_skipped_when_the_suite_does_not_load(
    suite: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (suite / "suite.yaml").write_text("suite_name: demo\n", encoding="utf-8")
    code, out, _ = call_cli(["doctor", str(suite), "--probe"], capsys)
    lines = out.splitlines()
    assert code == 2
    assert not lines_of(lines, "probe")


_TEXT = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=30)


@given(level=st.sampled_from(["ok", "warn", "fail"]), name=_TEXT, what=_TEXT, fix=_TEXT)
def test_check_line_format(level: str, name: str, what: str, fix: str) -> None:
    check = Check(level, name, what, fix)  # type: ignore[arg-type]
    assert check.line() == f"{level} {name}: {what} ({fix})"
    assert Check(level, name, what).line() == f"{level} {name}: {what}"  # type: ignore[arg-type]
