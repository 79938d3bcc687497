"""Stale recordings (issue 32, 4): older than ``max_recording_age_days`` or of a model the suite
no longer asks for, named by doctor and the run report; recordings say when they were made.
"""

from __future__ import annotations

import calendar
import json
import sys
import time
from pathlib import Path
from typing import Any

from builders import only_run_dir, run_trialrun, write_suite
from paths import AGENTS_DIR
from trialrun.base.recordtime import parse_recorded_at, recorded_at
from trialrun.config import load_suite
from trialrun.gateway.cassette import Recording, check_cassette_file, write_cassette
from trialrun.running.staleness import stale_recordings
from trialrun.tools.cassette import Cassette

SCRIPTED = AGENTS_DIR / "scripted_tools.py"
NOW = calendar.timegm((2026, 12, 5, 0, 0, 0))
DAY = 86400
# The commands below measure ages from the real clock: their recordings are dated from it, a
# day away from any limit, so the minutes a test takes cannot change a verdict.
CLOCK_OFFSET = 0.5 * DAY


def lookup(n: int, when: str | None) -> str:
    entry: dict[str, Any] = {"tool": "lookup", "args": {"id": n}, "ok": True, "result": {"n": n}}
    if when is not None:
        entry["recorded_at"] = when
    return json.dumps(entry) + "\n"


def chat(model: str, when: str | None) -> Recording:
    return Recording(
        provider="openai",
        method="POST",
        path="/v1/chat/completions",
        request={"model": model, "messages": [{"role": "user", "content": "hi"}]},
        status=200,
        content_type="application/json",
        body="{}",
        recorded_at=when,
    )


def suite_with(root: Path, settings: str, now: float = NOW) -> Path:
    suite = write_suite(
        root,
        name="stale",
        agent=[sys.executable, SCRIPTED],
        tools=["lookup"],
        cases={
            "t1": {"input": {"calls": [["lookup", {"id": 1}]]}, "cassette": "cassettes/t1.jsonl"}
        },
        cassettes={
            # 1: 30 days old, at the limit; 2: 31 days; 3: no known age.
            "t1.jsonl": lookup(1, recorded_at(now - 30 * DAY))
            + lookup(2, recorded_at(now - 31 * DAY))
            + lookup(3, None),
        },
        settings=settings,
    )
    write_cassette(
        suite / "cassettes" / "t1.model.jsonl",
        [chat("gpt-4o-mini", recorded_at(now - DAY)), chat("gpt-4", recorded_at(now - DAY))],
    )
    return suite


def whys(suite: Path) -> list[tuple[str, int, str]]:
    loaded = load_suite(suite)
    [case] = loaded.cases
    return [(s.path.name, s.line, s.why) for s in stale_recordings(loaded, case, NOW)]


def test_age_and_model_are_judged_against_the_clock_given(tmp_path: Path) -> None:
    suite = suite_with(
        tmp_path, "max_recording_age_days: 30\nmodel_gateway:\n  models: [gpt-4o-mini]\n"
    )
    assert whys(suite) == [
        (
            "t1.jsonl",
            2,
            "tool lookup: recorded 2026-11-04T00:00:00Z, 31 days ago (max_recording_age_days: 30)",
        ),
        (
            "t1.model.jsonl",
            3,
            "model gpt-4: the suite no longer asks for this model (model_gateway.models: "
            "gpt-4o-mini)",
        ),
    ]


def test_nothing_is_stale_without_either_key(tmp_path: Path) -> None:
    assert whys(suite_with(tmp_path, "model_gateway: {}\n")) == []


