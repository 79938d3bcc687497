"""The attempt loop (trialrun.attempt.harness) with a scripted agent and a one-line verifier.

The verifier reads ``score.txt`` and prints ``N failed`` (exit 1) or ``ok`` (exit 0), so each
outcome is set by what the scripted agent writes there.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from paths import ATTEMPT_AGENTS_DIR
from trialrun.attempt.harness import AttemptInputError, AttemptOptions, run_attempts, trim_output
from trialrun.attempt.process import run_shell
from trialrun.receipt.verify import verify_receipt

AGENT = ATTEMPT_AGENTS_DIR / "scripted.py"
VERIFY = 'n=$(cat score.txt); if [ "$n" = 0 ]; then echo ok; else echo "$n failed"; exit 1; fi'


@pytest.fixture(autouse=True)
def _own_trialrun_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The workspace's snapshots live in the trialrun home: never the user's own here.
    monkeypatch.setenv("TRIALRUN_HOME", str(tmp_path / "trialrun-home"))


def make_workspace(tmp_path: Path, score: int = 2) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "score.txt").write_text(f"{score}\n")
    return workspace


def options(tmp_path: Path, workspace: Path, plan: dict[str, Any], **kw: Any) -> AttemptOptions:
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan))
    base: dict[str, Any] = {
        "goal": "make score.txt 0",
        "verify_command": VERIFY,
        "agent_command": f"{sys.executable} {AGENT} {plan_file}",
        "workspace": workspace,
        "receipt_path": tmp_path / "out" / "receipt.jsonl",
        "attempts": 3,
        "grace_s": 0.5,
    }
    base.update(kw)
    return AttemptOptions(**base)


def events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def of_type(evs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e["data"] for e in evs if e["type"] == kind]


def test_verified_on_attempt_one_stops_and_records_the_change(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path)
    report = run_attempts(options(tmp_path, workspace, {"1": {"write": {"score.txt": "0\n"}}}))
    assert (report.stop_reason, report.verified, report.baseline_score) == ("verified", True, 2)
    assert [(r.attempt, r.outcome) for r in report.attempts] == [(1, "verified")]
    evs = events(report.receipt_path)
    assert [e["type"] for e in evs] == [
        "run_start",
        "verifier_result",
        "attempt_start",
        "verifier_result",
        "attempt_end",
        "file_change",
        "run_end",
    ]
    assert of_type(evs, "file_change")[0]["status"] == "modified"
    assert of_type(evs, "run_end")[0] == {
        "stopReason": "verified",
        "verified": True,
        "totals": {"attempts": 1, "totalTokens": 0, "costUsd": 0, "filesChanged": 1},
    }
    assert verify_receipt(report.receipt_path).ok


def test_improved_then_unchanged_are_kept(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path, score=3)
    plan = {
        "1": {"write": {"score.txt": "2\n", "notes.txt": "kept\n"}},
        "2": {"write": {"score.txt": "2\n", "more.txt": "also kept\n"}},
    }
    report = run_attempts(options(tmp_path, workspace, plan, attempts=2))
    assert [(r.outcome, r.failure_score, r.rolled_back) for r in report.attempts] == [
        ("improved", 2, False),
        ("unchanged", 2, False),
    ]
    assert report.stop_reason == "attempts_exhausted" and not report.verified
    assert (workspace / "notes.txt").exists() and (workspace / "more.txt").exists()
    assert of_type(events(report.receipt_path), "rollback") == []


def test_worse_is_rolled_back_exactly(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path, score=1)
    (workspace / "keep.txt").write_text("original\n")
    os.chmod(workspace / "keep.txt", 0o640)
    plan = {"1": {"write": {"score.txt": "4\n", "stray/new.txt": "x"}, "delete": ["keep.txt"]}}
    report = run_attempts(options(tmp_path, workspace, plan, attempts=1))
    assert [(r.outcome, r.rolled_back) for r in report.attempts] == [("worse", True)]
    assert (workspace / "score.txt").read_text() == "1\n"
    assert (workspace / "keep.txt").read_text() == "original\n"
    assert (workspace / "keep.txt").stat().st_mode & 0o777 == 0o640
    assert not (workspace / "stray").exists()
    evs = events(report.receipt_path)
    assert of_type(evs, "rollback") == [{"attempt": 1, "reason": "failureScore rose from 1 to 4"}]
    assert of_type(evs, "file_change") == []


def test_agent_crash_is_agent_error_and_rolled_back_without_verifying(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path, score=1)
    plan = {"1": {"write": {"score.txt": "0\n"}, "exit": 3}}
    report = run_attempts(options(tmp_path, workspace, plan, attempts=1))
    assert [(r.outcome, r.failure_score, r.rolled_back) for r in report.attempts] == [
        ("agent_error", None, True)
    ]
    assert (workspace / "score.txt").read_text() == "1\n"
    evs = events(report.receipt_path)
    assert [v["attempt"] for v in of_type(evs, "verifier_result")] == [0]
    assert of_type(evs, "rollback")[0]["reason"].startswith("the agent exited with code 3")


def test_hanging_agent_is_killed_with_its_process_group(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path, score=1)
    pid_file = tmp_path / "helper.pid"
    plan = {"1": {"write": {"score.txt": "0\n"}, "sleep": 60}}
    opts = options(tmp_path, workspace, plan, attempts=1, agent_timeout_s=1.0)
    agent = f"(sleep 60 & echo $! > {pid_file}; wait) & {opts.agent_command}"
    started = time.monotonic()
    report = run_attempts(dataclasses.replace(opts, agent_command=agent))
    assert time.monotonic() - started < 30  # half the 60 s its processes would run by themselves
    assert report.attempts[0].outcome == "agent_error"
    assert (workspace / "score.txt").read_text() == "1\n"
    reason = of_type(events(report.receipt_path), "rollback")[0]["reason"]
    assert "timed out after 1s" in reason
    assert not _alive(int(pid_file.read_text()))


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs; a killed zombie awaiting its new parent's reaping is dead.

    A dead process answers at once; only a leaked one waits out the generous bound.
    """
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return False
        if state in {"Z", "X"}:
            return False
        time.sleep(0.05)
    return True


