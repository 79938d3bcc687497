"""A fake agent whose behaviour comes from the case input's `behaviour` key.

ok           one search_docs call, then a valid final output
crash        traceback on stderr, exit 3, no output
hang         reads task_start, then sleeps forever
noise        prints "Loading model..." on stdout first
grandchild   starts `sleep 300` (pid written to input.pid_file), then hangs
huge         a 6 MB final output
disallowed   calls a tool outside the registry
task_error   reports a task_error
non_object   final_output whose output is a list
usage        reports usage then answers like ok
deep         calls search_docs with arguments nested 500 levels deep
"""

import json
import subprocess
import sys
import time


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main():
    start = json.loads(sys.stdin.readline())
    task = start["input"]
    behaviour = task.get("behaviour", "ok")
    if behaviour == "crash":
        raise RuntimeError("agent blew up on purpose")
    if behaviour == "hang":
        time.sleep(300)
    if behaviour == "noise":
        print("Loading model...", flush=True)
    if behaviour == "grandchild":
        child = subprocess.Popen(["sleep", "300"])
        with open(task["pid_file"], "w") as handle:
            handle.write(str(child.pid))
        time.sleep(300)
    if behaviour == "disallowed":
        send({"type": "tool_call", "name": "delete_everything", "call_id": "c1", "args": {}})
        sys.stdin.readline()
    if behaviour == "deep":
        sys.stdout.write(
            '{"type": "tool_call", "name": "search_docs", "call_id": "c1", "args": {"q": '
            + "[" * 500
            + "]" * 500
            + "}}\n"
        )
        sys.stdout.flush()
        sys.stdin.readline()
    if behaviour == "task_error":
        send({"type": "task_error", "message": "cannot triage this"})
        return
    if behaviour == "usage":
        send(
            {"type": "usage", "tokens_in": 10, "tokens_out": 20, "cost_usd": 0.001, "model": "fake"}
        )
    send(
        {
            "type": "tool_call",
            "name": "search_docs",
            "call_id": "c1",
            "args": {"q": task.get("ticket", "")},
        }
    )
    json.loads(sys.stdin.readline())
    if behaviour == "huge":
        send({"type": "final_output", "output": {"category": "account", "reply": "x" * 6_000_000}})
    elif behaviour == "non_object":
        send({"type": "final_output", "output": ["not", "an", "object"]})
    else:
        send({"type": "final_output", "output": {"category": "account", "reply": "done"}})


if __name__ == "__main__":
    main()
