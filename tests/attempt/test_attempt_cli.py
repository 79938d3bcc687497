"""``trialrun attempt`` end to end, as a subprocess, with a real pytest verifier (issue 5)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from builders import HANG_GUARD_S, run_trialrun
from paths import ATTEMPT_AGENTS_DIR
from trialrun.receipt.schema import schema_problems
from trialrun.receipt.verify import verify_receipt

AGENT = ATTEMPT_AGENTS_DIR / "scripted.py"
BUGGY = "def add(a, b):\n    return a + b\n\n\ndef divide(a, b):\n    return a * b\n"
BROKEN_ADD = "def add(a, b):\n    return a - b\n\n\ndef divide(a, b):\n    return a * b\n"
FIXED = "def add(a, b):\n    return a + b\n\n\ndef divide(a, b):\n    return a / b\n"
TESTS = (
    "from calc import add, divide\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
    "def test_divide():\n    assert divide(6, 3) == 2\n"
)
VERIFY = f"PYTHONDONTWRITEBYTECODE=1 {sys.executable} -m pytest -q -p no:cacheprovider test_calc.py"


@pytest.fixture(autouse=True)
def _own_trialrun_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The workspace's snapshots live in the trialrun home: never the user's own here.
    monkeypatch.setenv("TRIALRUN_HOME", str(tmp_path / "trialrun-home"))


def make_project(tmp_path: Path, plan: dict[str, Any]) -> tuple[Path, str]:
    workspace = tmp_path / "project"
    workspace.mkdir()
    (workspace / "calc.py").write_text(BUGGY)
    (workspace / "test_calc.py").write_text(TESTS)
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan))
    return workspace, f"{sys.executable} {AGENT} {plan_file}"


def trialrun(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_trialrun(*args, cwd=cwd, env={"PYTHONDONTWRITEBYTECODE": "1"})


def read_events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.slow
def test_worse_attempt_is_rolled_back_and_the_fix_is_verified_and_signed(tmp_path: Path) -> None:
    plan = {
        "1": {"write": {"calc.py": BROKEN_ADD, "stray.txt": "left by attempt 1\n"}},
        "2": {"write": {"calc.py": FIXED}},
    }
    workspace, agent = make_project(tmp_path, plan)
    keys = tmp_path / "keys"
    assert trialrun("receipt", "keygen", str(keys), cwd=tmp_path).returncode == 0
    receipt = tmp_path / "out" / "receipt.jsonl"
    proc = trialrun(
        "attempt",
        "--goal",
        "make divide divide",
        "--verify",
        VERIFY,
        "--agent",
        agent,
        "--workspace",
        str(workspace),
        "--receipt",
        str(receipt),
        "--sign-key",
        str(keys / "receipt-key.pem"),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert "verified: verified true after 2 attempts" in proc.stdout

    assert schema_problems(receipt) == []
    events = read_events(receipt)
    assert [e["type"] for e in events] == [
        "run_start",
        "verifier_result",
        "attempt_start",
        "verifier_result",
        "rollback",
        "attempt_end",
        "attempt_start",
        "verifier_result",
        "attempt_end",
        "file_change",
        "run_end",
    ]
    data = [e["data"] for e in events]
    assert data[0]["goal"] == "make divide divide" and data[0]["verifyCommand"] == VERIFY
    assert data[0]["repoHead"] is None and data[0]["tool"]["name"] == "trialrun"
    scores = [(d["attempt"], d["passed"], d["failureScore"]) for d in data if "failureScore" in d]
    assert scores == [(0, False, 1), (1, False, 2), (2, True, 0)]
    assert "1 failed, 1 passed" in data[1]["output"]
    assert data[4] == {"attempt": 1, "reason": "failureScore rose from 1 to 2"}
    assert data[5] == {"attempt": 1, "outcome": "worse", "rolledBack": True}
    assert data[8] == {"attempt": 2, "outcome": "verified", "rolledBack": False}
    change = data[9]
    assert (change["path"], change["status"], change["binary"]) == ("calc.py", "modified", False)
    assert "-    return a * b\n+    return a / b" in change["diff"]
    assert data[10]["stopReason"] == "verified" and data[10]["verified"] is True
    assert data[10]["totals"]["attempts"] == 2 and data[10]["totals"]["filesChanged"] == 1

    pinned = (keys / "receipt-key.pub.pem").read_text()
    assert verify_receipt(receipt, public_key=pinned).ok
    assert (workspace / "calc.py").read_text() == FIXED
    assert sorted(p.name for p in workspace.iterdir()) == ["calc.py", "test_calc.py"]

    shown = trialrun("receipt", "show", str(receipt), cwd=tmp_path)
    assert shown.returncode == 0 and "Attempt 1: worse, rolled back" in shown.stdout


@pytest.mark.slow
def test_not_verified_exits_1_and_default_receipt_is_outside_the_workspace(
    tmp_path: Path,
) -> None:
    workspace, agent = make_project(tmp_path, {})
    proc = trialrun(
        "attempt", "--goal", "g", "--verify", VERIFY, "--agent", agent, "--attempts", "1",
        "--workspace", str(workspace), cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    receipts = list((tmp_path / "trialrun_out" / "attempt").glob("*/receipt.jsonl"))
    assert len(receipts) == 1 and verify_receipt(receipts[0]).ok
    assert read_events(receipts[0])[-1]["data"]["stopReason"] == "attempts_exhausted"


@pytest.mark.parametrize("git", [True, False], ids=["git repository", "plain folder"])
@pytest.mark.slow
def test_defaults_only_work_from_inside_the_workspace(tmp_path: Path, git: bool) -> None:
    # Workspace `.` and the receipt under ./trialrun_out/attempt/: the receipt grows inside the
    # workspace, so it must be neither a file change nor rolled back with a worse attempt.
    plan = {"1": {"write": {"calc.py": BROKEN_ADD}}, "2": {"write": {"calc.py": FIXED}}}
    workspace, agent = make_project(tmp_path, plan)
    if git:
        git_env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com"}
        git_env |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
        for command in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "start"]):
            subprocess.run(["git", *command], cwd=workspace, env=git_env, check=True)
    proc = trialrun("attempt", "--goal", "g", "--verify", VERIFY, "--agent", agent, cwd=workspace)
    assert proc.returncode == 0, proc.stderr
    [receipt] = (workspace / "trialrun_out" / "attempt").glob("*/receipt.jsonl")
    assert f"Receipt: {receipt.relative_to(workspace)}" in proc.stdout
    events = read_events(receipt)
    outcomes = [e["data"]["outcome"] for e in events if e["type"] == "attempt_end"]
    assert outcomes == ["worse", "verified"]
    assert [e["data"]["path"] for e in events if e["type"] == "file_change"] == ["calc.py"]
    assert verify_receipt(receipt).ok
    assert (events[0]["data"]["repoHead"] is not None) is git


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--goal", ""], "--goal must not be empty"),
        (["--workspace", "missing"], "error: missing: the workspace is not an existing directory"),
        (["--sign-key", "no-such-key.pem"], "error:"),
    ],
)
def test_bad_input_exits_2(tmp_path: Path, args: list[str], message: str) -> None:
    workspace, agent = make_project(tmp_path, {})
    base = ["--goal", "g", "--verify", "true", "--agent", agent, "--workspace", str(workspace)]
    proc = trialrun("attempt", *base, *args, cwd=tmp_path)
    assert proc.returncode == 2
    assert message in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_sigterm_restores_the_workspace_and_exits_130(tmp_path: Path) -> None:
    plan = {"1": {"write": {"calc.py": FIXED, "half.txt": "x"}, "sleep": 60}}
    workspace, agent = make_project(tmp_path, plan)
    receipt = tmp_path / "receipt.jsonl"
    command = ["attempt", "--goal", "g", "--verify", VERIFY, "--agent", agent]
    proc = subprocess.Popen(
        [sys.executable, "-m", "trialrun", *command, "--workspace", str(workspace),
         "--receipt", str(receipt)],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while not (workspace / "half.txt").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=HANG_GUARD_S)
    assert proc.returncode == 130, stderr
    assert (workspace / "calc.py").read_text() == BUGGY
    assert not (workspace / "half.txt").exists()
    end = read_events(receipt)[-1]
    assert end["type"] == "run_end" and end["data"]["stopReason"] == "interrupted"
    assert verify_receipt(receipt).ok
