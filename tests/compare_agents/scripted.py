"""A scripted coding agent for ``trialrun compare`` tests: behaviour comes from its inputs.

Usage in compare.yaml: ``command: [python, .../scripted.py, "{task}"]``. The plan is a JSON object
merged (shallow, later wins) from, in order:

1. every task line ``#agent {...}``: what every arm does on this case;
2. the environment variable ``COMPARE_AGENT_PLAN`` (JSON);
3. each staged subject's ``.claude/skills/*/agent.json``: a staged skill changes what the agent
   does, as a real one would, so candidate and incumbent can differ from the baseline;
4. ``by_rep[TRIALRUN_REP]`` of the plan so far, for per-repetition behaviour.

Plan keys (all optional):

* ``record``: a path; writes {argv, rep, cwd, staged} there as JSON before anything else
* ``spawn``: seconds; starts a background ``sleep`` in the agent's process group and writes its
  pid to ``child.pid`` (to see that a timeout kills the whole group)
* ``sleep``: seconds to sleep (a hang, for timeouts)
* ``fail_first``: an exit code returned at once unless the sandbox is a retry (``*.retry``)
* ``write``: {relative path: text}
* ``run``: [shell commands], run with bash in the sandbox and shown in the transcript
* ``say``: the assistant's text (and the ``result`` text)
* ``format``: ``stream-json`` (default) or ``text`` (``$ cmd`` lines, output, then ``say``)
* ``turns``, ``cost_usd``, ``tokens_in``, ``tokens_out``, ``duration_ms``: the ``result`` event
* ``exit``: the exit code at the end (default 0)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def load_plan(task: str) -> dict[str, Any]:
    plan: dict[str, Any] = {}
    for line in task.splitlines():
        if line.strip().startswith("#agent "):
            plan.update(json.loads(line.strip()[len("#agent ") :]))
    plan.update(json.loads(os.environ.get("COMPARE_AGENT_PLAN", "{}")))
    for skill_plan in sorted(Path(".claude/skills").glob("*/agent.json")):
        plan.update(json.loads(skill_plan.read_text(encoding="utf-8")))
    plan.update(plan.get("by_rep", {}).get(os.environ.get("TRIALRUN_REP", ""), {}))
    return plan


def emit(obj: dict[str, Any]) -> None:
    print(json.dumps(obj), flush=True)


def main() -> int:
    task = sys.argv[1] if len(sys.argv) > 1 else ""
    plan = load_plan(task)
    if "record" in plan:
        staged = sorted(p.as_posix() for p in Path(".claude").rglob("*") if p.is_file())
        seen = {"argv": sys.argv, "rep": os.environ.get("TRIALRUN_REP"), "cwd": os.getcwd()}
        Path(plan["record"]).write_text(json.dumps({**seen, "staged": staged}), encoding="utf-8")
    if "spawn" in plan:
        child = subprocess.Popen(["sleep", str(plan["spawn"])], stdout=subprocess.DEVNULL)
        Path("child.pid").write_text(str(child.pid), encoding="utf-8")
    time.sleep(float(plan.get("sleep", 0)))
    if "fail_first" in plan and not Path.cwd().name.endswith(".retry"):
        print("scripted agent: failing the first attempt", file=sys.stderr)
        return int(plan["fail_first"])
    for relpath, text in plan.get("write", {}).items():
        Path(relpath).parent.mkdir(parents=True, exist_ok=True)
        Path(relpath).write_text(text, encoding="utf-8")
    text_mode = plan.get("format") == "text"
    if not text_mode:
        emit({"type": "system", "subtype": "init", "session_id": "scripted", "cwd": os.getcwd()})
    for index, command in enumerate(plan.get("run", [])):
        done = subprocess.run(["bash", "-c", command], capture_output=True, text=True)
        output = done.stdout + done.stderr
        if text_mode:
            print(f"$ {command}\n{output}", end="" if output.endswith("\n") else "\n", flush=True)
            continue
        call_id = f"toolu_{index}"
        use = {"type": "tool_use", "id": call_id, "name": "Bash", "input": {"command": command}}
        emit({"type": "assistant", "message": {"role": "assistant", "content": [use]}})
        result = {"type": "tool_result", "tool_use_id": call_id, "content": output}
        emit(
            {
                "type": "user",
                "message": {
                    "role": "user",
                    "content": [result | {"is_error": done.returncode != 0}],
                },
            }
        )
    say = str(plan.get("say", "done"))
    if text_mode:
        print(say, flush=True)
    else:
        emit(
            {
                "type": "assistant",
                "message": {"role": "assistant", "content": [{"type": "text", "text": say}]},
            }
        )
        usage = {
            "input_tokens": plan.get("tokens_in", 100),
            "output_tokens": plan.get("tokens_out", 20),
        }
        emit(
            {
                "type": "result",
                "subtype": "success",
                "is_error": False,
                "result": say,
                "num_turns": plan.get("turns", 1),
                "duration_ms": plan.get("duration_ms", 1000),
                "total_cost_usd": plan.get("cost_usd", 0.01),
                "usage": usage,
            }
        )
    return int(plan.get("exit", 0))


if __name__ == "__main__":
    sys.exit(main())
