"""Model calls a tool's body makes while recording are never asked for in replay: said, not unused.

An SDK agent calls the model itself (when its task says so) and through a ``@tool`` whose body
calls the model too. Record writes both model calls, the tool's marked ``inside_tool``; replay
answers the tool from its cassette, never runs its body, and must neither count that recording
as unused (a warning no re-recording could clear) nor fail the case as ``no_model_call``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gateway_fake_upstream import FakeUpstream

pytestmark = pytest.mark.slow

AGENT = r"""
import json, os, urllib.request
import trialrun.agent as sdk

def chat(text):
    body = json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": text}]})
    request = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=body.encode(),
        headers={"Content-Type": "application/json",
                 "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]},
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.loads(response.read())["choices"][0]["message"]["content"]

@sdk.tool
def summarize(text: str) -> str:
    if os.environ.get("TRIALRUN_MODE") == "replay":
        raise RuntimeError("the real summarize ran in replay")
    return chat("summarize " + text)

session = sdk.connect()
plan = chat("plan the ticket") if session.input.get("plan") else None
session.final_output({"plan": plan, "summary": summarize("the ticket")})
"""


def make_suite(root: Path, upstream: str, *, plan: bool) -> Path:
    suite = root / "suite"
    (suite / "cases").mkdir(parents=True)
    (suite / "agent.py").write_text(AGENT, encoding="utf-8")
    (suite / "suite.yaml").write_text(
        "suite_name: inside\n"
        f"agent_command: {json.dumps([sys.executable, 'agent.py'])}\n"
        "agent_channel: fd\nmode: replay\ncases_path: cases\ntool_registry: [summarize]\n"
        f"model_gateway:\n  upstreams: {{openai: {json.dumps(upstream)}}}\n",
        encoding="utf-8",
    )
    case = {"id": "t1", "input": {"plan": plan}, "cassette": "cassettes/t1.jsonl"}
    (suite / "cases" / "t1.yaml").write_text(json.dumps(case), encoding="utf-8")
    return suite


def run(root: Path, suite: Path, mode: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = root / f"out-{mode}"
    command = [sys.executable, "-m", "trialrun", "run", str(suite), "--mode", mode]
    done = subprocess.run(
        [*command, "--no-baseline", "--out", str(out)],
        cwd=root,
        env={**os.environ, "OPENAI_API_KEY": "sk-test-record"},
        capture_output=True,
        text=True,
        timeout=180,
    )
    [run_dir] = (out / "inside").iterdir()
    return done, run_dir


def case_of(run_dir: Path) -> dict[str, Any]:
    [case] = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))["cases"]
    assert isinstance(case, dict)
    return case


def notes(run_dir: Path) -> list[str]:
    events = [json.loads(line) for line in (run_dir / "run.jsonl").read_text("utf-8").splitlines()]
    return [
        e["message"]
        for e in events
        if e["type"] == "log" and (e.get("data") or {}).get("source") == "trialrun"
    ]


def model_lines(suite: Path) -> list[dict[str, Any]]:
    lines = (suite / "cassettes" / "t1.model.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines[1:]]


@pytest.mark.parametrize("plan", [True, False], ids=["agent-and-tool", "tool-only"])
def test_a_fresh_recording_replays_with_nothing_unused(
    tmp_path: Path, upstream: FakeUpstream, plan: bool
) -> None:
    suite = make_suite(tmp_path, upstream.url, plan=plan)
    recorded, record_dir = run(tmp_path, suite, "record")
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    lines = model_lines(suite)
    assert [line.get("inside_tool") for line in lines] == ([None] if plan else []) + ["summarize"]
    assert notes(record_dir) == [
        "calls made by tool bodies: 1 model call inside 'summarize'; replay answers those tools "
        "from the tool cassette and never runs their bodies, so it will not repeat these calls"
    ]

    replayed, replay_dir = run(tmp_path, suite, "replay")
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    case = case_of(replay_dir)
    assert (case["status"], case["unused_recordings"]) == ("pass", 0)
    assert "Unused recordings" not in replayed.stdout
    assert notes(replay_dir) == [
        "recordings made by tool bodies while recording: 1 model call inside 'summarize'; "
        "replay answered those tools from the tool cassette, so it never asked for them "
        "(not unused)"
    ]


def test_without_the_mark_the_same_recording_reads_as_unused(
    tmp_path: Path, upstream: FakeUpstream
) -> None:
    """What the mark changes: a recording made before it (or by hand) is reported unused."""
    suite = make_suite(tmp_path, upstream.url, plan=True)
    recorded, _ = run(tmp_path, suite, "record")
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    path = suite / "cassettes" / "t1.model.jsonl"
    [header, *lines] = path.read_text(encoding="utf-8").splitlines()
    stripped = [{k: v for k, v in json.loads(line).items() if k != "inside_tool"} for line in lines]
    path.write_text(
        "\n".join([header, *(json.dumps(line, sort_keys=True) for line in stripped)]) + "\n",
        encoding="utf-8",
    )
    replayed, replay_dir = run(tmp_path, suite, "replay")
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert case_of(replay_dir)["unused_recordings_by_tool"] == {"model:gpt-4o-mini": 1}
    assert notes(replay_dir) == []


def test_update_keeps_the_recording_of_a_tool_body_it_did_not_run(
    tmp_path: Path, upstream: FakeUpstream
) -> None:
    """Update answers the tool from its cassette, so its body's model call is never made: its
    recording is kept as it was, not dropped as unused, and nothing reaches the upstream."""
    suite = make_suite(tmp_path, upstream.url, plan=True)
    recorded, _ = run(tmp_path, suite, "record")
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    path = suite / "cassettes" / "t1.model.jsonl"
    before = path.read_bytes()
    upstream.received.clear()

    updated, update_dir = run(tmp_path, suite, "update")

    assert updated.returncode == 0, updated.stdout + updated.stderr
    assert upstream.received == []
    assert path.read_bytes() == before
    recordings = case_of(update_dir)["recordings"]
    assert (recordings["kept"], recordings["dropped"]) == (3, 0)  # tool, plan, summary
