"""A lenient model replay's drift warnings reach run.jsonl, summary.json and report.html.

They used to reach only stderr, where a CI log scrolls them away: a case passing on a drifted
request must say so wherever its result is read.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from trialrun.gateway.cassette import Recording, write_cassette

pytestmark = pytest.mark.slow

AGENT = r"""
import json, os, sys, urllib.request

json.loads(sys.stdin.readline())
body = json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]})
request = urllib.request.Request(
    os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=body.encode(),
    headers={"Content-Type": "application/json",
             "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]},
)
with urllib.request.urlopen(request, timeout=30) as response:
    reply = json.loads(response.read())["choices"][0]["message"]["content"]
sys.stdout.write(json.dumps({"type": "final_output", "output": {"reply": reply}}) + "\n")
sys.stdout.flush()
"""


def recording(prompt: str) -> Recording:
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hello"}}],
        "usage": {"prompt_tokens": 2, "completion_tokens": 1, "total_tokens": 3},
    }
    messages = [{"role": "user", "content": prompt}]
    return Recording(
        provider="openai",
        method="POST",
        path="/v1/chat/completions",
        request={"model": "gpt-4o-mini", "messages": messages},
        status=200,
        content_type="application/json",
        body=json.dumps(body),
    )


def run_suite(root: Path, *, lenient: bool, prompt: str) -> dict[str, Any]:
    suite = root / "suite"
    (suite / "cases").mkdir(parents=True)
    (suite / "cassettes").mkdir()
    (suite / "agent.py").write_text(AGENT, encoding="utf-8")
    (suite / "suite.yaml").write_text(
        "suite_name: drift\n"
        f"agent_command: {json.dumps([sys.executable, 'agent.py'])}\n"
        "mode: replay\ncases_path: cases\ntool_registry: []\n"
        f"model_gateway: {{lenient: {json.dumps(lenient)}}}\n",
        encoding="utf-8",
    )
    case = {"id": "t1", "input": {}, "cassette": "cassettes/t1.jsonl"}
    (suite / "cases" / "t1.yaml").write_text(json.dumps(case), encoding="utf-8")
    (suite / "cassettes" / "t1.jsonl").write_text("", encoding="utf-8")
    write_cassette(suite / "cassettes" / "t1.model.jsonl", [recording(prompt)])
    done = subprocess.run(
        [sys.executable, "-m", "trialrun", "run", str(suite), "--no-baseline"],
        cwd=root,
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    [run_dir] = (root / "trialrun_out" / "drift").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    events = [json.loads(line) for line in (run_dir / "run.jsonl").read_text().splitlines()]
    return {
        "case": summary["cases"][0],
        "events": events,
        "report": (run_dir / "report.html").read_text(encoding="utf-8"),
        "stderr": done.stderr,
    }


def test_a_drifted_call_served_leniently_is_warned_of_in_every_artifact(tmp_path: Path) -> None:
    seen = run_suite(tmp_path, lenient=True, prompt="recorded long ago")
    case = seen["case"]
    assert case["status"] == "pass"
    [warning] = case["warnings"]
    assert warning.startswith("model call openai /v1/chat/completions: drift: no recording of")
    assert "lenient replay served" in warning
    logged = [e for e in seen["events"] if e["type"] == "log" and e.get("level") == "warning"]
    assert [e["message"] for e in logged] == [warning]
    assert logged[0]["case_id"] == "t1" and logged[0]["data"] == {"source": "model_gateway"}
    assert "Warnings" in seen["report"] and "lenient replay served" in seen["report"]


def test_a_call_that_matched_its_recording_warns_of_nothing(tmp_path: Path) -> None:
    seen = run_suite(tmp_path, lenient=True, prompt="hi")
    assert seen["case"]["warnings"] == []
    assert not [e for e in seen["events"] if e["type"] == "log"]
    assert "Warnings" not in seen["report"]