def test_doctor_names_the_stale_recordings_and_the_command_to_record_them(
    tmp_path: Path,
) -> None:
    suite_with(
        tmp_path,
        "max_recording_age_days: 30\nmodel_gateway:\n  models: [gpt-4o-mini]\n",
        time.time() - CLOCK_OFFSET,
    )
    done = run_trialrun("doctor", "suite", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    stale = [line for line in done.stdout.splitlines() if line.startswith("warn stale:")]
    assert len(stale) == 2
    assert stale[0].startswith("warn stale: suite/cassettes/t1.jsonl:2: tool lookup: recorded ")
    assert stale[0].endswith(
        ", 31 days ago (max_recording_age_days: 30) (record it again: trialrun run suite "
        "--mode record --case t1)"
    )
    assert stale[1].startswith(
        "warn stale: suite/cassettes/t1.model.jsonl:3: model gpt-4: the suite no longer asks"
    )


def test_the_run_report_names_them_and_they_do_not_fail_the_case(tmp_path: Path) -> None:
    suite_with(tmp_path, "max_recording_age_days: 30\n", time.time() - CLOCK_OFFSET)
    (tmp_path / "suite" / "cassettes" / "t1.model.jsonl").unlink()  # this agent asks no model
    out = tmp_path / "out"
    done = run_trialrun("run", "suite", "--no-baseline", "--out", out, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    start = lines.index("warning: stale recordings (they still replay):")
    assert lines[start + 1].startswith("  t1: suite/cassettes/t1.jsonl:2: tool lookup: recorded ")
    assert lines[start + 1].endswith(", 31 days ago (max_recording_age_days: 30)")
    run_dir = only_run_dir(out)
    [case] = json.loads((run_dir / "summary.json").read_text("utf-8"))["cases"]
    assert case["status"] == "pass"
    assert [line.split(": recorded")[0] for line in case["stale_recordings"]] == [
        "suite/cassettes/t1.jsonl:2: tool lookup"
    ]
    page = (run_dir / "report.html").read_text("utf-8")
    assert "<dt>Stale recordings</dt><dd>suite/cassettes/t1.jsonl:2: tool lookup" in page


def test_a_recorded_tool_cassette_says_when_and_still_loads_as_runledgers(tmp_path: Path) -> None:
    suite = write_suite(
        tmp_path,
        name="rec",
        agent=[sys.executable, SCRIPTED],
        tools=["lookup"],
        cases={
            "t1": {"input": {"calls": [["lookup", {"id": 4}]]}, "cassette": "cassettes/t1.jsonl"}
        },
        files={"tools.py": "TOOLS = {'lookup': lambda args: {'n': args['id']}}\n"},
        settings="tool_module: tools\n",
        mode="record",
    )
    done = run_trialrun("run", "suite", "--no-baseline", "--out", tmp_path / "out", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    [line] = (suite / "cassettes" / "t1.jsonl").read_text("utf-8").splitlines()
    entry = json.loads(line)
    assert set(entry) == {"tool", "args", "ok", "result", "recorded_at"}
    assert parse_recorded_at(entry["recorded_at"]) is not None
    [loaded] = Cassette.load(suite / "cassettes" / "t1.jsonl").entries
    assert (loaded.tool, loaded.args, loaded.result) == ("lookup", {"id": 4}, {"n": 4})


def test_a_model_recording_keeps_when_and_files_without_it_still_load(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    write_cassette(path, [chat("gpt-4o", "2026-12-01T10:00:00Z"), chat("gpt-4o", None)])
    lines = path.read_text("utf-8").splitlines()
    assert '"recorded_at": "2026-12-01T10:00:00Z"' in lines[1]
    assert "recorded_at" not in lines[2]
    recordings, problems = check_cassette_file(path)
    assert problems == []
    assert [r.recorded_at for r in recordings] == ["2026-12-01T10:00:00Z", None]


def test_an_mcp_recording_says_when_and_old_ones_are_stale(tmp_path: Path) -> None:
    from trialrun.mcp_proxy import load_cassette
    from trialrun.mcp_proxy.cassette import CallRecord
    from trialrun.mcp_proxy.cassette import write_cassette as write_mcp

    suite = suite_with(
        tmp_path,
        "max_recording_age_days: 30\nmcp_servers:\n  docs:\n    command: [python3, server.py]\n",
    )
    (suite / "cassettes" / "t1.model.jsonl").unlink()
    path = suite / "cassettes" / "t1.mcp-docs.jsonl"
    old, fresh = recorded_at(NOW - 40 * DAY), recorded_at(NOW - DAY)
    write_mcp(
        path,
        None,
        [
            CallRecord("search", {"q": "a"}, True, {"content": []}, None, recorded_at=old),
            CallRecord("search", {"q": "b"}, True, {"content": []}, None, recorded_at=fresh),
            CallRecord("search", {"q": "c"}, True, {"content": []}, None),
        ],
    )
    assert [c.recorded_at for c in load_cassette(path).calls] == [old, fresh, None]
    assert whys(suite)[-1] == (
        "t1.mcp-docs.jsonl",
        1,
        f"tool mcp:docs/search: recorded {old}, 40 days ago (max_recording_age_days: 30)",
    )
