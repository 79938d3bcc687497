"""A scripted trigger selector for ``trialrun compare`` tests: behaviour comes from its inputs.

Usage in compare.yaml: ``triggers: {command: [python, .../selector.py]}``. It reads
``{"catalog": [...], "prompt": ...}`` on stdin and looks the prompt up in the JSON object of the
environment variable ``SELECTOR_PLAN`` (a missing prompt selects nothing). Each prompt's entry,
after merging in its ``by_rep[TRIALRUN_REP]`` entry (per-repetition behaviour), may hold:

* ``select``: the names to answer with (``{"selected": names}``)
* ``raw``: text printed instead of an answer (garbage output)
* ``sleep``: seconds to sleep first (a hang, for timeouts)
* ``exit``: the exit code (default 0)

With ``SELECTOR_RECORD`` set to a file, every call appends {rep, payload} to it as one JSON line.
"""

from __future__ import annotations

import json
import os
import sys
import time


def main() -> int:
    payload = json.loads(sys.stdin.read())
    rep = os.environ.get("TRIALRUN_REP", "")
    record = os.environ.get("SELECTOR_RECORD")
    if record:
        with open(record, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"rep": rep, "payload": payload}) + "\n")
    plan = json.loads(os.environ.get("SELECTOR_PLAN", "{}")).get(payload["prompt"], {})
    plan = {**plan, **plan.get("by_rep", {}).get(rep, {})}
    time.sleep(float(plan.get("sleep", 0)))
    if "raw" in plan:
        print(plan["raw"])
    else:
        print("selector: thinking")  # a log line before the answer, which must be tolerated
        print(json.dumps({"selected": plan.get("select", [])}))
    return int(plan.get("exit", 0))


if __name__ == "__main__":
    sys.exit(main())
