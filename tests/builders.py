"""Builders the tests share: suites, compare subjects, trialrun as a subprocess.

``write_suite`` and ``write_subject`` write real files under the folder they are given, from
what differs between tests; the ``make_*`` builders are the suites and subjects several test
files run. A test changes what it needs after building.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from paths import AGENTS_DIR, BEHAVING_AGENT
from trialrun.cli import run_cli
from trialrun.gateway.cassette import Recording
from trialrun.running.sharding import ShardSpec, shard_case_ids, shard_info

HANG_GUARD_S = 120.0
"""How long a test waits for what must happen (a process to exit, an answer) before it calls it
a hang. Generous on purpose: the tests pass on a loaded 2-core machine, and this bound is never a
measurement of how fast anything is."""


def write_files(root: Path, files: Mapping[str, str]) -> None:
    """Writes each ``relative path -> text`` of ``files`` under ``root``, making its folders."""
    for relpath, text in files.items():
        path = root / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def write_suite(
    root: Path,
    *,
    name: str,
    agent: Sequence[str | Path],
    tools: Sequence[str],
    cases: Mapping[str, Mapping[str, Any]] | None = None,
    settings: str = "",
    mode: str = "replay",
    cassettes: Mapping[str, str] | None = None,
    files: Mapping[str, str] | None = None,
    folder: str = "suite",
    git: bool = False,
) -> Path:
    """A suite at ``root/folder``: suite.yaml, ``cases/<id>.yaml`` and what else it is given.

    ``agent`` is the agent command and ``tools`` the tool registry; ``settings`` is more
    suite.yaml after the keys every suite has. ``cases`` maps a case id to the rest of its case
    (input, cassette, budgets). ``cassettes`` (names under ``cassettes/``, which exists only when
    given) and ``files`` (paths in the suite) map to their text. ``git``: the suite is a
    repository of its own, as the provenance of a run reads it.
    """
    suite = root / folder
    (suite / "cases").mkdir(parents=True)
    if cassettes is not None:
        (suite / "cassettes").mkdir()
        write_files(suite / "cassettes", cassettes)
    write_files(suite, files or {})
    (suite / "suite.yaml").write_text(
        f"suite_name: {name}\n"
        f"agent_command: {json.dumps([str(part) for part in agent])}\n"
        f"mode: {mode}\ncases_path: cases\ntool_registry: [{', '.join(tools)}]\n" + settings,
        encoding="utf-8",
    )
    for case_id, case in (cases or {}).items():
        text = json.dumps({"id": case_id, **case})
        (suite / "cases" / f"{case_id}.yaml").write_text(text, encoding="utf-8")
    if git:
        subprocess.run(["git", "init", "-q", str(suite)], check=True)
    return suite


def write_subject(
    subject: Path,
    compare_yaml: str,
    *,
    cases: Mapping[str, str] | None = None,
    files: Mapping[str, str] | None = None,
) -> Path:
    """A compare subject at ``subject``: ``evals/compare.yaml``, its cases and other files.

    ``cases`` maps a case name to the text of ``evals/cases/<name>.yaml`` (the folder exists
    only when given); ``files`` maps paths in the subject (``SKILL.md``, the agent) to text.
    """
    write_files(subject, {"evals/compare.yaml": compare_yaml, **(files or {})})
    if cases is not None:
        (subject / "evals" / "cases").mkdir(parents=True, exist_ok=True)
        write_files(subject / "evals" / "cases", {f"{n}.yaml": text for n, text in cases.items()})
    return subject


def only_run_dir(out: Path) -> Path:
    """The one run directory a run wrote under ``--out``."""
    (run_dir,) = [p for p in out.glob("*/*") if p.is_dir()]
    return run_dir


def row_table(receipt: dict[str, Any]) -> list[tuple[str, int, str, str, str]]:
    """A compare receipt's rows: (case, rep, versus, outcome, decided by)."""
    return [
        (
            entry["case"],
            entry["rep"],
            name.removeprefix("candidate-vs-"),
            row["outcome"],
            row["decided_by"],
        )
        for entry in receipt["per_case"]
        for name, row in entry["outcomes"].items()
    ]


