"""``trialrun prune RUN_DIR``: the recordings a replay left unused go, and nothing else.

Real suites, real replays: an agent that no longer makes one of its calls leaves that call's
recording unused; the run names it (file and line) in unused-recordings.json and prune removes
exactly that line, every other byte of every file as it was. Refusals touch nothing.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from builders import RESET_CHAT, chat_recording, only_run_dir, run_trialrun, write_suite
from paths import AGENTS_DIR
from trialrun.gateway.cassette import write_cassette

SCRIPTED = AGENTS_DIR / "scripted_tools.py"
CHAT = RESET_CHAT

# One tool call, then one chat completion through the model gateway.
MODEL_AGENT = r"""
import json, os, sys, urllib.request

def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()

task = json.loads(sys.stdin.readline())
send({"type": "tool_call", "name": "lookup", "call_id": "c1", "args": {"id": 1}})
looked_up = json.loads(sys.stdin.readline())["result"]
body = json.dumps({"model": "gpt-4o-mini", "messages": CHAT}).encode()
request = urllib.request.Request(
    os.environ["OPENAI_BASE_URL"] + "/chat/completions",
    data=body,
    headers={"Content-Type": "application/json", "Authorization": "Bearer sk-replay"},
)
with urllib.request.urlopen(request, timeout=30) as response:
    answer = json.loads(response.read())["choices"][0]["message"]["content"]
