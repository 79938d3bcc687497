"""A case's receipt events made ahead by a forked child (``ReceiptWriter.emit_ahead``).

What the child writes must be what the writer would have written itself: the same events,
numbered and chained on from where the receipt stood, or none at all (then the caller emits
them). pytest-xdist workers run a thread of their own, where nothing is forked, so the forking
cases run in a fresh interpreter (``trialrun run`` as a user runs it, or a small program); the
same cases in this process show the writer's own path.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from trialrun.base import aside
from trialrun.cli import run_cli
from trialrun.receipt.suite_run import AHEAD_CALLS
from trialrun.receipt.verify import verify_receipt
from trialrun.receipt.writer import ReceiptWriter

forking = pytest.mark.skipif(
    sys.platform != "linux" or len(os.sched_getaffinity(0)) < 2,
    reason="work goes aside only on Linux with two CPUs or more",
)

# Emits a case the way SuiteReceipt does: case_start, then tool calls, one with a secret.
WRITER_PROGRAM = """
import json, sys
from pathlib import Path
from trialrun.receipt.writer import ReceiptWriter

path, scenario = Path(sys.argv[1]), sys.argv[2]
datas = [
    {"attempt": 1, "case": "c1", "name": f"tool{i % 7}", "argsSummary": json.dumps({"i": i}),
     "redacted": False, "durationMs": i / 8, "ok": i % 5 != 0}
    for i in range(1500)
]
datas[3]["argsSummary"] = '{"key":"sk-abcdefghijklmnopqrstuvwxyz123456"}'

def emit(writer):
    writer.emit("case_start", {"case": "c1"})
    writer.emit_each("tool_call", datas)

writer = ReceiptWriter(path)
writer.emit("run_start", {"goal": "g", "verifyCommand": "v"})
took = None
if scenario == "inline":
    emit(writer)
else:
    ahead = writer.emit_ahead(emit)
    if scenario == "moved-on":
        writer.emit("note", {"between": True})
    if scenario == "discard":
        ahead.discard()
    elif scenario == "unbatched":
        took = ahead.take_in()
    else:
        with writer.batch():
            took = ahead.take_in()
    if not took and scenario != "discard":
        emit(writer)
writer.emit("case_end", {"case": "c1"})
writer.close({"stopReason": "completed"})
print(json.dumps({"took": took}))
"""


def program_result(program: str, *args: str) -> Any:
    """Run ``program`` in a fresh interpreter; the JSON it prints."""
    proc = subprocess.run(
        [sys.executable, "-c", program, *args], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def write_receipt(tmp_path: Path, scenario: str) -> tuple[Path, Any]:
    path = tmp_path / f"{scenario}.jsonl"
    return path, program_result(WRITER_PROGRAM, str(path), scenario)["took"]


def events_without_times(path: Path) -> list[tuple[int, str, Any]]:
    """Each event's seq, type and data: what must not depend on who made it."""
    events = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return [(event["seq"], event["type"], event["data"]) for event in events]


@forking
@pytest.mark.parametrize("scenario", ["batched", "unbatched"])
def test_events_made_ahead_are_the_events_made_here(tmp_path: Path, scenario: str) -> None:
    inline, _ = write_receipt(tmp_path, "inline")
    ahead, took = write_receipt(tmp_path, scenario)
    assert took is True
    assert verify_receipt(ahead).ok, verify_receipt(ahead).to_json()
    assert events_without_times(ahead) == events_without_times(inline)
    redacted = events_without_times(ahead)[5][2]
    assert redacted["redacted"] is True and "sk-abc" not in redacted["argsSummary"]


@forking
def test_a_receipt_that_moved_on_meanwhile_takes_nothing_in(tmp_path: Path) -> None:
    path, took = write_receipt(tmp_path, "moved-on")
    assert took is False
    assert verify_receipt(path).ok
    types = [event_type for _, event_type, _ in events_without_times(path)]
    assert types[:3] == ["run_start", "note", "case_start"]
    assert types.count("tool_call") == 1500


@forking
def test_discarded_events_never_reach_the_receipt(tmp_path: Path) -> None:
    path, _ = write_receipt(tmp_path, "discard")
    assert verify_receipt(path).ok
    assert [t for _, t, _ in events_without_times(path)] == ["run_start", "case_end", "run_end"]


def start_case(writer: ReceiptWriter) -> None:
    writer.emit("case_start", {"case": "c"})


def test_without_a_child_nothing_is_taken_in_and_the_caller_emits(tmp_path: Path) -> None:
    """This test process has a thread (pytest-xdist's) or may have: no fork, emit here."""
    import threading

    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        writer = ReceiptWriter(tmp_path / "r.jsonl")
        writer.emit("run_start", {"goal": "g"})
        ahead = writer.emit_ahead(start_case)
        with writer.batch():
            assert ahead.take_in() is False
        assert writer.seq == 1  # nothing was emitted by emit_ahead itself
    finally:
        stop.set()
        thread.join()


