"""Every `trialrun run` leaves a receipt; with a signing key it is signed and pinned."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from test_run_e2e import make_suite, only_run_dir  # type: ignore[import-not-found]
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
