"""Suites with ``mcp_servers:``: the runner hands the agent proxies, merges their calls, gates."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from builders import run_trialrun

pytest.importorskip("mcp")

VENV_BIN = str(Path(sys.executable).parent)


def trialrun(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # The template's agent runs with the python3 on PATH: ours, which has the mcp package.
    path = VENV_BIN + os.pathsep + os.environ.get("PATH", "")
    return run_trialrun(*args, cwd=project, env={"PATH": path})


def last_run(project: Path) -> Path:
    runs = sorted((project / "trialrun_out" / "mcp").iterdir())
    return runs[-1]


def trace(run_dir: Path) -> list[dict[str, object]]:
    lines = (run_dir / "run.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def tool_sequence(run_dir: Path) -> list[tuple[object, object]]:
    return [(e["name"], e["args"]) for e in trace(run_dir) if e["type"] == "tool_call"]


def final_output(run_dir: Path) -> object:
    [output] = [e["output"] for e in trace(run_dir) if e["type"] == "final_output"]
    return output


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("mcp-project")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    done = trialrun(root, "init", "--template", "mcp", "--path", "evals")
    assert done.returncode == 0, done.stdout + done.stderr
    return root


def test_the_bundled_recording_replays_offline_and_mcp_calls_join_the_trace(
    project: Path,
) -> None:
    done = trialrun(project, "run", "evals/mcp", "--baseline", "evals/baselines/mcp.json")
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = last_run(project)
    assert tool_sequence(run_dir) == [("search_docs", {"q": "reset password"})]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["cases"][0]["tool_calls"] == 1
    receipt = [json.loads(line) for line in (run_dir / "receipt.jsonl").read_text().splitlines()]
    assert [e["data"]["name"] for e in receipt if e["type"] == "tool_call"] == ["search_docs"]
    # report.html's timeline places the MCP call from its proxy's timestamp, within the case.
    page = (run_dir / "report.html").read_text(encoding="utf-8")
    [start] = re.findall(r'data-start-ms="([0-9.]+)"', page)
    assert 0 < float(start) <= summary["cases"][0]["wall_ms"]
    assert "start times were not recorded" not in page


def test_record_then_replay_with_the_server_absent_gives_the_same_run(project: Path) -> None:
    suite = project / "evals" / "mcp"
    cassette = suite / "cassettes" / "t1.mcp-docs.jsonl"
    cassette.unlink()
    recorded = trialrun(project, "run", "evals/mcp", "--mode", "record", "--no-baseline")
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    record_run = last_run(project)
    assert cassette.is_file()
    assert not list((suite / "cassettes").glob(".*tmp")), "no temporary file left behind"
    header = json.loads(cassette.read_text().splitlines()[0])
    # The header names the command as the suite declares it, not this checkout's paths.
    assert header["upstream"] == ["python3", "server/docs_server.py"]

    server = suite / "server" / "docs_server.py"
    server.rename(server.with_suffix(".gone"))  # replay must not need the server at all
    try:
        replayed = trialrun(project, "run", "evals/mcp", "--no-baseline")
    finally:
        server.with_suffix(".gone").rename(server)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    replay_run = last_run(project)
    assert tool_sequence(replay_run) == tool_sequence(record_run)
    assert final_output(replay_run) == final_output(record_run)


def test_a_call_that_was_never_recorded_fails_as_a_cassette_mismatch(project: Path) -> None:
    case_file = project / "evals" / "mcp" / "cases" / "t1.yaml"
    original = case_file.read_text()
    case_file.write_text(original.replace("ticket: reset password", "ticket: billing"))
    try:
        done = trialrun(project, "run", "evals/mcp", "--no-baseline")
    finally:
        case_file.write_text(original)
    assert done.returncode == 1, done.stdout + done.stderr
    summary = json.loads((last_run(project) / "summary.json").read_text())
    [case] = summary["cases"]
    assert case["failure_kind"] == "cassette_mismatch"
    assert "cassette mismatch" in case["failure_reason"]
    assert "docs" in case["failure_reason"]


def test_a_missing_mcp_recording_fails_the_case_before_the_agent_starts(project: Path) -> None:
    cassette = project / "evals" / "mcp" / "cassettes" / "t1.mcp-docs.jsonl"
    saved = cassette.read_bytes()
    cassette.unlink()
    try:
        done = trialrun(project, "run", "evals/mcp", "--no-baseline")
    finally:
        cassette.write_bytes(saved)
    assert done.returncode == 1, done.stdout + done.stderr
    [case] = json.loads((last_run(project) / "summary.json").read_text())["cases"]
    assert case["failure_kind"] == "cassette_error"
    assert "MCP cassette for server 'docs' not found" in case["failure_reason"]


def test_doctor_checks_the_mcp_recordings_a_replay_needs(project: Path) -> None:
    done = trialrun(project, "doctor", "evals/mcp")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ok recordings: 1 MCP/model recording exists and parses" in done.stdout
    cassette = project / "evals" / "mcp" / "cassettes" / "t1.mcp-docs.jsonl"
    saved = cassette.read_bytes()
    cassette.write_text('{"kind": "header"}\nnot json\n')
    try:
        done = trialrun(project, "doctor", "evals/mcp")
    finally:
        cassette.write_bytes(saved)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "fail recordings:" in done.stdout
    assert "t1.mcp-docs.jsonl:" in done.stdout


def test_an_http_transport_server_is_served_by_the_runner_per_case(project: Path) -> None:
    suite = project / "evals" / "mcp"
    original = (suite / "suite.yaml").read_text()
    http_suite = original.replace(
        "    command: [python3, server/docs_server.py]\n",
        "    command: [python3, server/docs_server.py]\n    transport: http\n",
    )
    cassette = suite / "cassettes" / "t1.mcp-docs.jsonl"
    saved = cassette.read_bytes()
    (suite / "suite.yaml").write_text(http_suite)
    try:
        cassette.unlink()
        recorded = trialrun(project, "run", "evals/mcp", "--mode", "record", "--no-baseline")
        assert recorded.returncode == 0, recorded.stdout + recorded.stderr
        record_run = last_run(project)
        assert cassette.is_file()
        replayed = trialrun(project, "run", "evals/mcp", "--no-baseline", "-j", "2")
        assert replayed.returncode == 0, replayed.stdout + replayed.stderr
        replay_run = last_run(project)
        mcp_config = [e for e in trace(replay_run) if e["type"] == "tool_call"]
        assert mcp_config and mcp_config[0]["mcp_server"] == "docs"
        assert tool_sequence(replay_run) == tool_sequence(record_run)
        assert final_output(replay_run) == final_output(record_run)
    finally:
        (suite / "suite.yaml").write_text(original)
        cassette.write_bytes(saved)


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_mcp_recordings_no_call_used_are_reported_and_do_not_fail_the_case(
    project: Path, transport: str
) -> None:
    suite = project / "evals" / "mcp"
    original = (suite / "suite.yaml").read_text()
    cassette = suite / "cassettes" / "t1.mcp-docs.jsonl"
    saved = cassette.read_text()
    lines = saved.splitlines()
    [call] = [json.loads(line) for line in lines if '"tool"' in line]
    stale = [{**call, "args": {"q": "billing"}}, {**call, "tool": "fetch_page", "args": {}}]
    cassette.write_text("\n".join([*lines, *(json.dumps(s) for s in stale)]) + "\n")
    if transport == "http":
        declared = "    command: [python3, server/docs_server.py]\n"
        (suite / "suite.yaml").write_text(
            original.replace(declared, declared + "    transport: http\n")
        )
    try:
        done = trialrun(project, "run", "evals/mcp", "--no-baseline")
    finally:
        cassette.write_text(saved)
        (suite / "suite.yaml").write_text(original)
    assert done.returncode == 0, done.stdout + done.stderr
    output = done.stdout.splitlines()
    start = output.index("Unused recordings (they do not fail a case):")
    assert output[start + 1] == "  t1: 2 (mcp:docs/search_docs, mcp:docs/fetch_page)"
    [case] = json.loads((last_run(project) / "summary.json").read_text())["cases"]
    assert (case["status"], case["unused_recordings"]) == ("pass", 2)
    assert case["unused_recordings_by_tool"] == {
        "mcp:docs/search_docs": 1,
        "mcp:docs/fetch_page": 1,
    }


def test_a_server_that_cannot_start_in_record_mode_is_named_in_the_failure(
    project: Path,
) -> None:
    suite = project / "evals" / "mcp"
    broken = project / "evals" / "mcp-broken"
    shutil.copytree(suite, broken)
    text = (broken / "suite.yaml").read_text(encoding="utf-8")
    assert "server/docs_server.py" in text
    (broken / "suite.yaml").write_text(text.replace("server/docs_server.py", "server/dcos.py"))
    committed = (broken / "cassettes" / "t1.mcp-docs.jsonl").read_bytes()

    done = trialrun(project, "run", "evals/mcp-broken", "--mode", "record", "--no-baseline")
    assert done.returncode == 1, done.stdout + done.stderr
    [case] = json.loads((last_run(project) / "summary.json").read_text())["cases"]
    # The agent's MCP client buries the server's own line under its traceback; the failure
    # reason keeps it, wherever the stderr tail is cut.
    reason = case["failure_reason"]
    assert "MCP server 'docs' did not start: exited with code 2 before answering" in reason
    assert "server/dcos.py" in reason and "No such file or directory" in reason
    assert "MCP server 'docs' did not start" in done.stdout
    assert (broken / "cassettes" / "t1.mcp-docs.jsonl").read_bytes() == committed