def test_stream_json_tool_calls_usage_and_secrets_are_recorded_redacted(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path, score=1)
    secret = "sk-ant-api03-" + "A" * 40
    transcript = [
        "plain text is ignored",
        json.dumps(
            {
                "type": "assistant",
                "message": {
                    "content": [
                        {
                            "type": "tool_use",
                            "id": "t1",
                            "name": "Bash",
                            "input": {"command": f"ANTHROPIC_API_KEY={secret} pytest"},
                        }
                    ]
                },
            }
        ),
        json.dumps(
            {
                "type": "user",
                "message": {
                    "content": [{"type": "tool_result", "tool_use_id": "t1", "is_error": False}]
                },
            }
        ),
        json.dumps(
            {
                "type": "result",
                "usage": {"input_tokens": 100, "output_tokens": 20},
                "total_cost_usd": 0.01,
            }
        ),
    ]
    plan = {
        "1": {
            "write": {"score.txt": "0\n", "config.env": f"API_TOKEN={secret}\n"},
            "stdout": transcript,
            "usage": [{"inputTokens": 5, "outputTokens": 5, "costUsd": 0.5}],
        }
    }
    report = run_attempts(options(tmp_path, workspace, plan, attempts=1))
    text = report.receipt_path.read_text()
    assert secret not in text
    evs = events(report.receipt_path)
    calls = of_type(evs, "tool_call")
    assert [(c["name"], c["ok"], c["redacted"]) for c in calls] == [("Bash", True, True)]
    assert "[REDACTED]" in calls[0]["argsSummary"]
    changed = {c["path"]: c for c in of_type(evs, "file_change")}
    assert "[REDACTED]" in changed["config.env"]["diff"]
    assert changed["config.env"]["status"] == "created"
    assert [u["totalTokens"] for u in of_type(evs, "usage")] == [120, 10]
    totals = of_type(evs, "run_end")[0]["totals"]
    assert totals["totalTokens"] == 130 and totals["costUsd"] == pytest.approx(0.51)
    assert verify_receipt(report.receipt_path).ok


