"""``trialrun run --mode``: the option stands in for a suite.yaml without ``mode``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from builders import call_cli


@pytest.fixture
def suite_yaml(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """The demo suite's suite.yaml (outside any repository), its ``mode`` line removed."""
    assert call_cli(["init", "--path", str(tmp_path / "evals")], capsys).code == 0
    path = tmp_path / "evals" / "demo" / "suite.yaml"
    text = path.read_text(encoding="utf-8")
    assert re.search(r"^mode: replay\n", text, re.MULTILINE)
    path.write_text(re.sub(r"^mode: replay\n", "", text, flags=re.MULTILINE), encoding="utf-8")
    return path


def _run(suite_yaml: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
    out = suite_yaml.parent.parent / "out"
    argv = ["run", str(suite_yaml.parent), "--no-baseline", "--out", str(out), *extra]
    outcome = call_cli(argv, capsys)
    return outcome.code, outcome.out + outcome.err


def test_mode_option_runs_a_suite_without_mode(
    suite_yaml: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, output = _run(suite_yaml, capsys, "--mode", "replay")
    assert code == 0, output
    assert "missing required key" not in output


def test_without_the_option_a_missing_mode_is_still_an_error(
    suite_yaml: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, output = _run(suite_yaml, capsys)
    assert code == 2
    assert "suite.yaml:" in output and "missing required key 'mode' in suite" in output


def test_the_option_does_not_excuse_a_wrong_mode_in_the_file(
    suite_yaml: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite_yaml.write_text(suite_yaml.read_text(encoding="utf-8") + "mode: replya\n")
    code, output = _run(suite_yaml, capsys, "--mode", "replay")
    assert code == 2
    assert "suite.yaml:" in output and "replya" in output
