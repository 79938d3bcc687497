"""Every `trialrun run` leaves a receipt; with a signing key it is signed and pinned."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from builders import make_suite, only_run_dir, run_trialrun
from trialrun.receipt import generate_keypair, load_public_key, verify_receipt


def run_suite(
    tmp_path: Path, *extra: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    suite = tmp_path / "suite"
    if not suite.exists():
        make_suite(tmp_path)
        for case in (suite / "cases").iterdir():
            if case.name not in ("a_ok.yaml", "j_usage.yaml"):
                case.unlink()
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "trialrun",
            "run",
            str(suite),
            "--out",
            str(tmp_path / "out"),
            *extra,
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def test_a_signed_run_verifies_against_the_pinned_key_and_fails_after_an_edit(
    tmp_path: Path,
) -> None:
    private, public = generate_keypair(tmp_path / "keys")
    proc = run_suite(tmp_path, "--sign-key", str(private))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    receipt = only_run_dir(tmp_path / "out") / "receipt.jsonl"
    pinned = load_public_key(public)
    result = verify_receipt(receipt, public_key=pinned, require_signature=True)
    assert result.ok and result.signature.valid, result.to_json()
    assert result.event_count == len(receipt.read_text().splitlines())

    _, other_public = generate_keypair(tmp_path / "other")
    assert not verify_receipt(receipt, public_key=load_public_key(other_public)).ok

    lines = receipt.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[2] = lines[2].replace('"a_ok"', '"a_ko"')
    receipt.write_text("".join(lines), encoding="utf-8")
    edited = verify_receipt(receipt, public_key=pinned)
    assert not edited.ok and edited.first_bad_seq == 2


def test_the_key_can_come_from_the_environment(tmp_path: Path) -> None:
    private, public = generate_keypair(tmp_path / "keys")
    env = {**os.environ, "TRIALRUN_SIGN_KEY": str(private)}
    proc = run_suite(tmp_path, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    receipt = only_run_dir(tmp_path / "out") / "receipt.jsonl"
    result = verify_receipt(receipt, public_key=load_public_key(public), require_signature=True)
    assert result.ok, result.to_json()
    run_end = json.loads(receipt.read_text().splitlines()[-1])
    assert run_end["data"]["verified"] is True and run_end["data"]["cases"]["passed"] == 2


def test_an_unusable_key_stops_the_run_before_any_case(tmp_path: Path) -> None:
    bad = tmp_path / "bad.pem"
    bad.write_text("not a key", encoding="utf-8")
    proc = run_suite(tmp_path, "--sign-key", str(bad))
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: ") and "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_unsigned_receipt_verifies(tmp_path: Path, jobs: str) -> None:
    proc = run_suite(tmp_path, "-j", jobs)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = verify_receipt(only_run_dir(tmp_path / "out") / "receipt.jsonl")
    assert result.ok and not result.signature.present


def test_run_start_names_the_suite_and_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from trialrun.cli import run_cli

    make_suite(tmp_path)
    suite = tmp_path / "suite"
    for case in (suite / "cases").iterdir():
        if case.name != "a_ok.yaml":
            case.unlink()
    monkeypatch.chdir(tmp_path)
    assert run_cli(["run", "suite", "--out", "out", "--no-baseline"]) == 0
    capsys.readouterr()
    first = json.loads(
        (only_run_dir(tmp_path / "out") / "receipt.jsonl").read_text().splitlines()[0]
    )
    assert first["type"] == "run_start"
    assert first["data"]["goal"] == "misbehaving"
    assert first["data"]["verifyCommand"] == "trialrun run suite --out out --no-baseline"
    assert first["data"]["tool"]["name"] == "trialrun"


def test_run_start_records_the_commit_and_branch(tmp_path: Path) -> None:
    from trialrun.base.gitinfo import git_state

    repo = tmp_path / "repo"
    repo.mkdir()
    assert git_state(repo) == (None, "")  # not a repository
    git = ["git", "-C", str(repo), "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q", "-b", "feature"], check=True)
    assert git_state(repo) == (None, "")  # a repository without a commit yet
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "first"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    assert git_state(repo) == (head.strip(), "feature")


# ---- a case of many tool calls ---------------------------------------------------------------

DEEP_AGENT = """\
import json, sys
lines = iter(sys.stdin)
calls = json.loads(next(lines))["input"]["calls"]
for i in range(calls):
    args = {"q": f"q-{i}"}
    if i == 7:
        args["token"] = "sk-abcdefghijklmnopqrstuvwxyz123456"
    print(json.dumps({"type": "tool_call", "name": "lookup", "call_id": f"c{i}", "args": args}),
          flush=True)
    json.loads(next(lines))
