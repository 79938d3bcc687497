"""git_state_ahead: git is asked once and early; an uncollected question dies with its block."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from builders import make_suite, only_run_dir
from trialrun.base import gitinfo
from trialrun.base.gitinfo import git_state, git_state_ahead
from trialrun.cli import run_cli


def _repository(path: Path, branch: str = "feature") -> str:
    """Its first commit; ``path`` becomes a repository on ``branch`` unless it is one already."""
    git = ["git", "-C", str(path), "-c", "user.email=t@example.com", "-c", "user.name=t"]
    if (path / ".git").exists():
        subprocess.run([*git, "checkout", "-q", "-b", branch], check=True)
    else:
        subprocess.run([*git, "init", "-q", "-b", branch], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "first"], check=True)
    return subprocess.run(
        [*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The roots git was asked about (each one is a git process)."""
    roots: list[Path] = []
    ask = gitinfo._ask

    def counting(root: Path) -> subprocess.Popen[str] | None:
        roots.append(root)
        return ask(root)

    monkeypatch.setattr(gitinfo, "_ask", counting)
    return roots


def test_a_git_state_inside_the_block_collects_the_question_asked_ahead(
    tmp_path: Path, asked: list[Path]
) -> None:
    head = _repository(tmp_path)
    with git_state_ahead(tmp_path):
        assert asked == [tmp_path]
        assert git_state(tmp_path) == (head, "feature")
    assert asked == [tmp_path]
    assert gitinfo._ahead == {}


def test_an_uncollected_question_is_reaped_when_the_block_ends(
    tmp_path: Path, asked: list[Path]
) -> None:
    _repository(tmp_path)
    with git_state_ahead(tmp_path):
        process = gitinfo._ahead[tmp_path]
    assert gitinfo._ahead == {}
    assert process.returncode is not None
    git_state(tmp_path)  # outside the block: asked afresh
    assert asked == [tmp_path, tmp_path]


def test_a_nested_block_asks_once_and_outside_git_gives_no_commit(
    tmp_path: Path, asked: list[Path]
) -> None:
    with git_state_ahead(tmp_path), git_state_ahead(tmp_path):
        assert git_state(tmp_path) == (None, "")
    assert asked == [tmp_path]
    with git_state_ahead(tmp_path / "gone"):  # git cannot even start there
        assert git_state(tmp_path / "gone") == (None, "")
    assert gitinfo._ahead == {}


def test_a_run_asks_git_once_and_records_its_answer(
    tmp_path: Path,
    asked: list[Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    make_suite(tmp_path)  # a repository of its own
    suite = tmp_path / "suite"
    for case in (suite / "cases").iterdir():
        if case.name != "a_ok.yaml":
            case.unlink()
    head = _repository(suite, branch="main")
    under_way: list[bool] = []

    def receipt_asks(root: Path) -> tuple[str | None, str]:
        under_way.append(root in gitinfo._ahead)
        return git_state(root)

    monkeypatch.setattr("trialrun.receipt.suite_run.git_state", receipt_asks)
    monkeypatch.chdir(tmp_path)
    assert run_cli(["run", "suite", "--out", "out", "--no-baseline"]) == 0
    capsys.readouterr()
    receipt = only_run_dir(tmp_path / "out") / "receipt.jsonl"
    run_start = json.loads(receipt.read_text().splitlines()[0])["data"]
    assert (run_start["repoHead"], run_start["branch"]) == (head, "main")
    assert asked == [suite.resolve()]
    assert under_way == [True]  # asked before the recorder was built
    assert gitinfo._ahead == {}