def test_numbers_no_report_can_hold_count_as_nothing_and_the_receipt_ends(tmp_path: Path) -> None:
    # Two attempts each claiming $1e308 summed to infinity, which run_end's canonical JSON
    # cannot hold: the receipt stopped short of run_end and the command exited 2.
    workspace = make_workspace(tmp_path, score=1)
    claim = {
        "type": "result",
        "usage": {"input_tokens": 1e308, "output_tokens": 2**53},
        "total_cost_usd": 1e308,
    }
    plan = {
        str(n): {
            "stdout": [json.dumps(claim)],
            "usage": [{"inputTokens": 4, "costUsd": 1e308}, {"inputTokens": 2**60}],
        }
        for n in (1, 2)
    }
    report = run_attempts(options(tmp_path, workspace, plan, attempts=2))
    evs = events(report.receipt_path)
    assert [u["totalTokens"] for u in of_type(evs, "usage")] == [0, 0]
    totals = of_type(evs, "run_end")[0]["totals"]
    assert (totals["totalTokens"], totals["costUsd"]) == (0, 0.0)
    assert verify_receipt(report.receipt_path).ok


def test_binary_file_change_has_hash_and_no_diff(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path, score=1)
    plan = {"1": {"write": {"score.txt": "0\n"}, "write_hex": {"img.bin": "00ff10"}}}
    report = run_attempts(options(tmp_path, workspace, plan, attempts=1))
    changed = {c["path"]: c for c in of_type(events(report.receipt_path), "file_change")}
    binary = changed["img.bin"]
    assert binary["binary"] is True and "diff" not in binary
    assert binary["beforeSha256"] is None and len(binary["afterSha256"]) == 64
    assert len(binary["diffSha256"]) == 64


def test_git_workspace_records_head_and_leaves_git_alone(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path, score=1)
    git = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q", "-b", "main"], cwd=workspace, check=True)
    subprocess.run([*git, "add", "."], cwd=workspace, check=True)
    subprocess.run([*git, "commit", "-qm", "start"], cwd=workspace, check=True)
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=workspace, capture_output=True, text=True, check=True
    ).stdout.strip()
    before = sorted(p.relative_to(workspace) for p in (workspace / ".git").rglob("*"))
    plan = {"1": {"write": {"score.txt": "5\n", "stray.txt": "x"}}}
    report = run_attempts(options(tmp_path, workspace, plan, attempts=1))
    assert report.attempts[0].outcome == "worse"
    start = of_type(events(report.receipt_path), "run_start")[0]
    assert (start["repoHead"], start["branch"]) == (head, "main")
    assert sorted(p.relative_to(workspace) for p in (workspace / ".git").rglob("*")) == before
    assert not (workspace / "stray.txt").exists()


def test_no_git_gives_null_head(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path, score=0)
    report = run_attempts(options(tmp_path, workspace, {}, attempts=1))
    start = of_type(events(report.receipt_path), "run_start")[0]
    assert (start["repoHead"], start["branch"]) == (None, "")
    # A passing baseline leaves nothing to do: no attempt runs.
    assert (report.stop_reason, report.attempts) == ("verified", [])


def test_agent_sees_goal_attempt_and_last_verifier_output(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path, score=2)
    log = tmp_path / "agent.log"
    plan = {"1": {"write": {"score.txt": "1\n"}}}
    os.environ["TRIALRUN_AGENT_LOG"] = str(log)
    try:
        run_attempts(options(tmp_path, workspace, plan, attempts=2))
    finally:
        del os.environ["TRIALRUN_AGENT_LOG"]
    seen = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(s["attempt"], s["goal"]) for s in seen] == [("1", "make score.txt 0")] * 1 + [
        ("2", "make score.txt 0")
    ]
    assert seen[0]["verify_output"] == "2 failed" and seen[1]["verify_output"] == "1 failed"


