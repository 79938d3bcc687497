"""A replay miss explains itself (issue 32, 5): the nearest recording's line, the first field
where the call differs from it, both sides shown around that difference, and the one command
that updates just that case, for a tool call and for a model call through the gateway alike.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from builders import only_run_dir, run_trialrun, write_suite
from paths import AGENTS_DIR
from trialrun.gateway.cassette import Recording, write_cassette

SCRIPTED = AGENTS_DIR / "scripted_tools.py"
LONG = "lorem ipsum dolor sit amet " * 8

MODEL_AGENT = r"""
import json, os, sys, urllib.request

task = json.loads(sys.stdin.readline())
body = json.dumps({"model": "gpt-4o-mini", "messages": task["input"]["messages"]}).encode()
request = urllib.request.Request(
    os.environ["OPENAI_BASE_URL"] + "/chat/completions",
    data=body,
    headers={"Content-Type": "application/json", "Authorization": "Bearer sk-replay"},
)
try:
    urllib.request.urlopen(request, timeout=30).read()
except Exception as exc:
    sys.stdout.write(json.dumps({"type": "task_error", "message": str(exc)}) + "\n")
    sys.exit(0)
sys.stdout.write(json.dumps({"type": "final_output", "output": {}}) + "\n")
"""


def entry(args: dict[str, Any]) -> str:
    return json.dumps({"tool": "search", "args": args, "ok": True, "result": {}}) + "\n"


def failure(root: Path) -> str:
    summary = json.loads((only_run_dir(root / "out") / "summary.json").read_text("utf-8"))
    [case] = summary["cases"]
    assert (case["status"], case["failure_kind"]) == ("fail", "cassette_mismatch")
    reason = case["failure_reason"]
    assert isinstance(reason, str)
    return reason


def replay(root: Path, suite: Path) -> None:
    done = run_trialrun("run", suite, "--no-baseline", "--out", root / "out", cwd=root)
    assert done.returncode == 1, done.stdout + done.stderr


def test_a_tool_miss_names_the_nearest_line_and_the_first_differing_field(tmp_path: Path) -> None:
    recorded = {"q": "x" + LONG + "reset password", "limit": 5}
    called = {"q": "x" + LONG + "reset pasword", "limit": 5}
    suite = write_suite(
        tmp_path,
        name="miss",
        agent=[sys.executable, SCRIPTED],
        tools=["search"],
        cases={"t1": {"input": {"calls": [["search", called]]}, "cassette": "cassettes/t1.jsonl"}},
        cassettes={"t1.jsonl": entry({"q": "billing"}) + entry(recorded)},
    )
    replay(tmp_path, suite)
    reason = failure(tmp_path)
    lines = reason.splitlines()
    [nearest] = [line for line in lines if line.startswith("Nearest recording:")]
    assert nearest.startswith("Nearest recording: line 2; first difference at args.q: recorded ")
    # Both sides cut around the difference: its start is left out, the differing part shown.
    recorded_part, requested_part = nearest.split(", requested ")
    assert "reset password" in recorded_part and "reset pasword" in requested_part
    assert recorded_part.split("recorded ")[1].startswith("...")
    assert lines[-1] == "To update just this case: trialrun run suite --mode update --case t1"


def test_a_different_tool_is_the_first_difference(tmp_path: Path) -> None:
    suite = write_suite(
        tmp_path,
        name="miss",
        agent=[sys.executable, SCRIPTED],
        tools=["search", "lookup"],
        cases={
            "t1": {"input": {"calls": [["lookup", {"q": 1}]]}, "cassette": "cassettes/t1.jsonl"}
        },
        cassettes={"t1.jsonl": entry({"q": 1})},
    )
    replay(tmp_path, suite)
    assert (
        'Nearest recording: line 1; first difference at tool: recorded "search", requested "lookup"'
    ) in failure(tmp_path).splitlines()


def test_a_model_miss_names_the_command_that_updates_its_case(tmp_path: Path) -> None:
    asked = [{"role": "user", "content": "reset my password"}]
    suite = write_suite(
        tmp_path,
        name="miss",
        agent=[sys.executable, "agent.py"],
        tools=[],
        cases={"t1": {"input": {"messages": asked}, "cassette": "cassettes/t1.jsonl"}},
        cassettes={"t1.jsonl": ""},
        files={"agent.py": MODEL_AGENT},
        settings="model_gateway: {}\n",
    )
    recorded = [{"role": "user", "content": "reset password"}]
    write_cassette(
        suite / "cassettes" / "t1.model.jsonl",
        [
            Recording(
                provider="openai",
                method="POST",
                path="/v1/chat/completions",
                request={"model": "gpt-4o-mini", "messages": recorded},
                status=200,
                content_type="application/json",
                body="{}",
            )
        ],
    )
    replay(tmp_path, suite)
    reason = failure(tmp_path)
    assert "nearest recording: line 2; first difference at messages[0].content" in reason
    assert reason.endswith("\nTo update just this case: trialrun run suite --mode update --case t1")
    run_log = (only_run_dir(tmp_path / "out") / "run.jsonl").read_text("utf-8")
    errors = [json.loads(line) for line in run_log.splitlines() if '"agent_error"' in line]
    assert errors[-1]["message"] == reason
