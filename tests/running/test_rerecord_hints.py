"""What a run says when a case's recording is missing, stale or was not saved (issue 31, 15).

A mismatch names the command that updates just that case (issue 32, 5), a missing cassette the
one that records it; record mode lists the cases whose failure left their cassette as it was.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from builders import call_cli, only_run_dir, write_suite
from paths import AGENTS_DIR

SCRIPTED = [sys.executable, AGENTS_DIR / "scripted.py"]


def call(q: str) -> dict[str, Any]:
    return {"type": "tool_call", "name": "search_docs", "call_id": "c1", "args": {"q": q}}


def recording(q: str) -> str:
    entry = {"tool": "search_docs", "args": {"q": q}, "ok": True, "result": {"hits": []}}
    return json.dumps(entry) + "\n"


def failure_reasons(out: Path) -> dict[str, str]:
    summary = json.loads((only_run_dir(out) / "summary.json").read_text(encoding="utf-8"))
    return {case["id"]: case["failure_reason"] for case in summary["cases"]}


def test_a_mismatch_and_a_missing_cassette_name_the_command_that_records_the_case(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    suite = write_suite(
        tmp_path,
        name="hints",
        agent=SCRIPTED,
        tools=["search_docs"],
        folder="my evals",
        cases={
            "stale": {"input": {"script": [call("new")]}, "cassette": "cassettes/stale.jsonl"},
            "absent": {"input": {"script": [call("x")]}, "cassette": "cassettes/absent.jsonl"},
            "fine": {"input": {"script": [call("old")]}, "cassette": "cassettes/fine.jsonl"},
        },
        cassettes={"stale.jsonl": recording("old"), "fine.jsonl": recording("old")},
    )
    outcome = call_cli(["run", str(suite), "--out", "out", "--no-baseline"], capsys)
    assert outcome.code == 1
    reasons = failure_reasons(tmp_path / "out")
    assert reasons["stale"].startswith("Cassette mismatch.\n")
    assert reasons["stale"].endswith(
        "\nTo update just this case: trialrun run 'my evals' --mode update --case stale"
    )
    assert reasons["absent"].endswith(
        "\nTo record this case: trialrun run 'my evals' --mode record --case absent"
    )
    assert reasons["fine"] is None
    assert "trialrun run 'my evals' --mode update --case stale" in outcome.out


def test_record_mode_lists_the_cassettes_it_kept_because_their_case_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    broken = [call("again"), {"type": "task_error", "message": "gave up"}]
    suite = write_suite(
        tmp_path,
        name="rec",
        agent=SCRIPTED,
        tools=["search_docs"],
        mode="record",
        cases={
            "broken": {"input": {"script": broken}, "cassette": "cassettes/broken.jsonl"},
            "good": {"input": {"script": [call("q")]}, "cassette": "cassettes/good.jsonl"},
        },
        cassettes={"broken.jsonl": recording("kept"), "good.jsonl": recording("replaced")},
    )
    outcome = call_cli(["run", str(suite), "--out", "out", "--no-baseline"], capsys)
    assert outcome.code == 1
    assert (suite / "cassettes" / "broken.jsonl").read_text() == recording("kept")
    assert "replaced" not in (suite / "cassettes" / "good.jsonl").read_text()
    lines = outcome.out.splitlines()
    heading = lines.index(
        "Cassettes kept as they were (their case failed, so its recording was dropped):"
    )
    assert lines[heading + 1 : heading + 3] == ["  broken: suite/cassettes/broken.jsonl", ""]


def test_a_passing_record_run_lists_no_kept_cassette(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    suite = write_suite(
        tmp_path,
        name="rec",
        agent=SCRIPTED,
        tools=["search_docs"],
        mode="record",
        cases={"good": {"input": {"script": [call("q")]}, "cassette": "cassettes/good.jsonl"}},
    )
    outcome = call_cli(["run", str(suite), "--out", "out", "--no-baseline"], capsys)
    assert outcome.code == 0, outcome.out + outcome.err
    assert "Cassettes kept" not in outcome.out
    assert (suite / "cassettes" / "good.jsonl").exists()
