"""The artifacts of a multi-call run, byte for byte, against files checked in beside the test.

Speeding up the per-message path (parsing, matching, answering, recording events, the receipt)
must not change a byte of what a run writes. A suite whose cases make many tool calls of every
kind (repeated calls, redacted secrets, non-ASCII text, numbers that match only canonically,
nested and long arguments, a failed tool, a mismatch, a refused tool, logs and usage) runs
once; everything that is not a timestamp, a duration, a path of this machine or a hash over
those is compared with ``tests/data/golden_run/``. ``TRIALRUN_REGENERATE_GOLDEN=1`` rewrites the
files (check the diff before committing it).
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from builders import only_run_dir, run_trialrun
from paths import AGENTS_DIR, DATA_DIR
from trialrun.receipt import verify_receipt
from trialrun.running.replay_env import CREDENTIALS

AGENT = AGENTS_DIR / "scripted.py"
GOLDEN = DATA_DIR / "golden_run"

_SECRET_KEY = "sk-live-abcdefghijklmnopqrstuvwxyz"


def _call(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_call", "name": name, "call_id": call_id, "args": args}


def _recording(tool: str, args: dict[str, Any], result: Any, ok: bool = True) -> dict[str, Any]:
    entry: dict[str, Any] = {"tool": tool, "args": args, "ok": ok, "result": result}
    if not ok:
        entry["error"] = result
        entry["result"] = None
    return entry


CASES: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]]]] = {
    "many_calls": (
        [
            {"type": "log", "level": "info", "message": "start", "data": {"token": "abc123xyz"}},
            {"type": "usage", "tokens_in": 5, "tokens_out": 7, "cost_usd": 0.0005, "model": "m"},
            _call("c1", "search", {"q": "reset password"}),
            _call("c2", "search", {"q": "reset password"}),
            _call("c3", "search", {"q": "café ☕ 𝄞", "n": 1.0}),
            _call("c4", "lookup", {"api_key": _SECRET_KEY, "id": 7}),
            _call("c5", "lookup", {"id": 8, "nested": {"b": [1, 2.5, {"c": None}], "a": True}}),
            _call("c6", "lookup", {"id": 9, "text": "lorem ipsum " * 30}),
            _call("c7", "fail_tool", {"id": 10}),
            _call("c8", "search", {"q": "Authorization: Bearer abcdefghijklmnop123"}),
            _call("c9", "search", {"password_hint": "pet", "limit": 10**17}),
            {"type": "log", "level": "warn", "message": "DB_PASSWORD=hunter2 leaked", "data": None},
            _call("c10", "search", {"q": 'tab\there "quoted" \\ and \u2028'}),
        ],
        [
            _recording("search", {"q": "reset password"}, {"page": 1}),
            _recording("search", {"q": "reset password"}, {"page": 2}),
            _recording("search", {"n": 1, "q": "café ☕ 𝄞"}, {"hits": ["☕"], "score": 0.25}),
            _recording("lookup", {"api_key": "[REDACTED]", "id": 7}, {"user": "ada"}),
            _recording("lookup", {"nested": {"a": True, "b": [1, 2.5, {"c": None}]}, "id": 8}, 8),
            _recording("lookup", {"id": 9, "text": "lorem ipsum " * 30}, "long"),
            _recording("fail_tool", {"id": 10}, "boom: upstream 503", ok=False),
            _recording("search", {"q": "Authorization: Bearer [REDACTED]"}, {"ok": "bearer"}),
            _recording("search", {"limit": 10**17, "password_hint": "pet"}, [1e21, 1e-7, -0.0]),
            _recording("search", {"q": 'tab\there "quoted" \\ and \u2028'}, {"esc": "\u0001"}),
            _recording("search", {"q": "never asked"}, {"unused": True}),
        ],
    ),
    "mismatch": (
        [
            _call("m1", "search", {"q": "known"}),
            _call("m2", "search", {"q": "unknown question"}),
        ],
        [
            _recording("search", {"q": "known"}, {"page": 1}),
            _recording("search", {"q": "unknown questions"}, {"page": 2}),
        ],
    ),
    "refused": (
        [_call("r1", "search", {"q": "known"}), _call("r2", "delete_all", {})],
        [_recording("search", {"q": "known"}, {"page": 1})],
    ),
}


def _make_suite(root: Path) -> Path:
    suite = root / "suite"
    (suite / "cases").mkdir(parents=True)
    (suite / "cassettes").mkdir()
    (suite / "suite.yaml").write_text(
        "suite_name: golden\n"
        f"agent_command: [{json.dumps(sys.executable)}, {json.dumps(str(AGENT))}]\n"
        "mode: replay\ncases_path: cases\ntool_registry: [search, lookup, fail_tool]\n"
        "assertions:\n  - type: required_fields\n    fields: [answers, calls]\n"
        "  - type: must_call\n    tools: [search, lookup]\n"
        # Open: which seal layers a kernel offers differs between machines, the files must not.
        "network: open\n",
        encoding="utf-8",
    )
    for case_id, (script, recordings) in CASES.items():
        cassette = f"cassettes/{case_id}.jsonl"
        case = {"id": case_id, "input": {"script": script}, "cassette": cassette}
        (suite / "cases" / f"{case_id}.yaml").write_text(json.dumps(case), encoding="utf-8")
        lines = "".join(json.dumps(entry, ensure_ascii=False) + "\n" for entry in recordings)
        (suite / "cassettes" / f"{case_id}.jsonl").write_text(lines, encoding="utf-8")
    return suite


# Members whose values are clocks, durations, this machine's paths or hashes over them. They are
# blanked in the text as written, so that every other byte (key order, escapes, number forms)
# is still compared.
_VOLATILE_KEYS = (
    "timestamp", "ts", "generated_at", "started_at", "finished_at", "wall_ms", "wallMs",
    "startup_ms", "startupMs",
    "durationMs", "duration_ms", "run_id", "hash", "prev", "traceSha256", "repoHead", "branch",
    "verifyCommand", "suite_path", "cassette_path",
)  # fmt: skip
_VOLATILE = re.compile(
    r'("(?:' + "|".join(_VOLATILE_KEYS) + r')": ?)(?:-?[0-9][0-9.eE+-]*|"[^"\\]*"|null)'
)
# A list or an object of them (the agent command; the summary's wall_ms statistics).
_VOLATILE_BLOCK = re.compile(r'("(?:agent_command|wall_ms)": ?)(?:\[[^\]]*\]|\{[^}]*\})')


def _steady(text: str) -> str:
    return _VOLATILE_BLOCK.sub(r"\g<1><volatile>", _VOLATILE.sub(r"\g<1><volatile>", text))


# Durations as the report prints them ("87 ms", "1,204 ms", "1.2 s") and dates.
_TIMES = re.compile(
    r"\b\d[\d,]*(?:\.\d+)?\s?(?:ms|s)\b|\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:\.\d+)?Z?"
)
_WALL_CELL = re.compile(r'(<td class="status-\w+">\w+</td><td class="num">)\d+')
_HTML_TIMESTAMP = re.compile(r"(&#34;timestamp&#34;: )[0-9.e+]+")


# A case's timeline is drawn from when its calls happened: tests/report/test_run_report_views.py
# checks it against the run's own numbers; here it is one placeholder.
_TIMELINE = re.compile(r'<figure class="timeline">.*?</figure>', re.DOTALL)


def _steady_html(text: str, run_dir: Path, root: Path) -> str:
    text = text.replace(run_dir.name, "<run_id>").replace(str(root), "<root>")
    text = _TIMELINE.sub('<figure class="timeline"><timeline></figure>', text)
    text = _WALL_CELL.sub(r"\g<1><ms>", text)
    text = _HTML_TIMESTAMP.sub(r"\g<1><ts>", text)
    return _TIMES.sub("<time>", text)


def _artifacts(run_dir: Path, root: Path) -> dict[str, str]:
    def read(name: str) -> str:
        return (run_dir / name).read_text(encoding="utf-8")

    return {
        "run.jsonl": _steady(read("run.jsonl")),
        "receipt.jsonl": _steady(read("receipt.jsonl")),
        "summary.json": _steady(read("summary.json")),
        "junit.xml": re.sub(
            r'time="[0-9.]+"', 'time="<t>"', (run_dir / "junit.xml").read_text(encoding="utf-8")
        ),
        "report.html": _steady_html(
            (run_dir / "report.html").read_text(encoding="utf-8"), run_dir, root
        ),
    }


@pytest.fixture(scope="module")
def golden_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("golden")
    suite = _make_suite(root)
    # The run names the credentials it replaced: the same on every machine only without any.
    without_credentials: dict[str, str | None] = {name: None for name in CREDENTIALS}
    proc = run_trialrun(
        "run", suite, "--no-baseline", "--out", "out", cwd=root, env=without_credentials
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr  # two cases fail on purpose
    return only_run_dir(root / "out"), root


@pytest.mark.parametrize("name", ["run.jsonl", "receipt.jsonl", "summary.json", "junit.xml"])
def test_artifact_matches_the_golden_file(golden_run: tuple[Path, Path], name: str) -> None:
    run_dir, root = golden_run
    found = _artifacts(run_dir, root)[name]
    golden = GOLDEN / name
    if os.environ.get("TRIALRUN_REGENERATE_GOLDEN") == "1":
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(found, encoding="utf-8")
    assert found == golden.read_text(encoding="utf-8")


def test_report_matches_the_golden_file(golden_run: tuple[Path, Path]) -> None:
    run_dir, root = golden_run
    found = _artifacts(run_dir, root)["report.html"]
    golden = GOLDEN / "report.html"
    if os.environ.get("TRIALRUN_REGENERATE_GOLDEN") == "1":
        golden.write_text(found, encoding="utf-8")
    assert found == golden.read_text(encoding="utf-8")


def test_the_receipt_chain_verifies(golden_run: tuple[Path, Path]) -> None:
    run_dir, _ = golden_run
    result = verify_receipt(run_dir / "receipt.jsonl")
    assert result.ok, result.to_json()
