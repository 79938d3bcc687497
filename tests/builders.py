"""Builders the tests share: suites, compare subjects and run folders on disk.

Each builder writes real files (a suite, a subject with its agent) under the folder it is given;
a test changes what it needs after building.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from paths import BEHAVING_AGENT
from trialrun.running.sharding import ShardSpec, shard_case_ids, shard_info

SEARCH_CASSETTE = (
    '{"tool": "search_docs", "args": {"q": "reset password"}, "ok": true, "result": {"hits": []}}\n'
)

# test_run_e2e's cases, one per way an agent misbehaves.
MISBEHAVING = {
    # case id: (status, failure_kind)
    "a_ok": ("pass", None),
    "b_crash": ("error", "agent_crashed"),
    "c_hang": ("fail", "timeout"),
    "d_noise": ("error", "stdout_noise"),
    "e_grandchild": ("fail", "timeout"),
    "f_huge": ("pass", None),
    "g_disallowed": ("fail", "tool_not_allowed"),
    "h_task_error": ("error", "task_error"),
    "i_non_object": ("error", "protocol_error"),
    "j_usage": ("pass", None),
    "k_deep": ("error", "protocol_error"),
}


def make_suite(root: Path) -> Path:
    """A git-tracked suite at ``root/suite`` of the behaving agent's misbehaving cases."""
    suite = root / "suite"
    (suite / "cases").mkdir(parents=True)
    (suite / "cassettes").mkdir()
    (suite / "cassettes/t.jsonl").write_text(SEARCH_CASSETTE * 2, encoding="utf-8")
    (suite / "suite.yaml").write_text(
        "suite_name: misbehaving\n"
        f"agent_command: [{json.dumps(sys.executable)}, {json.dumps(str(BEHAVING_AGENT))}]\n"
        "mode: replay\ncases_path: cases\ntool_registry: [search_docs]\nidle_timeout_ms: 5000\n"
        "kill_grace_ms: 200\nbudgets: {max_wall_ms: 1500}\n"
        "assertions:\n  - type: required_fields\n    fields: [category, reply]\n",
        encoding="utf-8",
    )
    for case_id in MISBEHAVING:
        behaviour = case_id.split("_", 1)[1]
        case: dict[str, Any] = {
            "id": case_id,
            "input": {
                "behaviour": behaviour,
                "ticket": "reset password",
                "pid_file": str(root / f"{case_id}.pid"),
            },
            "cassette": "cassettes/t.jsonl",
        }
        (suite / "cases" / f"{case_id}.yaml").write_text(json.dumps(case), encoding="utf-8")
    subprocess.run(["git", "init", "-q", str(suite)], check=True)
    return suite


def only_run_dir(out: Path) -> Path:
    """The one run directory a run wrote under ``--out``."""
    (run_dir,) = [p for p in out.glob("*/*") if p.is_dir()]
    return run_dir