def test_a_clock_of_the_callers_own_is_never_forked(tmp_path: Path) -> None:
    writer = ReceiptWriter(tmp_path / "r.jsonl", clock=lambda: 1_790_000_000.0)
    writer.emit("run_start", {"goal": "g"})
    ahead = writer.emit_ahead(start_case)
    assert ahead.take_in() is False


FAILING_PROGRAM = """
import json, sys
from pathlib import Path
from trialrun.errors import ReceiptError
from trialrun.receipt.writer import ReceiptWriter

writer = ReceiptWriter(Path(sys.argv[1]))
writer.emit("run_start", {"goal": "g"})
bad = [{"name": "ok"}] * 1200 + [{"name": {1, 2}}]  # a set is not JSON

def emit(w):
    w.emit_each("tool_call", bad)

ahead = writer.emit_ahead(emit)
forked = ahead._child is not None and ahead._child.forked
with writer.batch():
    took = ahead.take_in()
    try:
        emit(writer)
        error = None
    except ReceiptError as exc:
        error = str(exc)
print(json.dumps({"forked": forked, "took": took, "error": error, "seq": writer.seq}))
"""


@forking
def test_a_child_that_fails_leaves_the_error_to_the_callers_own_emit(tmp_path: Path) -> None:
    result = program_result(FAILING_PROGRAM, str(tmp_path / "r.jsonl"))
    assert result["forked"] is True and result["took"] is False
    assert "data of the tool_call event at seq 1201 is not JSON" in result["error"]
    assert result["seq"] == 1201  # the events before the bad one, as emit_each leaves them


SUITE_RECEIPT_PROGRAM = """
import json, sys
from pathlib import Path
from trialrun.base.results import AgentRun, CaseResult, ToolCall
from trialrun.receipt.suite_run import SuiteReceipt

path, scenario = Path(sys.argv[1]), sys.argv[2]
receipt = SuiteReceipt(path, suite_name="s", command_line="c", repository=path.parent)

def case(case_id, calls):
    run = AgentRun(case_id=case_id, tool_calls=[
        ToolCall(f"c{i}", "lookup", {"q": i}, True, duration_ms=0.5) for i in range(calls)])
    return run, CaseResult(case_id=case_id, status="pass", run=run)

written = []
run1, result1 = case("big", 1200)
receipt.prepare_case("big", run1)
receipt.record_case(result1, write_trace=lambda: written.append("big") or "a" * 64)
after_record = path.read_text().count("\\n")  # the big case's events may still be in the making
if scenario == "interrupted":
    receipt.complete()
else:
    run2, result2 = case("small", 3)
    receipt.prepare_case("small", run2)
    receipt.record_case(result2, write_trace=lambda: written.append("small") or "b" * 64)
    receipt.finish([result1, result2], verified=True)
print(json.dumps({"written": written, "after_record": after_record}))
"""


@forking
@pytest.mark.parametrize("scenario", ["two cases", "interrupted"])
def test_a_case_made_ahead_is_completed_by_the_next_use_of_the_receipt(
    tmp_path: Path, scenario: str
) -> None:
    path = tmp_path / "receipt.jsonl"
    result = program_result(SUITE_RECEIPT_PROGRAM, str(path), scenario)
    assert result["after_record"] == 1  # run_start only: the rest waited for the child
    events = events_without_times(path)
    types = [event_type for _, event_type, _ in events]
    big = ["case_start", *["tool_call"] * 1200, "case_end"]
    if scenario == "interrupted":
        assert result["written"] == ["big"]
        assert types == ["run_start", *big]
        assert verify_receipt(path).reason == "truncated"
    else:
        assert result["written"] == ["big", "small"]
        assert types == ["run_start", *big, "case_start", *["tool_call"] * 3, "case_end", "run_end"]
        assert verify_receipt(path).ok
    ends = [data for _, event_type, data in events if event_type == "case_end"]
    assert ends[0]["traceSha256"] == "a" * 64


# ---- a whole run -------------------------------------------------------------------------------

AGENT = """
import json, sys
lines = iter(sys.stdin)
start = json.loads(next(lines))
calls = start["input"]["calls"]
for i in range(calls):
    args = {"q": f"q-{i}"}
    if i == 7:
        args["token"] = "sk-abcdefghijklmnopqrstuvwxyz123456"
    sys.stdout.write(json.dumps({"type": "tool_call", "name": "lookup", "call_id": f"c{i}",
                                 "args": args}) + "\\n")
    sys.stdout.flush()
    json.loads(next(lines))
sys.stdout.write(json.dumps({"type": "final_output", "output": {"calls": calls}}) + "\\n")
"""


