"""Record mode through the CLI: real tools from the suite's tool_module, redaction, crash safety."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from builders import write_suite
from paths import BEHAVING_AGENT

AGENT = BEHAVING_AGENT
TOOLS = """
def search_docs(args):
    key = "sk-proj-" + "abcdefghijklmnopqrstuvwxyz012345"
    return {"hits": [{"title": "Reset", "q": args["q"]}], "api_key": key}

TOOLS = {"search_docs": search_docs}
"""


def make_suite(root: Path, behaviour: str) -> Path:
    case = {
        "input": {"behaviour": behaviour, "ticket": "reset password"},
        "cassette": "cassettes/t1.jsonl",
    }
    return write_suite(
        root,
        name="rec",
        agent=[sys.executable, AGENT],
        tools=["search_docs"],
        mode="record",
        cases={"t1": case},
        cassettes={},
        files={"my_tools.py": TOOLS},
        settings="tool_module: my_tools\n",
        git=True,
    )


def run(suite: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "trialrun",
            "run",
            str(suite),
            "--out",
            str(suite.parent / "out"),
            *extra,
        ],
        cwd=suite.parent,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_record_writes_a_redacted_cassette_that_then_replays(tmp_path: Path) -> None:
    suite = make_suite(tmp_path, "ok")
    proc = run(suite)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    cassette = (suite / "cassettes/t1.jsonl").read_text(encoding="utf-8")
    (entry,) = [json.loads(line) for line in cassette.splitlines()]
    assert entry["tool"] == "search_docs" and entry["args"] == {"q": "reset password"}
    assert entry["result"]["hits"][0]["q"] == "reset password"
    assert "sk-proj-" not in cassette and entry["result"]["api_key"] == "[REDACTED]"
    assert not list((suite / "cassettes").glob(".*tmp"))

    proc = run(suite, "--mode", "replay")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_crashing_agent_never_destroys_the_recorded_cassette(tmp_path: Path) -> None:
    suite = make_suite(tmp_path, "ok")
    assert run(suite).returncode == 0
    good = (suite / "cassettes/t1.jsonl").read_bytes()
    case = suite / "cases/t1.yaml"
    case.write_text(case.read_text().replace('"ok"', '"crash"'), encoding="utf-8")
    proc = run(suite)
    assert proc.returncode == 1
    assert (suite / "cassettes/t1.jsonl").read_bytes() == good
    assert not list((suite / "cassettes").glob(".*tmp"))


def test_live_mode_runs_tools_and_writes_nothing(tmp_path: Path) -> None:
    suite = make_suite(tmp_path, "ok")
    proc = run(suite, "--mode", "live")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not (suite / "cassettes/t1.jsonl").exists()
