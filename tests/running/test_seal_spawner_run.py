"""A run's sealed agents share one spawner: a spawner that dies fails the cases of the agents it
had started, naming it, and the run goes on with a new one."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from builders import only_run_dir, run_trialrun, write_suite
from trialrun.conversation.seal import probe

pytestmark = pytest.mark.skipif(not probe().any, reason="this kernel offers no seal layer")

# Kills its parent, which must be the spawner (never trialrun: then it exits 5 instead), and
# waits to be killed in turn.
AGENT = """\
import json, os, signal, sys, time
start = json.loads(sys.stdin.readline())
if start["input"].get("kill_spawner"):
    with open(f"/proc/{os.getppid()}/cmdline", "rb") as cmdline:
        if b"seal_spawner.py" not in cmdline.read():
            sys.exit(5)
    os.kill(os.getppid(), signal.SIGKILL)
    time.sleep(300)
print(json.dumps({"type": "final_output", "output": {"ok": True}}), flush=True)
"""


def test_a_killed_spawner_fails_its_cases_by_name_and_the_run_goes_on(tmp_path: Path) -> None:
    cases = {
        f"c{n}": {"input": {"kill_spawner": n == 1}, "cassette": "cassettes/empty.jsonl"}
        for n in (1, 2, 3)
    }
    suite = write_suite(
        tmp_path,
        name="spawner",
        agent=[sys.executable, "agent.py"],
        tools=[],
        cases=cases,
        cassettes={"empty.jsonl": ""},
        files={"agent.py": AGENT},
        settings="kill_grace_ms: 200\n",
    )

    done = run_trialrun(
        "run", suite, "--out", tmp_path / "out", "--no-baseline", "-j", "1", cwd=suite
    )

    assert done.returncode == 1, done.stderr
    summary = json.loads((only_run_dir(tmp_path / "out") / "summary.json").read_text())
    by_id = {case["id"]: case for case in summary["cases"]}
    first = by_id["c1"]
    assert first["failure_kind"] == "agent_crashed", first
    assert first["failure_reason"].startswith(
        "Agent was killed by SIGKILL because the agent spawner (pid "
    ), first
    assert first["failure_reason"].endswith(
        ") was killed by SIGKILL before sending final_output"
    ), first
    # c2's agent may have been started ahead by the same spawner: then it went with it, named.
    second = by_id["c2"]
    assert second["status"] == "pass" or "the agent spawner" in second["failure_reason"], second
    assert by_id["c3"]["status"] == "pass", by_id["c3"]