# Counts the children trialrun forks, then runs it as its console script does. On a loaded
# machine the report's warm-up thread may still run when a short conversation ends (then the
# events are made in the process, correctly but not aside): it waits for that thread first.
COUNTING_CLI = """
import os, sys, time
from trialrun.base import aside
forks = []
start = aside.Aside._start
can_fork = aside._can_fork
def counted(self, work):
    start(self, work)
    forks.append(self.forked)
    sys.stderr.write(f"forked: {forks}\\n")
def alone_then_can_fork():
    deadline = time.monotonic() + 20
    while len(os.listdir("/proc/self/task")) > 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    return can_fork()
aside.Aside._start = counted
aside._can_fork = alone_then_can_fork
from trialrun.cli import main
sys.argv[0] = "trialrun"
main()
"""


def counting_run(*args: str) -> str:
    """``trialrun *args`` through ``COUNTING_CLI``, which must succeed; its stderr."""
    proc = subprocess.run(
        [sys.executable, "-c", COUNTING_CLI, *args], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stderr


def deep_suite(root: Path, *calls: int) -> Path:
    """A replay suite of one case per ``calls``: case ``c<n>`` makes that many calls."""
    suite = root / "suite"
    (suite / "cases").mkdir(parents=True)
    (suite / "cassettes").mkdir()
    (suite / "agent.py").write_text(textwrap.dedent(AGENT))
    (suite / "suite.yaml").write_text(
        "suite_name: deep\n"
        f"agent_command: {json.dumps([sys.executable, 'agent.py'])}\n"
        "mode: replay\ncases_path: cases\ntool_registry: [lookup]\n"
    )
    for n, count in enumerate(calls, start=1):
        (suite / "cases" / f"c{n}.yaml").write_text(
            f"id: c{n}\ninput:\n  calls: {count}\ncassette: cassettes/c{n}.jsonl\n"
        )
        entries = []
        for i in range(count):
            args = {"q": f"q-{i}"}
            if i == 7:
                args["token"] = "sk-abcdefghijklmnopqrstuvwxyz123456"
            entries.append(json.dumps({"tool": "lookup", "args": args, "ok": True, "result": i}))
        (suite / "cassettes" / f"c{n}.jsonl").write_text("\n".join(entries) + "\n")
    return suite


def only_receipt(out: Path) -> Path:
    (receipt,) = out.glob("deep/*/receipt.jsonl")
    return receipt


def comparable(receipt: Path) -> list[tuple[int, str, Any]]:
    """The events of a run, less what differs from one run to the next."""
    events = events_without_times(receipt)
    for _, event_type, data in events:
        if event_type == "run_start":
            data.pop("verifyCommand")
        if event_type == "case_end":
            for key in ("wallMs", "startupMs", "traceSha256"):
                data.pop(key)
        if event_type == "tool_call":
            data.pop("durationMs")
    return events


@forking
def test_a_run_of_many_calls_makes_its_receipt_events_ahead_and_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    suite = deep_suite(tmp_path, AHEAD_CALLS + 200)
    assert "forked: [True]" in counting_run("run", str(suite), "--out", str(tmp_path / "a"))
    ahead = only_receipt(tmp_path / "a")
    assert verify_receipt(ahead).ok, verify_receipt(ahead).to_json()

    monkeypatch.setattr(aside, "_can_fork", lambda: False)
    assert run_cli(["run", str(suite), "--out", str(tmp_path / "b")]) == 0  # made here
    here = only_receipt(tmp_path / "b")
    assert comparable(ahead) == comparable(here)
    calls = [data for _, event_type, data in comparable(ahead) if event_type == "tool_call"]
    assert len(calls) == AHEAD_CALLS + 200
    assert calls[7]["redacted"] is True and "sk-abc" not in calls[7]["argsSummary"]
    assert calls[8]["redacted"] is False

    # run.jsonl's trace hash in case_end is the one of the file actually written.
    case_end = next(data for _, kind, data in events_without_times(ahead) if kind == "case_end")
    lines = (ahead.parent / "run.jsonl").read_bytes()
    assert case_end["traceSha256"] == hashlib.sha256(lines).hexdigest()


@forking
def test_a_run_of_few_calls_forks_nothing(tmp_path: Path) -> None:
    suite = deep_suite(tmp_path, 20)
    assert "forked" not in counting_run("run", str(suite), "--out", str(tmp_path / "a"))
    assert verify_receipt(only_receipt(tmp_path / "a")).ok


@forking
def test_cases_of_many_calls_side_by_side_leave_the_receipt_of_one_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With -j 2 a case may end while another converses (no fork then) or before the one
    recorded ahead of it: whatever was made aside, the receipt is the one -j 1 writes here."""
    suite = deep_suite(tmp_path, AHEAD_CALLS + 50, AHEAD_CALLS + 100, 30)
    counting_run("run", str(suite), "-j", "2", "--out", str(tmp_path / "a"))
    side_by_side = only_receipt(tmp_path / "a")
    assert verify_receipt(side_by_side).ok, verify_receipt(side_by_side).to_json()

    monkeypatch.setattr(aside, "_can_fork", lambda: False)
    assert run_cli(["run", str(suite), "--out", str(tmp_path / "b")]) == 0
    assert comparable(side_by_side) == comparable(only_receipt(tmp_path / "b"))