def run_trialrun(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python -m trialrun ARGS`` in ``cwd``, its output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "trialrun", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


SHARD_AGENT = """\
import json, sys
def send(message):
    sys.stdout.write(json.dumps(message) + "\\n"); sys.stdout.flush()
for line in sys.stdin:
    message = json.loads(line)
    if message["type"] == "task_start":
        behaviour = message["input"]["behaviour"]
        if behaviour == "crash":
            print("agent blew up", file=sys.stderr); sys.exit(3)
        send({"type": "tool_call", "name": "lookup", "call_id": "c1",
              "args": {"q": message["input"]["q"]}})
    elif message["type"] == "tool_result":
        output = {"answer": "x"} if behaviour == "fail" else {"answer": "x", "reply": "ok"}
        send({"type": "usage", "tokens_in": 10, "tokens_out": 5, "cost_usd": 0.001})
        send({"type": "final_output", "output": output}); sys.exit(0)
"""


def behaviour_of(number: int) -> str:
    """How case number ``number`` of a shard suite behaves: pass, fail or crash."""
    return "crash" if number % 11 == 4 else "fail" if number % 7 == 2 else "pass"


def make_shard_suite(root: Path, name: str, count: int) -> Path:
    """test_merge's suite of ``count`` cases at ``root/name``, to run in shards."""
    suite = root / name
    (suite / "cases").mkdir(parents=True)
    (suite / "cassettes").mkdir()
    (suite / "agent.py").write_text(SHARD_AGENT, encoding="utf-8")
    (suite / "suite.yaml").write_text(
        f"suite_name: {name}\n"
        f"agent_command: [{json.dumps(sys.executable)}, agent.py]\n"
        "mode: replay\ncases_path: cases\ntool_registry: [lookup]\n"
        "assertions:\n  - type: required_fields\n    fields: [answer, reply]\n"
        "regression:\n  min_pass_rate: 0.5\n",
        encoding="utf-8",
    )
    for number in range(count):
        case_id = f"case_{number:03d}"
        record = {"tool": "lookup", "args": {"q": case_id}, "ok": True, "result": {"n": number}}
        (suite / "cassettes" / f"{case_id}.jsonl").write_text(json.dumps(record) + "\n")
        case = {
            "id": case_id,
            "input": {"behaviour": behaviour_of(number), "q": case_id},
            "cassette": f"cassettes/{case_id}.jsonl",
        }
        (suite / "cases" / f"{case_id}.yaml").write_text(json.dumps(case), encoding="utf-8")
    return suite


def run_shard(suite: Path, spec: ShardSpec, out: Path, case_ids: list[str]) -> Path:
    """Runs one shard of ``suite`` into ``out``; checks its summary holds that shard's cases."""
    proc = run_trialrun("run", suite, "--shard", str(spec), "--out", out, "-j", "4", cwd=suite)
    assert proc.returncode in (0, 1), proc.stderr
    run_dir = only_run_dir(out)
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    assert summary["shard"] == shard_info(spec, case_ids)
    assert sorted(c["id"] for c in summary["cases"]) == sorted(shard_case_ids(case_ids, spec))
    return run_dir


COMPARE_AGENT = r"""
import json, os, pathlib, sys, time

task, sandbox = sys.argv[1], pathlib.Path(sys.argv[2])
rep = int(os.environ["TRIALRUN_REP"])
skill = sandbox / ".claude" / "skills" / "demo" / "SKILL.md"
arm = skill.read_text().split()[0] if skill.is_file() else "baseline"
if os.environ.get("SCRIPTED_FLIP") == "1" and arm in ("baseline", "candidate"):
    arm = "candidate" if arm == "baseline" else "baseline"
release = os.environ.get("SCRIPTED_WAIT_FOR")
if release and task.startswith("explain"):
    deadline = time.monotonic() + 20
    while not pathlib.Path(release).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
# An arm that takes this long (a real agent's minutes, in little) is seen running on a live
# progress display, whatever the machine's speed: the display redraws four times a second.
time.sleep(float(os.environ.get("SCRIPTED_ARM_SECONDS", "0")))
events = [{"type": "system", "subtype": "init", "skills": []}]

def say(text):
    events.append({"type": "assistant", "message": {"content": [{"type": "text", "text": text}]}})

def bash(command):
    block = {"type": "tool_use", "id": "t", "name": "Bash", "input": {"command": command}}
    events.append({"type": "assistant", "message": {"content": [block]}})

if task.startswith("build"):
    if arm != "baseline":
        (sandbox / "out.txt").write_text("built\n")
        bash("make > out.txt")
    else:
        bash("make -n")
    say("build finished")
elif task.startswith("careful"):
    bash("rm -rf build" if arm == "candidate" and rep == 0 else "rm build/old.o")
    say("cleaned")
elif task.startswith("explain"):
    long_answer = arm != "baseline" and rep == 0
    say("summary: " + ("x" * 40 if long_answer else "y" * 10))
numbers = {
    "baseline": (3, 22800, 0.11), "candidate": (5, 41200, 0.25), "incumbent": (4, 33000, 0.15)
}
turns, duration_ms, cost = numbers[arm]
events.append({"type": "result", "subtype": "success", "num_turns": turns,
               "duration_ms": duration_ms, "total_cost_usd": cost, "result": "done"})
for event in events:
    print(json.dumps(event))
"""

COMPARE_SUBJECT_YAML = """\
name: demo
agent:
  command: [{python}, "{{evals}}/agent.py", "{{task}}", "{{sandbox}}"]
  stage: .claude/skills/{{name}}
  transcript: stream-json
  timeout_minutes: 1
arms:
  incumbent:
    path: incumbent
k: 2
judge:
  command: [{python}, -m, trialrun.compare.fake_judge, --prefer, longer]
seed: 7
"""

COMPARE_SUBJECT_CASES = {
    "build": "task: build the project into out.txt\nchecks:\n  - file_exists: out.txt\n",
    "careful": (
        "task: careful cleanup of build outputs\nchecks:\n  - no_command_matching: 'rm -rf'\n"
    ),
    "explain": (
        "task: explain the change\nchecks:\n  - transcript_mentions: summary\n"
        "judge: the clearer, more complete summary wins\n"
    ),
}


def make_compare_subject(root: Path) -> Path:
    """test_compare_e2e's three-case subject with an incumbent (its docstring has the table)."""
    subject = root / "demo"
    (subject / "evals" / "cases").mkdir(parents=True)
    (subject / "evals" / "incumbent").mkdir()
    (subject / "SKILL.md").write_text("candidate skill\n")
    (subject / "evals" / "incumbent" / "SKILL.md").write_text("incumbent skill\n")
    (subject / "evals" / "agent.py").write_text(COMPARE_AGENT)
    (subject / "evals" / "compare.yaml").write_text(
        COMPARE_SUBJECT_YAML.format(python=json.dumps(sys.executable))
    )
    for name, text in COMPARE_SUBJECT_CASES.items():
        (subject / "evals" / "cases" / f"{name}.yaml").write_text(text)
    return subject
