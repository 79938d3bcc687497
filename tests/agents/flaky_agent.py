"""An agent that fails on some of its runs, on purpose and reproducibly.

Each run adds a line to the counter file named by its input's ``counter`` and reads its run
number from the count. On the run numbers listed in ``fail_on`` it leaves ``reply`` out of
its answer (a ``required_fields`` assertion fails); on those in ``crash_on`` it exits 3 with
a line on stderr. So "fails about one time in three" is a list, and a test is never random.
"""

import json
import sys
from pathlib import Path


def send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    message = json.loads(line)
    if message["type"] != "task_start":
        continue
    task = message["input"]
    counter = Path(task["counter"])
    with counter.open("a", encoding="utf-8") as file:
        file.write("run\n")
    number = len(counter.read_text(encoding="utf-8").splitlines())
    if number in task.get("crash_on", []):
        print(f"flaky agent: crashing on run {number}", file=sys.stderr)
        sys.exit(3)
    print(f"flaky agent: run {number}", file=sys.stderr)
    output = {"category": "account", "run": number}
    if number not in task.get("fail_on", []):
        output["reply"] = "done"
    send({"type": "final_output", "output": output})
    sys.exit(0)
