"""An agent that tells the tests when it started, and can misbehave before or after task_start.

    prestart_agent.py STATE_DIR

At start-up it learns its number N (the Nth agent of the run: agents are spawned in case order,
each only once the one before it runs this program) and creates STATE_DIR/started.N, which holds
its pid and how many agents of the run were starting or running at that moment, itself included.
STATE_DIR/plan.json, if present, maps N to what it does before reading its task_start:
  {"startup_s": 1.5}     sleeps (a slow import), then creates STATE_DIR/ready.N
  {"crash": true}        exits with code 3 without reading task_start
Every agent that does not crash starts a grandchild (``sleep 300``), its pid in STATE_DIR/child.N.

After task_start, its input decides: ``wait_for`` (a file name in STATE_DIR to wait for, up to
20 s), ``crash`` (exit 1), ``hang`` (sleep), ``sleep_s``; then one ``lookup`` tool call with
``{"q": <case>}`` and the final output ``{"case": <case>, "n": N, "hit": <tool result>}``.
STATE_DIR/done.N is created just before the final output.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from _spawn_order import spawn_number

state = Path(sys.argv[1])
AGENT_NAME = Path(__file__).name.encode()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


def busy_agents() -> int:
    count = 0
    for started in state.glob("started.*"):
        number = started.name.split(".", 1)[1]
        if (state / f"done.{number}").exists():
            continue
        first = started.read_text().split(" ", 1)[0]
        if first.isdigit() and alive(int(first)):
            count += 1
    return count


def stat_fields(pid: int) -> list[str]:
    """The fields of /proc/PID/stat after the command name (field 3, the state, comes first)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def siblings() -> dict[int, int]:
    """The other agents the runner started that are still running (from /proc): pid -> start."""
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat_fields(int(stat.parent.name))
            cmdline = (stat.parent / "cmdline").read_bytes()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == os.getppid() and AGENT_NAME in cmdline:
            found[int(stat.parent.name)] = int(fields[19])
    return found


PID_MAX = int(Path("/proc/sys/kernel/pid_max").read_text())


def claim_number() -> int:
    """N, from the order the runner spawned its agents in.

    Agents may start running in any order, so N counts the agents spawned before this one: those
    that wrote their pid file, and those still running that have not written it yet.
    """
    me = os.getpid()
    my_start = int(stat_fields(me)[19])
    written = state / f".pid.{me}"
    written.write_text(str(my_start))
    written.rename(state / f"pid.{me}")  # whole, so an agent never reads a half-written file
    spawned = siblings()
    for path in state.glob("pid.*"):
        spawned[int(path.name.split(".")[1])] = int(path.read_text())
    number = spawn_number(me, spawned, PID_MAX)
    (state / f"started.{number}").write_text(f"{me} ")
    return number


n = claim_number()
with open(state / f"started.{n}", "a") as record:
    record.write(str(busy_agents()))
plan_file = state / "plan.json"
plan = json.loads(plan_file.read_text()).get(str(n), {}) if plan_file.exists() else {}
if plan.get("crash"):
    print(f"agent {n}: crashing before task_start", file=sys.stderr, flush=True)
    sys.exit(3)
child = subprocess.Popen(["sleep", "300"])
(state / f".child.{n}").write_text(str(child.pid))
(state / f".child.{n}").rename(state / f"child.{n}")  # whole when it appears
if plan.get("startup_s"):
    time.sleep(plan["startup_s"])
    (state / f"ready.{n}").write_text("")


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


task = json.loads(sys.stdin.readline())
given = task["input"]
if given.get("wait_for"):
    deadline = time.monotonic() + 20
    while not (state / given["wait_for"]).exists() and time.monotonic() < deadline:
        time.sleep(0.02)
if given.get("crash"):
    sys.exit(1)
if given.get("hang"):
    time.sleep(300)
time.sleep(given.get("sleep_s", 0))
send({"type": "tool_call", "name": "lookup", "call_id": "c1", "args": {"q": given["case"]}})
answer = json.loads(sys.stdin.readline())
(state / f"done.{n}").write_text("")
send({"type": "final_output", "output": {"case": given["case"], "n": n, "hit": answer["result"]}})
