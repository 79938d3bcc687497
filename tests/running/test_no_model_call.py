"""A replayed agent that ends well without one model call while its recording holds some fails.

Whatever answered such an agent, it was not its recording: a client trialrun does not point at
the gateway, or code that no longer needs a model. The case says so (``no_model_call``), and a
fresh record run clears it, leaving no unused recording behind.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from trialrun.gateway.cassette import Recording, check_cassette_file, write_cassette

pytestmark = pytest.mark.slow

CHAT = [{"role": "user", "content": "hello"}]

# Asks the gateway for one chat completion unless its task says to skip the model.
AGENT = r"""
import json, os, sys, urllib.request

task = json.loads(sys.stdin.readline())
output = {"reply": None}
if not task["input"].get("skip_model"):
    body = json.dumps({"model": "gpt-4o-mini", "messages": CHAT}).encode()
    request = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=body,
        headers={"Content-Type": "application/json",
                 "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]},
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        output["reply"] = json.loads(response.read())["choices"][0]["message"]["content"]
if task["input"].get("fail"):
    sys.stdout.write(json.dumps({"type": "task_error", "message": "gave up"}) + "\n")
else:
    sys.stdout.write(json.dumps({"type": "final_output", "output": output}) + "\n")
sys.stdout.flush()
""".replace("CHAT", json.dumps(CHAT))


def recording() -> Recording:
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}}],
        "usage": {"prompt_tokens": 2, "completion_tokens": 1, "total_tokens": 3},
    }
    return Recording(
        provider="openai",
        method="POST",
        path="/v1/chat/completions",
        request={"model": "gpt-4o-mini", "messages": CHAT},
        status=200,
        content_type="application/json",
        body=json.dumps(body),
    )


def make_suite(root: Path, case_input: dict[str, Any]) -> Path:
    suite = root / "suite"
    (suite / "cases").mkdir(parents=True)
    (suite / "cassettes").mkdir()
    (suite / "agent.py").write_text(AGENT, encoding="utf-8")
    (suite / "suite.yaml").write_text(
        "suite_name: models\n"
        f"agent_command: {json.dumps([sys.executable, 'agent.py'])}\n"
        "mode: replay\ncases_path: cases\ntool_registry: []\nmodel_gateway: {}\n",
        encoding="utf-8",
    )
    case = {"id": "t1", "input": case_input, "cassette": "cassettes/t1.jsonl"}
    (suite / "cases" / "t1.yaml").write_text(json.dumps(case), encoding="utf-8")
    (suite / "cassettes" / "t1.jsonl").write_text("", encoding="utf-8")
    write_cassette(suite / "cassettes" / "t1.model.jsonl", [recording()])
    return suite


def run(root: Path, suite: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trialrun", "run", str(suite), "--no-baseline", *args],
        cwd=root,
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def last_case(root: Path) -> dict[str, Any]:
    runs = sorted((root / "trialrun_out" / "models").iterdir())
    [case] = json.loads((runs[-1] / "summary.json").read_text(encoding="utf-8"))["cases"]
    assert isinstance(case, dict)
    return case


def test_the_agent_that_used_its_model_recording_passes(tmp_path: Path) -> None:
    suite = make_suite(tmp_path, {})
    done = run(tmp_path, suite)
    assert done.returncode == 0, done.stdout + done.stderr
    case = last_case(tmp_path)
    assert (case["status"], case["failure_kind"], case["unused_recordings"]) == ("pass", None, 0)


def test_no_model_call_fails_the_case_then_re_recording_clears_it(tmp_path: Path) -> None:
    suite = make_suite(tmp_path, {"skip_model": True})
    done = run(tmp_path, suite)
    assert done.returncode == 1, done.stdout + done.stderr
    case = last_case(tmp_path)
    assert case["status"] == "fail"
    assert case["failure_kind"] == "no_model_call"
    assert (
        "made no model call through the gateway, yet its model recording holds 1"
        in (case["failure_reason"])
    )
    assert "no model call through the gateway" in done.stdout
    assert case["unused_recordings_by_tool"] == {"model:gpt-4o-mini": 1}

    # The agent no longer needs a model: record again, then replay is clean, nothing unused.
    recorded = run(tmp_path, suite, "--mode", "record")
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    assert check_cassette_file(suite / "cassettes" / "t1.model.jsonl") == ([], [])
    again = run(tmp_path, suite)
    assert again.returncode == 0, again.stdout + again.stderr
    case = last_case(tmp_path)
    assert (case["status"], case["unused_recordings"]) == ("pass", 0)
    assert "Unused recordings" not in again.stdout


def test_an_agent_that_failed_anyway_keeps_its_own_failure(tmp_path: Path) -> None:
    suite = make_suite(tmp_path, {"skip_model": True, "fail": True})
    done = run(tmp_path, suite)
    assert done.returncode == 1, done.stdout + done.stderr
    assert last_case(tmp_path)["failure_kind"] == "task_error"