def run_trialrun(
    *args: str | Path,
    cwd: Path,
    env: Mapping[str, str | None] | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """``python -m trialrun ARGS`` in ``cwd``, its output captured as text.

    ``env`` changes the test's environment for this run only: a name given None is unset.
    """
    full = dict(os.environ)
    for key, value in (env or {}).items():
        if value is None:
            full.pop(key, None)
        else:
            full[key] = value
    return subprocess.run(
        [sys.executable, "-m", "trialrun", *map(str, args)],
        cwd=cwd,
        env=full,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


class Outcome(NamedTuple):
    """What one in-process CLI call gave: its exit code and its output (``code, out, err =``
    unpacks it)."""

    code: int
    out: str
    err: str


def call_cli(argv: Sequence[str], capsys: pytest.CaptureFixture[str] | None = None) -> Outcome:
    """``trialrun ARGV`` in this process; output printed before the call is not counted.

    Without ``capsys`` (a fixture wider than one test cannot have it) the output is caught by
    replacing ``sys.stdout`` and ``sys.stderr`` for the call.
    """
    if capsys is None:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = run_cli(list(argv))
        return Outcome(code, out.getvalue(), err.getvalue())
    capsys.readouterr()
    code = run_cli(list(argv))
    captured = capsys.readouterr()
    return Outcome(code, captured.out, captured.err)


def make_cli_inputs(root: Path) -> Path:
    """Valid inputs made by the CLI itself under ``root``: ``suite/`` (the scaffold's demo),
    ``run/`` (a one-shard run of it, which merge also takes) and ``keys/`` (a signing key pair).
    """
    assert run_cli(["init", "--path", str(root / "scaffold")]) == 0
    shutil.copytree(root / "scaffold" / "demo", root / "suite")
    out = root / "runs"
    # One shard of one: merge needs a shard run; every other command takes it as a run.
    argv = ["run", str(root / "suite"), "--no-baseline", "--out", str(out), "--shard", "1/1"]
    assert run_cli(argv) == 0
    (run_dir,) = (out / "demo").iterdir()
    shutil.copytree(run_dir, root / "run")
    assert run_cli(["receipt", "keygen", str(root / "keys")]) == 0
    return root


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
    cases = {
        case_id: {
            "input": {
                "behaviour": case_id.split("_", 1)[1],
                "ticket": "reset password",
                "pid_file": str(root / f"{case_id}.pid"),
            },
            "cassette": "cassettes/t.jsonl",
            # Only the agents that never finish meet the wall-time limit: on a loaded machine a
            # well-behaved agent may take seconds to start, and must not time out.
            **({"budgets": {"max_wall_ms": 1500}} if kind == "timeout" else {}),
        }
        for case_id, (_, kind) in MISBEHAVING.items()
    }
    return write_suite(
        root,
        name="misbehaving",
        agent=[sys.executable, BEHAVING_AGENT],
        tools=["search_docs"],
        cases=cases,
        cassettes={"t.jsonl": SEARCH_CASSETTE * 2},
        settings="idle_timeout_ms: 5000\nkill_grace_ms: 200\nbudgets: {max_wall_ms: 60000}\n"
        "assertions:\n  - type: required_fields\n    fields: [category, reply]\n",
        git=True,
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
    case_ids = [f"case_{number:03d}" for number in range(count)]
    cassettes = {
        f"{case_id}.jsonl": json.dumps(
            {"tool": "lookup", "args": {"q": case_id}, "ok": True, "result": {"n": number}}
        )
        + "\n"
        for number, case_id in enumerate(case_ids)
    }
    cases = {
        case_id: {
            "input": {"behaviour": behaviour_of(number), "q": case_id},
            "cassette": f"cassettes/{case_id}.jsonl",
        }
        for number, case_id in enumerate(case_ids)
    }
    return write_suite(
        root,
        name=name,
        agent=[sys.executable, "agent.py"],
        tools=["lookup"],
        cases=cases,
        cassettes=cassettes,
        files={"agent.py": SHARD_AGENT},
        settings="assertions:\n  - type: required_fields\n    fields: [answer, reply]\n"
        "regression:\n  min_pass_rate: 0.5\n",
        folder=name,
    )


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
    return write_subject(
        root / "demo",
        COMPARE_SUBJECT_YAML.format(python=json.dumps(sys.executable)),
        cases=COMPARE_SUBJECT_CASES,
        files={
            "SKILL.md": "candidate skill\n",
            "evals/incumbent/SKILL.md": "incumbent skill\n",
            "evals/agent.py": COMPARE_AGENT,
        },
    )


RESET_CHAT = [{"role": "user", "content": "reset password"}]
"""The messages of the recorded chat calls that ``chat_recording`` builds."""


def chat_recording(model: str, content: str) -> Recording:
    """A recorded OpenAI chat completion of ``RESET_CHAT`` by ``model`` answering ``content``."""
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
    }
    return Recording(
        provider="openai",
        method="POST",
        path="/v1/chat/completions",
        request={"model": model, "messages": RESET_CHAT},
        status=200,
        content_type="application/json",
        body=json.dumps(body),
    )


def flaky_suite(
    root: Path, cases: Mapping[str, Mapping[str, Any]], settings: str = "", name: str = "flaky"
) -> Path:
    """A replay suite of ``tests/agents/flaky_agent.py``, which counts its runs in a file and
    fails (``fail_on``) or crashes (``crash_on``) on the run numbers ``cases[id]`` lists."""
    return write_suite(
        root,
        name=name,
        agent=[sys.executable, AGENTS_DIR / "flaky_agent.py"],
        tools=["search_docs"],
        cases={
            case_id: {
                "input": {"counter": str(root / f"{case_id}.count"), **given},
                "cassette": "cassettes/empty.jsonl",
            }
            for case_id, given in cases.items()
        },
        cassettes={"empty.jsonl": ""},
        settings="assertions:\n  - type: required_fields\n    fields: [category, reply]\n"
        + settings,
    )