def test_interrupt_restores_the_workspace_and_ends_interrupted(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path, score=1)
    plan = {"1": {"write": {"score.txt": "0\n", "half.txt": "x"}, "sleep": 30}}
    opts = options(tmp_path, workspace, plan, attempts=1)
    timer = threading.Timer(1.5, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    try:
        report = run_attempts(opts)
    finally:
        timer.cancel()
    assert (report.stop_reason, report.verified) == ("interrupted", False)
    assert (workspace / "score.txt").read_text() == "1\n"
    assert not (workspace / "half.txt").exists()
    evs = events(report.receipt_path)
    assert evs[-1]["type"] == "run_end" and evs[-1]["data"]["stopReason"] == "interrupted"
    assert verify_receipt(report.receipt_path).ok


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"goal": "  "}, "--goal must not be empty"),
        ({"attempts": 0}, "--attempts must be at least 1"),
        ({"agent_command": ""}, "--agent must be a non-empty"),
    ],
)
def test_bad_options_are_refused(tmp_path: Path, change: dict[str, Any], message: str) -> None:
    workspace = make_workspace(tmp_path)
    with pytest.raises(AttemptInputError, match=message):
        run_attempts(options(tmp_path, workspace, {}, **change))


def test_missing_workspace_is_refused(tmp_path: Path) -> None:
    opts = options(tmp_path, tmp_path / "missing", {})
    with pytest.raises(AttemptInputError, match="is not an existing directory"):
        run_attempts(opts)
    assert not opts.receipt_path.exists()


def test_a_receipt_inside_the_workspace_is_neither_a_change_nor_rolled_back(
    tmp_path: Path,
) -> None:
    workspace = make_workspace(tmp_path, score=1)
    plan = {"1": {"write": {"score.txt": "5\n"}}, "2": {"write": {"score.txt": "0\n"}}}
    receipt = workspace / "trialrun_out" / "attempt" / "r1" / "receipt.jsonl"
    report = run_attempts(options(tmp_path, workspace, plan, receipt_path=receipt))
    assert [(r.outcome, r.rolled_back) for r in report.attempts] == [
        ("worse", True),
        ("verified", False),
    ]
    evs = events(receipt)
    assert [c["path"] for c in of_type(evs, "file_change")] == ["score.txt"]
    assert verify_receipt(receipt).ok and evs[-1]["type"] == "run_end"


def test_verify_timeout_is_recorded(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path)
    opts = options(tmp_path, workspace, {}, attempts=1, verify_command="sleep 30")
    opts = dataclasses.replace(opts, verify_timeout_s=0.5)
    report = run_attempts(opts)
    baseline = of_type(events(report.receipt_path), "verifier_result")[0]
    assert (baseline["timedOut"], baseline["exitCode"], baseline["passed"]) == (True, None, False)


def test_run_shell_merges_stderr_and_stamps_lines(tmp_path: Path) -> None:
    result = run_shell(
        "echo out; echo err >&2; exit 4",
        cwd=tmp_path,
        env=os.environ,
        timeout_s=10,
        merge_stderr=True,
    )
    assert (result.exit_code, result.timed_out, result.succeeded) == (4, False, False)
    assert sorted(result.output.splitlines()) == ["err", "out"]
    assert all(stamp > 0 for stamp, _ in result.lines)


def test_trim_output_keeps_the_end() -> None:
    assert trim_output("abc", limit=5) == "abc"
    trimmed = trim_output("x" * 10 + "SUMMARY", limit=7)
    assert trimmed.endswith("\nSUMMARY") and "10 earlier characters cut" in trimmed