print(json.dumps({"type": "final_output", "output": {"calls": calls}}), flush=True)
"""

# trialrun's console entry point, noting every fork of its process (not the spawns of its
# agents, which exec at once) in the file named by its first argument as it exits.
FORK_NOTING = """\
import atexit, os, sys
from pathlib import Path
note = Path(sys.argv.pop(1))
forks = []
os.register_at_fork(before=lambda: forks.append(os.getpid()))
atexit.register(lambda: note.write_text(str(len(forks))))
sys.argv[0] = "trialrun"
from trialrun.cli import main
main()
"""


def deep_suite(root: Path, *calls: int) -> Path:
    """A replay suite of one case per ``calls``: case ``c<n>`` makes that many tool calls."""
    suite = root / "deep"
    (suite / "cases").mkdir(parents=True)
    (suite / "cassettes").mkdir()
    (suite / "agent.py").write_text(DEEP_AGENT)
    (suite / "suite.yaml").write_text(
        f"suite_name: deep\nagent_command: {json.dumps([sys.executable, 'agent.py'])}\n"
        "mode: replay\ncases_path: cases\ntool_registry: [lookup]\n"
    )
    for n, count in enumerate(calls, start=1):
        (suite / "cases" / f"c{n}.yaml").write_text(
            f"id: c{n}\ninput:\n  calls: {count}\ncassette: cassettes/c{n}.jsonl\n"
        )
        entries = []
        for i in range(count):
            args = {"q": f"q-{i}"}
            if i == 7:
                args["token"] = "sk-abcdefghijklmnopqrstuvwxyz123456"
            entries.append(json.dumps({"tool": "lookup", "args": args, "ok": True, "result": i}))
        (suite / "cassettes" / f"c{n}.jsonl").write_text("\n".join(entries) + "\n")
    return suite


def comparable_events(receipt: Path) -> list[tuple[int, str, Any]]:
    """Each event's seq, type and data, less what differs from one run to the next."""
    events = []
    for line in receipt.read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        data = event["data"]
        if event["type"] == "run_start":
            data.pop("verifyCommand")
        elif event["type"] == "case_end":
            for key in ("wallMs", "startupMs", "traceSha256"):
                data.pop(key)
        elif event["type"] == "tool_call":
            data.pop("durationMs")
        events.append((event["seq"], event["type"], data))
    return events


def test_a_receipt_of_many_tool_calls_is_made_by_the_process_that_ran_them(
    tmp_path: Path,
) -> None:
    # A fresh interpreter with no thread of its own, where a receipt's events could be handed to
    # a forked child: none is, whatever the number of calls.
    suite = deep_suite(tmp_path, 1300, 1200)
    note = tmp_path / "forks"
    proc = subprocess.run(
        [sys.executable, "-c", FORK_NOTING, str(note), "run", str(suite), "--no-baseline",
         "--out", str(tmp_path / "one")],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert note.read_text() == "0"
    (one,) = (tmp_path / "one").glob("deep/*/receipt.jsonl")
    assert verify_receipt(one).ok, verify_receipt(one).to_json()
    events = comparable_events(one)
    types = [event_type for _, event_type, _ in events]
    case = ["case_start", "tool_call", "case_end"]
    assert [t for i, t in enumerate(types) if i == 0 or t != types[i - 1]] == [
        "run_start", *case, *case, "run_end",
    ]  # fmt: skip
    calls = [data for _, event_type, data in events if event_type == "tool_call"]
    assert len(calls) == 2500
    assert calls[7]["redacted"] is True and "sk-abc" not in calls[7]["argsSummary"]
    assert calls[8]["redacted"] is False
    # case_end carries the hash of the case's lines exactly as run.jsonl holds them.
    run_log = (one.parent / "run.jsonl").read_bytes().splitlines(keepends=True)
    ends = [
        json.loads(line)["data"] for line in one.read_text().splitlines() if '"case_end"' in line
    ]
    first_case = [line for line in run_log if json.loads(line).get("case_id") == "c1"]
    assert ends[0]["traceSha256"] == hashlib.sha256(b"".join(first_case)).hexdigest()

    # Two cases side by side leave the receipt of one case at a time.
    proc = run_trialrun(
        "run", suite, "-j", "2", "--no-baseline", "--out", tmp_path / "two", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (two,) = (tmp_path / "two").glob("deep/*/receipt.jsonl")
    assert comparable_events(two) == events
