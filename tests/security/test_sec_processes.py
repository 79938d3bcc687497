"""Processes and temporary files die with trialrun, and stopping it always means exit 130.

A SIGKILLed run (an OOM kill, a runner's hard stop) used to leave its agents, the pre-started
one and every helper they started running, and its temporary files on disk. Now the kernel
kills each agent with trialrun, and the next run kills the helpers left in the agents' groups
and removes the files, never touching what belongs to a run that still runs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from processes import process_gone

# Every start takes the next number; each agent starts a helper, writes "agent helper" pids to
# pids.N, then sleeps without reading its stdin, as an agent busy in a long tool call would.
STUBBORN_AGENT = """\
import os, subprocess, sys, time
state = sys.argv[1]
n = 1
while True:
    try:
        fd = os.open(os.path.join(state, f"started.{n}"), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        break
    except FileExistsError:
        n += 1
os.close(fd)
helper = subprocess.Popen(["sleep", "300"])
with open(os.path.join(state, f"pids.{n}.part"), "w") as handle:
    handle.write(f"{os.getpid()} {helper.pid}")
os.replace(os.path.join(state, f"pids.{n}.part"), os.path.join(state, f"pids.{n}"))
time.sleep(300)
"""

QUICK_AGENT = """\
import json, sys
sys.stdin.readline()
print(json.dumps({"type": "final_output", "output": {"ok": True}}), flush=True)
"""

TOOLS = "def search(q):\n    return {'hits': []}\n\n\nTOOLS = {'search': search}\n"


def write_suite(root: Path, agent: str, *, mode: str, cases: int, state: Path) -> Path:
    suite = root / "suite"
    (suite / "cases").mkdir(parents=True)
    (suite / "cassettes").mkdir()
    (suite / "agent.py").write_text(agent, encoding="utf-8")
    (suite / "tools.py").write_text(TOOLS, encoding="utf-8")
    (suite / "cassettes" / "t.jsonl").write_text("", encoding="utf-8")
    command = [sys.executable, str(suite / "agent.py"), str(state)]
    (suite / "suite.yaml").write_text(
        f"suite_name: stubborn\nagent_command: {json.dumps(command)}\nmode: {mode}\n"
        "cases_path: cases\ntool_registry: [search]\ntool_module: tools\n"
        "idle_timeout_ms: 600000\nbudgets: {max_wall_ms: 600000}\n",
        encoding="utf-8",
    )
    for index in range(cases):
        case = {"id": f"c{index}", "input": {}, "cassette": "cassettes/t.jsonl"}
        (suite / "cases" / f"c{index}.yaml").write_text(json.dumps(case), encoding="utf-8")
    state.mkdir(exist_ok=True)
    return suite


def environment(temp: Path) -> dict[str, str]:
    """The runs of a test share a temporary directory of their own: their areas are there."""
    temp.mkdir(exist_ok=True)
    return {**os.environ, "TMPDIR": str(temp), "PYTHONWARNINGS": "default"}


def start_run(suite: Path, tmp_path: Path, temp: Path | None = None) -> subprocess.Popen[str]:
    tmp_path.mkdir(exist_ok=True)
    return subprocess.Popen(
        [sys.executable, "-m", "trialrun", "run", str(suite), "--out", str(tmp_path / "out"),
         "--no-baseline"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment(temp or tmp_path / "tmp"),
    )  # fmt: skip


def wait_for(condition: Callable[[], bool], what: str, within_s: float = 60.0) -> None:
    deadline = time.monotonic() + within_s
    while not condition():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.02)


def wait_for_agents(proc: subprocess.Popen[str], state: Path, count: int) -> None:
    """Until the run's ``count`` agents and their helpers run (the run must still be going)."""

    def all_there() -> bool:
        return all((state / f"pids.{n}").exists() for n in range(1, count + 1))

    wait_for(lambda: all_there() or proc.poll() is not None, "agents ran")
    if proc.poll() is not None:
        out, err = proc.communicate()
        raise AssertionError(f"the run ended early ({proc.returncode}): {out}{err}")


def pids(state: Path, n: int) -> tuple[int, int]:
    agent, helper = (state / f"pids.{n}").read_text().split()
    return int(agent), int(helper)


def quick_run(tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """Another, ordinary run after the killed one, sharing its temporary directory."""
    root = tmp_path / "next"
    suite = write_suite(root, QUICK_AGENT, mode="replay", cases=1, state=root / "state")
    return subprocess.run(
        [sys.executable, "-m", "trialrun", "run", str(suite), "--out", str(root / "out"),
         "--no-baseline"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        env=environment(tmp_path / "tmp"),
    )  # fmt: skip


def kill_run(proc: subprocess.Popen[str]) -> None:
    proc.kill()
    proc.communicate(timeout=60)


def temporaries(cassettes: Path) -> list[Path]:
    return [path for path in cassettes.iterdir() if path.name.endswith(".tmp")]


def spawner_of(pid: int) -> int:
    """The pid of trialrun ``pid``'s agent spawner (its child running ``seal_spawner.py``)."""
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            command = (entry / "cmdline").read_bytes()
        except (OSError, IndexError):
            continue
        if int(stat[1]) == pid and b"seal_spawner.py" in command:
            return int(entry.name)
    raise AssertionError(f"trialrun {pid} has no agent spawner")


def watchdog_of(pid: int) -> int:
    """The pid of the process that clears up after trialrun ``pid`` should it be killed."""
    found: list[int] = []

    def look() -> bool:
        for entry in Path("/proc").iterdir():
            try:
                command = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if entry.name.isdigit() and any(f"/run-{pid}-".encode() in p for p in command):
                found.append(int(entry.name))
                return True
        return False

    wait_for(look, f"the watchdog of trialrun {pid} started")
    return found[0]


def test_the_next_run_clears_what_a_killed_run_and_its_watchdog_left(tmp_path: Path) -> None:
    # The worst case: the watchdog is killed too (a kill of every process of the user).
    state = tmp_path / "state"
    suite = write_suite(tmp_path, STUBBORN_AGENT, mode="record", cases=1, state=state)
    proc = start_run(suite, tmp_path)
    wait_for_agents(proc, state, 1)
    agent, helper = pids(state, 1)
    recording = temporaries(suite / "cassettes")
    assert recording, "record mode writes its cassette to a temporary file while the case runs"
    assert recording[0].name.startswith(".t.jsonl.trialrun-")
    os.kill(watchdog_of(proc.pid), signal.SIGKILL)
    # The agent spawner kills its agents once trialrun is gone: stopped first, it cannot.
    spawner = spawner_of(proc.pid)
    os.kill(spawner, signal.SIGSTOP)
    proc.kill()
    proc.wait(timeout=60)
    os.kill(spawner, signal.SIGKILL)
    proc.communicate(timeout=60)  # the spawner held its stderr too
    assert not process_gone(agent, within_s=0.2), "nothing left to clear: the test proves nothing"

    # A run that still runs beside the next one (parallel CI jobs): nothing of it is touched.
    live_root = tmp_path / "live"
    live_state = live_root / "state"
    live_suite = write_suite(live_root, STUBBORN_AGENT, mode="record", cases=1, state=live_state)
    live = start_run(live_suite, live_root, tmp_path / "tmp")
    try:
        wait_for_agents(live, live_state, 1)
        live_agent, live_helper = pids(live_state, 1)
        live_recording = temporaries(live_suite / "cassettes")

        done = quick_run(tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
        assert process_gone(agent, within_s=30), "the killed run's agent runs on"
        assert process_gone(helper, within_s=30), "the helper of the killed run's agent runs on"
        assert temporaries(suite / "cassettes") == []
        assert not process_gone(live_agent, within_s=0.2)
        assert not process_gone(live_helper, within_s=0.2)
        assert temporaries(live_suite / "cassettes") == live_recording
    finally:
        live.send_signal(signal.SIGINT)
        out, err = live.communicate(timeout=60)
    assert live.returncode == 130, out + err
    assert process_gone(live_helper, within_s=30)
    # Each run removed its own area as it ended, and the killed run's went with the sweep.
    assert os.listdir(tmp_path / "tmp" / f"trialrun-{os.getuid()}") == []


def test_a_sigkilled_run_takes_its_agents_their_helpers_and_its_files_along(
    tmp_path: Path,
) -> None:
    # Case c1's agent is started ahead while c0's runs: both are killed, with their helpers,
    # by the killed run's watchdog, without waiting for another run.
    state = tmp_path / "state"
    suite = write_suite(tmp_path, STUBBORN_AGENT, mode="replay", cases=2, state=state)
    (suite / "suite.yaml").write_text(
        (suite / "suite.yaml").read_text() + "mcp_servers:\n  docs:\n    command: [cat]\n"
    )
    (suite / "cassettes" / "t.mcp-docs.jsonl").write_text("", encoding="utf-8")
    proc = start_run(suite, tmp_path)
    wait_for_agents(proc, state, 2)
    started = [pids(state, 1), pids(state, 2)]
    scratch = list((tmp_path / "tmp" / f"trialrun-{os.getuid()}").glob("run-*/trialrun-case-*"))
    assert scratch, "each case has a scratch directory for its MCP configuration"
    kill_run(proc)

    for agent, helper in started:
        assert process_gone(agent, within_s=30), "an agent outlived trialrun's SIGKILL"
        assert process_gone(helper, within_s=30), "a helper outlived trialrun's SIGKILL"
    wait_for(lambda: not any(path.exists() for path in scratch), "the scratch was removed", 30)


def test_sigterm_while_the_suite_still_loads_exits_130(tmp_path: Path) -> None:
    # The cassette is a pipe: reading it in preflight blocks until the test opens its other end,
    # so the signal lands at a known moment, long before any case runs.
    state = tmp_path / "state"
    suite = write_suite(tmp_path, QUICK_AGENT, mode="replay", cases=1, state=state)
    fifo = suite / "cassettes" / "t.jsonl"
    fifo.unlink()
    os.mkfifo(fifo)
    proc = start_run(suite, tmp_path)
    writer = -1

    def reader_is_there() -> bool:
        nonlocal writer
        try:
            writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:  # ENXIO: nobody reads it yet
            return proc.poll() is not None
        return True

    try:
        wait_for(reader_is_there, "trialrun opened the cassette")
        assert proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if writer >= 0:
            os.close(writer)
    assert proc.returncode == 130, out + err
    assert "Traceback" not in err
    assert "Interrupted" in err


def test_sigterm_twice_while_the_cases_stop_exits_130_without_warnings(tmp_path: Path) -> None:
    # A CI runner may repeat its SIGTERM. The second one came while the cases were stopping
    # their agents: the loop closed with agents unreaped (RuntimeWarning from the child watcher)
    # or SIGTERM was back at its default and killed trialrun (143). A few spacings, since the
    # moment the second one lands in the teardown depends on the machine.
    state = tmp_path / "state"
    suite = write_suite(tmp_path, STUBBORN_AGENT, mode="replay", cases=3, state=state)
    for round_no, gap_s in enumerate((0.0, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05) * 2):
        for stale in state.iterdir():
            stale.unlink()
        proc = start_run(suite, tmp_path / f"round{round_no}")
        wait_for_agents(proc, state, 2)
        started = [pids(state, 1), pids(state, 2)]
        proc.send_signal(signal.SIGTERM)
        time.sleep(gap_s)  # not a race with an event: any spacing must give the same outcome
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, f"gap {gap_s}s: {out}{err}"
        assert "Warning" not in err and "Traceback" not in err, f"gap {gap_s}s: {err}"
        # The cases were over: the second one waited for the run's last artifacts.
        (summary,) = (tmp_path / f"round{round_no}" / "out").glob("*/*/summary.json")
        assert json.loads(summary.read_text(encoding="utf-8"))["run"]["interrupted"] is True
        for agent, helper in started:
            assert process_gone(agent) and process_gone(helper)


def area_of(temp: Path, pid: int, started: int, ledger: str, boot: str | None = None) -> Path:
    """An area as the process ``pid`` started at ``started`` would have left it."""
    from trialrun.base.procinfo import boot_id, pid_namespace

    root = temp / f"trialrun-{os.getuid()}"
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    area = root / f"run-{pid}-{started}-{boot or boot_id()}-{pid_namespace()}"
    area.mkdir()
    (area / "ledger").write_text(ledger, encoding="ascii")
    return area


def gone_pid() -> int:
    """A pid that ran a moment ago and runs no more: the owner of a killed run's area."""
    done = subprocess.Popen(["true"])
    done.wait()
    return done.pid


def test_a_sweep_kills_only_what_is_provably_what_the_dead_run_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trialrun.base import leftovers
    from trialrun.base.procinfo import start_time

    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    ours = subprocess.Popen(["sleep", "300"], start_new_session=True)
    recycled = subprocess.Popen(["sleep", "300"], start_new_session=True)
    beside = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        ours_start = start_time(ours.pid)
        recycled_start = start_time(recycled.pid)
        assert ours_start and recycled_start
        left = tmp_path / "work" / ".out.json.trialrun-1-00.tmp"
        left.parent.mkdir()
        left.write_text("half", encoding="utf-8")
        dead = area_of(
            tmp_path / "tmp",
            gone_pid(),
            ours_start,  # any start time: the pid is gone
            f"group\t{ours.pid}\t{ours_start}\n"
            # The pid of a process the dead run started, now another's: a later start time.
            f"group\t{recycled.pid}\t{recycled_start - 1}\n"
            f"path\t{os.fsencode(str(left)).hex()}\n"
            "group\t12",  # torn by the owner's death
        )
        me = os.getpid()
        live = area_of(tmp_path / "tmp", me, start_time(me) or 0, f"group\t{beside.pid}\t1\n")

        assert leftovers.sweep() == 1
        assert process_gone(ours.pid, within_s=30)
        assert not process_gone(recycled.pid, within_s=0.2)
        assert not process_gone(beside.pid, within_s=0.2)
        assert not left.exists() and not dead.exists()
        assert live.exists(), "the area of a process that still runs is left alone"
    finally:
        for child in (ours, recycled, beside):
            child.kill()
            child.wait()


@settings(max_examples=60, deadline=None)
@given(ledger=st.text(alphabet="grouppathndeprcs\t\n0123456789abcdef-x ", max_size=300))
def test_any_ledger_a_dead_run_left_is_cleared_without_an_error(ledger: str) -> None:
    import tempfile

    from trialrun.base import leftovers

    with tempfile.TemporaryDirectory() as temp:
        previous = os.environ.get("TMPDIR")
        os.environ["TMPDIR"] = temp
        try:
            # Another boot: whatever the lines name is not killed, only the files go.
            area = area_of(Path(temp), gone_pid(), 5, ledger, boot="otherboot")
            assert leftovers.sweep() == 1
            assert not area.exists()
        finally:
            if previous is None:
                del os.environ["TMPDIR"]
            else:
                os.environ["TMPDIR"] = previous
