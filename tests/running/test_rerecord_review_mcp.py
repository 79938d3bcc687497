"""The re-recording review covers an MCP server's recordings too: drift in a real server's answer
fails ``--fail-on-change``, a re-record of the same answers does not (the ``mcp`` template)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from builders import run_trialrun

pytest.importorskip("mcp")

VENV_BIN = str(Path(sys.executable).parent)


def trialrun(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # The template's server runs with the python3 on PATH: ours, which has the mcp package.
    path = VENV_BIN + os.pathsep + os.environ.get("PATH", "")
    return run_trialrun(*args, cwd=project, env={"PATH": path})


def diff_of(project: Path, out: str) -> dict[str, Any]:
    (run_dir,) = (project / out / "mcp").iterdir()
    document: dict[str, Any] = json.loads((run_dir / "recordings-diff.json").read_text("utf-8"))
    return document


def test_a_changed_mcp_answer_fails_fail_on_change_and_the_same_answers_pass(
    tmp_path: Path,
) -> None:
    done = trialrun(tmp_path, "init", "--template", "mcp", "--path", "evals")
    assert done.returncode == 0, done.stdout + done.stderr
    suite = tmp_path / "evals" / "mcp"
    again = trialrun(
        tmp_path, "run", "evals/mcp", "--mode", "record", "--fail-on-change", "--no-baseline",
        "--out", "out1",
    )  # fmt: skip
    assert again.returncode == 0, again.stdout + again.stderr
    files = {block["file"]: block for block in diff_of(tmp_path, "out1")["cases"][0]["files"]}
    mcp_file = "evals/mcp/cassettes/t1.mcp-docs.jsonl"
    statuses = {r["status"] for r in files[mcp_file]["recordings"]}
    assert statuses <= {"identical", "volatile-only"}, files[mcp_file]

    server = suite / "server" / "docs_server.py"
    server.write_text(server.read_text("utf-8").replace("1 hour", "2 hours"), encoding="utf-8")
    drift = trialrun(
        tmp_path, "run", "evals/mcp", "--mode", "record", "--fail-on-change", "--no-baseline",
        "--out", "out2",
    )  # fmt: skip
    assert drift.returncode == 1, drift.stdout + drift.stderr
    assert f"{mcp_file} line " in drift.stderr
    assert "tool search_docs (result.content[0].text)" in drift.stderr
    (changed,) = [
        r
        for block in diff_of(tmp_path, "out2")["cases"][0]["files"]
        for r in block["recordings"]
        if r["status"] == "changed"
    ]
    # The excerpts are taken around the first differing character of the text.
    assert "2 hours" in changed["new"] and "1 hour" in changed["old"]
