"""A scripted coding agent for ``trialrun attempt`` tests: it replays a plan, one step per attempt.

Usage: ``python scripted.py PLAN.json``. The plan maps the attempt number (``TRIALRUN_ATTEMPT``)
to a step; an attempt without a step does nothing and exits 0. A step may hold:

* ``write``: {relative path: text}, ``write_hex``: {relative path: bytes as hex}
* ``delete``: [relative paths]
* ``stdout``: [lines printed as they are] (e.g. a stream-json transcript)
* ``usage``: [objects appended as JSON lines to TRIALRUN_USAGE_FILE]
* ``sleep``: seconds to sleep after the edits (a hang, for timeout tests)
* ``exit``: the exit code (default 0)

Every run appends ``attempt goal`` to the file named by TRIALRUN_AGENT_LOG when it is set, and
copies TRIALRUN_VERIFY_OUTPUT's text there too, so tests can see what the agent was given.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path


def main() -> int:
    plan = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    attempt = os.environ["TRIALRUN_ATTEMPT"]
    log = os.environ.get("TRIALRUN_AGENT_LOG")
    if log:
        verify_output = Path(os.environ["TRIALRUN_VERIFY_OUTPUT"]).read_text(encoding="utf-8")
        with open(log, "a", encoding="utf-8") as handle:
            entry = {"attempt": attempt, "goal": os.environ["TRIALRUN_GOAL"]}
            entry["verify_output"] = verify_output
            handle.write(json.dumps(entry) + "\n")
    step = plan.get(attempt, {})
    for rel, text in step.get("write", {}).items():
        Path(rel).parent.mkdir(parents=True, exist_ok=True)
        Path(rel).write_text(text, encoding="utf-8")
    for rel, hex_bytes in step.get("write_hex", {}).items():
        Path(rel).parent.mkdir(parents=True, exist_ok=True)
        Path(rel).write_bytes(bytes.fromhex(hex_bytes))
    for rel in step.get("delete", []):
        Path(rel).unlink()
    for line in step.get("stdout", []):
        print(line, flush=True)
    with open(os.environ["TRIALRUN_USAGE_FILE"], "a", encoding="utf-8") as usage:
        for record in step.get("usage", []):
            usage.write(json.dumps(record) + "\n")
    time.sleep(step.get("sleep", 0))
    return int(step.get("exit", 0))


if __name__ == "__main__":
    sys.exit(main())