send({"type": "final_output", "output": {"lookup": looked_up, "reply": answer}})
""".replace("CHAT", json.dumps(CHAT))


def lookup(n: int) -> str:
    entry = {"tool": "lookup", "args": {"id": n}, "ok": True, "result": {"n": n}, "error": None}
    return json.dumps(entry) + "\n"


def calls(*numbers: int) -> dict[str, Any]:
    return {"calls": [["lookup", {"id": n}] for n in numbers]}


def tool_suite(root: Path, cases: dict[str, dict[str, Any]], cassettes: dict[str, str]) -> Path:
    return write_suite(
        root,
        name="prune",
        agent=[sys.executable, SCRIPTED],
        tools=["lookup"],
        cases=cases,
        cassettes=cassettes,
    )


def replay(root: Path, *extra: str) -> Path:
    out = root / "out"
    done = run_trialrun("run", root / "suite", "--no-baseline", "--out", out, *extra, cwd=root)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    return only_run_dir(out)


def prune(root: Path, run_dir: Path, *extra: str) -> tuple[int, str, str]:
    done = run_trialrun("prune", run_dir, *extra, cwd=root)
    return done.returncode, done.stdout, done.stderr


def test_a_removed_call_is_reported_and_pruned_and_nothing_else_changes(tmp_path: Path) -> None:
    # The agent used to call lookup 1, 2, 3; it no longer calls 2.
    suite = tool_suite(
        tmp_path, {"t1": {"input": calls(1, 3), "cassette": "cassettes/t1.jsonl"}}, {}
    )
    path = suite / "cassettes" / "t1.jsonl"
    # A CRLF line, a key order of its own, no final newline: kept lines come back byte for byte.
    third = '{"args":{"id":3},"tool":"lookup","ok":true}'
    original = lookup(1).replace("\n", "\r\n") + lookup(2) + third
    path.write_bytes(original.encode())
    run_dir = replay(tmp_path)
    unused = json.loads((run_dir / "unused-recordings.json").read_text(encoding="utf-8"))
    [case] = unused["cases"]
    assert case["unused"] == [
        {"kind": "tool", "file": "cassettes/t1.jsonl", "line": 2, "name": "lookup"}
    ]

    code, out, err = prune(tmp_path, run_dir, "--dry-run")
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "would remove cassettes/t1.jsonl:2: tool lookup",
        "1 unused recording would be removed from 1 file",
    ]
    assert path.read_bytes() == original.encode()

    code, out, err = prune(tmp_path, run_dir)
    assert (code, err) == (0, ""), out
    assert out.splitlines()[0] == "removed cassettes/t1.jsonl:2: tool lookup"
    assert path.read_bytes() == (lookup(1).replace("\n", "\r\n") + third).encode()
    # The pruned cassette still replays the agent, now with nothing unused.
    again = json.loads((replay_again(tmp_path) / "summary.json").read_text(encoding="utf-8"))
    assert [c["unused_recordings"] for c in again["cases"]] == [0]
    assert again["cases"][0]["status"] == "pass"


def replay_again(root: Path) -> Path:
    out = root / "out2"
    done = run_trialrun("run", root / "suite", "--no-baseline", "--out", out, cwd=root)
    assert done.returncode == 0, done.stdout + done.stderr
    return only_run_dir(out)


def test_tool_and_model_recordings_are_pruned_by_line(tmp_path: Path) -> None:
    suite = write_suite(
        tmp_path,
        name="prune",
        agent=[sys.executable, "agent.py"],
        tools=["lookup"],
        cases={"t1": {"input": {}, "cassette": "cassettes/t1.jsonl"}},
        cassettes={"t1.jsonl": lookup(7) + lookup(1)},
        files={"agent.py": MODEL_AGENT},
        settings="model_gateway: {}\n",
    )
    model = suite / "cassettes" / "t1.model.jsonl"
    write_cassette(model, [chat_recording("gpt-4o", "old"), chat_recording("gpt-4o-mini", "hi")])
    model_before = model.read_bytes().splitlines(keepends=True)
    run_dir = replay(tmp_path)
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    assert summary["cases"][0]["status"] == "pass"

    code, out, err = prune(tmp_path, run_dir)
    assert (code, err) == (0, ""), out
    assert out.splitlines() == [
        "removed cassettes/t1.jsonl:1: tool lookup",
        "removed cassettes/t1.model.jsonl:2: model model:gpt-4o",
        "2 unused recordings removed from 2 files",
    ]
    assert (suite / "cassettes" / "t1.jsonl").read_text(encoding="utf-8") == lookup(1)
    assert model.read_bytes() == model_before[0] + model_before[2]
    assert (
        json.loads((replay_again(tmp_path) / "summary.json").read_text(encoding="utf-8"))["cases"][
            0
        ]["unused_recordings"]
        == 0
    )


def test_a_shared_cassette_loses_only_what_every_case_left_unused(tmp_path: Path) -> None:
    shared = lookup(1) + lookup(2) + lookup(3)
    tool_suite(
        tmp_path,
        {
            "a": {"input": calls(1), "cassette": "cassettes/shared.jsonl"},
            "b": {"input": calls(2), "cassette": "cassettes/shared.jsonl"},
        },
        {"shared.jsonl": shared},
    )
    path = tmp_path / "suite" / "cassettes" / "shared.jsonl"
    code, out, _ = prune(tmp_path, replay(tmp_path))
    assert code == 0
    assert out.splitlines() == [
        "removed cassettes/shared.jsonl:3: tool lookup",
        "1 unused recording removed from 1 file",
    ]
    assert path.read_text(encoding="utf-8") == lookup(1) + lookup(2)


def test_a_run_of_some_cases_keeps_a_cassette_other_cases_share(tmp_path: Path) -> None:
    tool_suite(
        tmp_path,
        {
            "a": {"input": calls(1), "cassette": "cassettes/shared.jsonl"},
            "b": {"input": calls(2), "cassette": "cassettes/shared.jsonl"},
        },
        {"shared.jsonl": lookup(1) + lookup(2)},
    )
    code, out, _ = prune(tmp_path, replay(tmp_path, "--case", "a"))
    assert code == 0
    assert out.splitlines() == [
        "kept cassettes/shared.jsonl: a case this run did not run shares it",
        "0 unused recordings removed from 0 files",
    ]
    assert (tmp_path / "suite/cassettes/shared.jsonl").read_text() == lookup(1) + lookup(2)


def test_a_case_that_did_not_end_cleanly_keeps_its_recordings(tmp_path: Path) -> None:
    # Call 9 has no recording: the case fails on a miss, and 1 and 2 went unused only because
    # the agent stopped early.
    tool_suite(
        tmp_path,
        {"t1": {"input": calls(9), "cassette": "cassettes/t1.jsonl"}},
        {"t1.jsonl": lookup(1) + lookup(2)},
    )
    code, out, _ = prune(tmp_path, replay(tmp_path))
    assert code == 0
    assert out.splitlines()[0] == "kept cassettes/t1.jsonl: case t1 did not end cleanly"
    assert (tmp_path / "suite/cassettes/t1.jsonl").read_text() == lookup(1) + lookup(2)


@pytest.fixture
def replayed(tmp_path: Path) -> Path:
    tool_suite(
        tmp_path,
        {"t1": {"input": calls(1), "cassette": "cassettes/t1.jsonl"}},
        {"t1.jsonl": lookup(1) + lookup(2)},
    )
    return replay(tmp_path)


def test_recordings_changed_since_the_run_are_refused(tmp_path: Path, replayed: Path) -> None:
    path = tmp_path / "suite/cassettes/t1.jsonl"
    changed = lookup(2) + lookup(1)
    path.write_text(changed, encoding="utf-8")
    code, out, err = prune(tmp_path, replayed)
    assert code == 2
    assert out == ""
    [line] = err.splitlines()
    assert line.startswith(f"error: {replayed / 'unused-recordings.json'}: cassettes/t1.jsonl ")
    assert "changed since the run" in line
    assert path.read_text(encoding="utf-8") == changed


def test_an_interrupted_run_is_refused(tmp_path: Path, replayed: Path) -> None:
    where = replayed / "unused-recordings.json"
    doc = json.loads(where.read_text(encoding="utf-8"))
    where.write_text(json.dumps({**doc, "interrupted": True}), encoding="utf-8")
    code, _, err = prune(tmp_path, replayed)
    assert code == 2
    assert err.startswith(f"error: {where}: the run was interrupted: expected a replay run")
    assert (tmp_path / "suite/cassettes/t1.jsonl").read_text() == lookup(1) + lookup(2)


def test_a_record_run_is_refused(tmp_path: Path) -> None:
    tool_suite(
        tmp_path,
        {"t1": {"input": calls(1), "cassette": "cassettes/t1.jsonl"}},
        {"t1.jsonl": lookup(1)},
    )
    suite = tmp_path / "suite"
    (suite / "tools.py").write_text("TOOLS = {'lookup': lambda id: {'n': id}}\n")
    with (suite / "suite.yaml").open("a", encoding="utf-8") as file:
        file.write("tool_module: tools\n")
    out = tmp_path / "out"
    done = run_trialrun(
        "run", suite, "--mode", "record", "--no-baseline", "--out", out, cwd=tmp_path
    )
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = only_run_dir(out)
    code, _, err = prune(tmp_path, run_dir)
    assert code == 2
    assert err == (
        f"error: {run_dir}: no unused-recordings.json: expected a replay run of this trialrun "
        "version (this run's mode was record: only a replay knows which recordings went "
        "unused)\n"
    )


def test_a_folder_that_is_no_run_is_refused(tmp_path: Path) -> None:
    code, _, err = prune(tmp_path, tmp_path)
    assert code == 2
    assert err.startswith(f"error: {tmp_path}: no unused-recordings.json")
