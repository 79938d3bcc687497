"""Unused MCP and model recordings are reported like the tool cassette's, in every view.

One small agent uses all three kinds of recording a suite replays: a protocol tool call (tool
cassette), a raw JSON-RPC ``tools/call`` through the stdio MCP proxy it is handed, and a chat
completion through the model gateway. Each recording file holds one recording more than the
agent asks for; the run must name all three, keep the case passing, and carry the names into
summary.json, report.html, the GitHub step summary, ``merge`` and ``doctor --probe``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from builders import RESET_CHAT, chat_recording, run_trialrun
from trialrun.gateway.cassette import write_cassette
from trialrun.mcp_proxy.cassette import CallRecord, ExchangeRecord
from trialrun.mcp_proxy.cassette import write_cassette as write_mcp_cassette

XSS_TOOL = "fetch<script>alert(1)</script>"
CHAT = RESET_CHAT

AGENT = r"""
import json, os, subprocess, sys, urllib.request

def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()

task = json.loads(sys.stdin.readline())
send({"type": "tool_call", "name": "lookup", "call_id": "c1", "args": {"id": 1}})
looked_up = json.loads(sys.stdin.readline())["result"]

server = json.loads(os.environ["TRIALRUN_MCP_SERVERS"])["mcpServers"]["docs"]
proxy = subprocess.Popen(
    [server["command"], *server["args"]], stdin=subprocess.PIPE, stdout=subprocess.PIPE
)
request = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
           "params": {"name": "search_docs", "arguments": {"q": "reset password"}}}
proxy.stdin.write((json.dumps(request) + "\n").encode())
proxy.stdin.flush()
found = json.loads(proxy.stdout.readline())["result"]["content"][0]["text"]
proxy.stdin.close()
proxy.wait(timeout=120)

body = json.dumps({"model": "gpt-4o-mini", "messages": CHAT}).encode()
http = urllib.request.Request(
    os.environ["OPENAI_BASE_URL"] + "/chat/completions",
    data=body,
    headers={"Content-Type": "application/json", "Authorization": "Bearer sk-replay"},
)
with urllib.request.urlopen(http, timeout=120) as response:
    answer = json.loads(response.read())["choices"][0]["message"]["content"]
send({"type": "final_output", "output": {"lookup": looked_up, "docs": found, "reply": answer}})
""".replace("CHAT", json.dumps(CHAT))


def mcp_call(tool: str, q: str) -> CallRecord:
    result = {"content": [{"type": "text", "text": f"docs for {q}"}], "isError": False}
    return CallRecord(tool, {"q": q}, True, result, None)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    suite = tmp_path / "evals" / "unused"
    (suite / "cases").mkdir(parents=True)
    (suite / "cassettes").mkdir()
    (suite / "agent.py").write_text(AGENT, encoding="utf-8")
    (suite / "suite.yaml").write_text(
        "suite_name: unused\n"
        f"agent_command: {json.dumps([sys.executable, 'agent.py'])}\n"
        "mode: replay\ncases_path: cases\ntool_registry: [lookup]\n"
        "mcp_servers:\n  docs:\n    command: [python3, absent_server.py]\n"
        "model_gateway: {}\n",
        encoding="utf-8",
    )
    case = {"id": "t1", "input": {"ticket": "reset password"}, "cassette": "cassettes/t1.jsonl"}
    (suite / "cases" / "t1.yaml").write_text(json.dumps(case), encoding="utf-8")
    lookups = [
        {"tool": "lookup", "args": {"id": n}, "ok": True, "result": {"n": n}, "error": None}
        for n in (1, 2)
    ]
    (suite / "cassettes" / "t1.jsonl").write_text(
        "".join(json.dumps(line) + "\n" for line in lookups), encoding="utf-8"
    )
    discover = {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}}
    write_mcp_cassette(
        suite / "cassettes" / "t1.mcp-docs.jsonl",
        None,
        [
            ExchangeRecord("server/discover", {}, result=discover),
            mcp_call("search_docs", "reset password"),
            mcp_call(XSS_TOOL, "billing"),
        ],
    )
    write_cassette(
        suite / "cassettes" / "t1.model.jsonl",
        [chat_recording("gpt-4o-mini", "Use the reset link."), chat_recording("gpt-4o", "x")],
    )
    return tmp_path


def trialrun(project: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return run_trialrun(*args, cwd=project, env=env)


def only_run(out: Path) -> Path:
    [run_dir] = (out / "unused").iterdir()
    return run_dir


def case_summary(run_dir: Path) -> dict[str, Any]:
    [case] = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))["cases"]
    assert isinstance(case, dict)
    return case


EXPECTED_BY_TOOL = {"lookup": 1, f"mcp:docs/{XSS_TOOL}": 1, "model:gpt-4o": 1}


def test_every_kind_of_unused_recording_is_named_and_none_fails_the_case(project: Path) -> None:
    step_summary = project / "step-summary.md"
    done = trialrun(
        project, "run", "evals/unused", "--no-baseline", GITHUB_STEP_SUMMARY=str(step_summary)
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    start = lines.index("Unused recordings (they do not fail a case):")
    assert lines[start + 1] == f"  t1: 3 (lookup, mcp:docs/{XSS_TOOL}, model:gpt-4o)"

    run_dir = only_run(project / "trialrun_out")
    case = case_summary(run_dir)
    assert case["status"] == "pass"
    assert case["unused_recordings"] == 3
    assert case["unused_recordings_by_tool"] == EXPECTED_BY_TOOL

    page = (run_dir / "report.html").read_text(encoding="utf-8")
    assert "mcp:docs/fetch&lt;script&gt;alert(1)&lt;/script&gt;, model:gpt-4o" in page
    assert "<script>alert(1)" not in page

    markdown = step_summary.read_text(encoding="utf-8")
    [unused_line] = [line for line in markdown.splitlines() if "Unused recordings" in line]
    assert "t1: 3 (lookup, mcp:docs/fetch&lt;script&gt;alert(1)&lt;/script&gt;" in unused_line
    assert "model:gpt-4o)" in unused_line


def test_merge_reads_the_mcp_and_model_names_back(project: Path) -> None:
    shards = project / "shards"
    done = trialrun(
        project, "run", "evals/unused", "--no-baseline", "--shard", "1/1", "--out", str(shards)
    )
    assert done.returncode == 0, done.stdout + done.stderr
    merged = project / "merged"
    done = trialrun(project, "merge", str(only_run(shards)), "--out", str(merged))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"  t1: 3 (lookup, mcp:docs/{XSS_TOOL}, model:gpt-4o)" in done.stdout.splitlines()
    assert case_summary(only_run(merged))["unused_recordings_by_tool"] == EXPECTED_BY_TOOL


def test_doctor_probe_names_the_file_of_each_unused_recording(project: Path) -> None:
    done = trialrun(project, "doctor", "evals/unused", "--probe")
    assert done.returncode == 0, done.stdout + done.stderr
    probe = [line for line in done.stdout.splitlines() if line.startswith("warn probe:")]
    assert [line.split(" (re-record")[0] for line in probe] == [
        "warn probe: 1 recording of evals/unused/cassettes/t1.jsonl was not used (lookup)",
        "warn probe: 1 recording of evals/unused/cassettes/t1.mcp-docs.jsonl was not used "
        f"(mcp:docs/{XSS_TOOL})",
        "warn probe: 1 recording of evals/unused/cassettes/t1.model.jsonl was not used "
        "(model:gpt-4o)",
    ]
