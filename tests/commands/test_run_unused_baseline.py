"""A suite's ``baseline_path`` outside a git checkout (issue 31, item 7).

Real RunLedger suites keep baselines beside their suites' folder (``../../baselines/x.json``).
Unpacked from a tarball, ``git archive`` or in a Docker build there is no repository to bound
them: the run must not refuse a path it does not read, and a working directory above the suite
bounds the paths it does read.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from builders import call_cli, write_suite
from paths import AGENTS_DIR
from trialrun.config.paths import find_repository_root

CALL = {"type": "tool_call", "name": "search_docs", "call_id": "c1", "args": {"q": "x"}}
RECORDING = {"tool": "search_docs", "args": {"q": "x"}, "ok": True, "result": {"hits": []}}


@pytest.fixture
def suite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``project/evals/demo`` whose baseline_path leaves it; the working directory is elsewhere."""
    if find_repository_root(tmp_path) is not None:
        pytest.skip("the temporary directory is inside a git repository")
    made = write_suite(
        tmp_path / "project",
        name="demo",
        agent=[sys.executable, AGENTS_DIR / "scripted.py"],
        tools=["search_docs"],
        folder="evals/demo",
        settings="baseline_path: ../../baselines/demo.json\n",
        cases={"t1": {"input": {"script": [CALL]}, "cassette": "cassettes/t1.jsonl"}},
        cassettes={"t1.jsonl": json.dumps(RECORDING) + "\n"},
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    return made


def test_an_unused_baseline_path_is_not_checked(
    suite: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outcome = call_cli(["run", str(suite), "--no-baseline", "--out", "out"], capsys)
    assert outcome.code == 0, outcome.out + outcome.err
    baseline = tmp_path / "b.json"
    run_dir = next((Path("out") / "demo").iterdir())
    assert (
        call_cli(
            ["baseline", "promote", "--from", str(run_dir), "--to", str(baseline)], capsys
        ).code
        == 0
    )
    outcome = call_cli(["run", str(suite), "--baseline", str(baseline), "--out", "out"], capsys)
    assert outcome.code == 0, outcome.out + outcome.err


def test_a_used_baseline_path_is_checked_against_the_suite_directory(
    suite: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outcome = call_cli(["run", str(suite), "--out", "out"], capsys)
    assert outcome.code == 2
    assert "'baseline_path': path '../../baselines/demo.json' resolves outside the suite " in (
        outcome.err
    )


def test_a_working_directory_above_the_suite_bounds_its_paths(
    suite: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path / "project")
    outcome = call_cli(["run", "evals/demo", "--out", "out"], capsys)
    assert outcome.code == 0, outcome.out + outcome.err
    assert "warning: baseline " in outcome.err and "does not exist yet" in outcome.err
