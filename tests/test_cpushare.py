"""cpushare: the answering thread and the agent on one CPU while they take turns (Linux)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest

from trialrun.conversation import cpushare
from trialrun.conversation.cpushare import RESHARE_S, SHARE_AFTER, SLOW_ANSWER_S, CpuShare
from trialrun.conversation.lines import LineReader
from trialrun.conversation.pump import LentPipes
from trialrun.conversation.session import Limits, run_agent
from trialrun.conversation.spawn import Spawn

pytestmark = pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs sched_setaffinity and at least two CPUs",
)

_T = TypeVar("_T")

# A stand-in agent: on "start" it starts a thread and a child process (both inherit the CPUs
# its main thread has at that moment) and prints their ids; on "own" its main thread picks its
# CPUs itself; on "cpus" it prints them.
AGENT = r"""
import os, subprocess, sys, threading, time
children = []
for line in sys.stdin:
    command = line.split()
    if command[0] == "start":
        ready = threading.Event()
        tids = []
        def work():
            tids.append(threading.get_native_id())
            ready.set()
            time.sleep(60)
        threading.Thread(target=work, daemon=True).start()
        ready.wait()
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        children.append(child)
        print(tids[0], child.pid, flush=True)
    elif command[0] == "own":
        os.sched_setaffinity(0, {int(cpu) for cpu in command[1:]})
        print("ok", flush=True)
    elif command[0] == "cpus":
        print(*sorted(os.sched_getaffinity(0)), flush=True)
for child in children:
    child.kill()
"""


@pytest.fixture(autouse=True)
def no_share_left() -> Iterator[None]:
    """Each test ends every share it starts; a failed one must not leave its count behind."""
    yield
    left = dict(cpushare._shares_per_cpu)
    cpushare._shares_per_cpu.clear()
    assert left == {}


@pytest.fixture
def agent() -> Iterator[subprocess.Popen[str]]:
    process = subprocess.Popen(
        [sys.executable, "-c", AGENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        yield process
    finally:
        assert process.stdin is not None
        process.stdin.close()
        process.wait(10)


def ask(agent: subprocess.Popen[str], command: str) -> list[str]:
    assert agent.stdin is not None and agent.stdout is not None
    agent.stdin.write(command + "\n")
    agent.stdin.flush()
    return agent.stdout.readline().split()


def on_thread(work: Callable[[], _T]) -> _T:
    """``work`` on a thread of its own, as the lending thread is: its CPUs are its own."""
    results: list[Any] = []
    thread = threading.Thread(target=lambda: results.append(work()))
    thread.start()
    thread.join()
    return results[0]  # type: ignore[no-any-return]


ALL = os.sched_getaffinity(0)


def test_the_thread_and_the_agent_share_one_cpu_until_the_end(
    agent: subprocess.Popen[str],
) -> None:
    share = CpuShare(agent.pid)

    def started() -> tuple[set[int], set[int]]:
        share.start()
        return os.sched_getaffinity(0), os.sched_getaffinity(agent.pid)

    own, theirs = on_thread(started)
    assert share.active
    assert len(own) == 1
    assert theirs == own
    assert ask(agent, "cpus") == [str(cpu) for cpu in own]

    share.end()
    assert not share.active
    assert os.sched_getaffinity(agent.pid) == ALL
    share.end()  # once is enough; again is nothing


def test_stepping_back_gives_the_threads_and_processes_the_agent_started_their_cpus_back(
    agent: subprocess.Popen[str],
) -> None:
    share = CpuShare(agent.pid)
    on_thread(share.start)
    tid, child = (int(n) for n in ask(agent, "start"))
    shared = os.sched_getaffinity(agent.pid)
    assert len(shared) == 1
    assert os.sched_getaffinity(tid) == shared
    assert os.sched_getaffinity(child) == shared

    own_after = on_thread(lambda: (share.step_back(), os.sched_getaffinity(0))[1])
    assert not share.active
    assert own_after == ALL
    assert os.sched_getaffinity(agent.pid) == ALL
    assert os.sched_getaffinity(tid) == ALL
    assert os.sched_getaffinity(child) == ALL


def test_cpus_the_agent_chose_itself_meanwhile_are_left_alone(
    agent: subprocess.Popen[str],
) -> None:
    share = CpuShare(agent.pid)
    on_thread(share.start)
    chosen = sorted(ALL)[:2]
    assert ask(agent, "own " + " ".join(map(str, chosen))) == ["ok"]
    share.end()
    assert os.sched_getaffinity(agent.pid) == set(chosen)


def test_the_cpu_the_thread_runs_on_is_taken_when_no_conversation_shares_it(
    agent: subprocess.Popen[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for here in sorted(ALL)[:2]:
        monkeypatch.setattr(cpushare, "_current_cpu", lambda here=here: here)
        share = CpuShare(agent.pid)
        assert on_thread(lambda share=share: (share.start(), os.sched_getaffinity(0))[1]) == {here}
        share.end()


def test_the_current_cpu_is_read_from_proc() -> None:
    for cpu in sorted(ALL)[:2]:

        def pinned_reads(cpu: int = cpu) -> int | None:
            os.sched_setaffinity(0, {cpu})
            return cpushare._current_cpu()

        assert on_thread(pinned_reads) == cpu


def test_an_agent_held_to_one_cpu_is_followed_there(agent: subprocess.Popen[str]) -> None:
    last = max(ALL)
    os.sched_setaffinity(agent.pid, {last})
    share = CpuShare(agent.pid)
    own = on_thread(lambda: (share.start(), os.sched_getaffinity(0))[1])
    assert own == {last}
    share.end()
    assert os.sched_getaffinity(agent.pid) == {last}  # what it had


def test_two_conversations_at_once_take_different_cpus(agent: subprocess.Popen[str]) -> None:
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) as other:
        try:
            first, second = CpuShare(agent.pid), CpuShare(other.pid)
            on_thread(first.start)
            on_thread(second.start)
            assert os.sched_getaffinity(agent.pid) != os.sched_getaffinity(other.pid)
            first.end()
            second.end()
        finally:
            other.kill()


def test_nothing_is_shared_where_it_cannot_be(agent: subprocess.Popen[str]) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    share = CpuShare(gone.pid)
    on_thread(share.start)
    assert not share.active  # no such process (any more)

    def shares_from_one_cpu() -> bool:
        os.sched_setaffinity(0, {min(ALL)})
        share = CpuShare(agent.pid)
        share.start()
        return share.active

    assert not on_thread(shares_from_one_cpu)  # the thread may use one CPU only
    os.sched_setaffinity(agent.pid, {max(ALL)})
    assert not on_thread(shares_from_one_cpu)  # and none the agent may use
    assert os.sched_getaffinity(agent.pid) == {max(ALL)}


@pytest.fixture
def lent(agent: subprocess.Popen[str]) -> Iterator[tuple[LentPipes, int]]:
    """LentPipes sharing a CPU with ``agent``; the other end of its message pipe."""
    out_r, out_w = os.pipe()
    in_r, in_w = os.pipe()
    pipes = LentPipes(LineReader(1 << 20), out_r, in_w, agent.pid)
    try:
        yield pipes, out_w
    finally:
        pipes.close()
        for fd in (out_r, out_w, in_r, in_w):
            os.close(fd)


def quick_messages(pipes: LentPipes, agent_stdout: int, count: int) -> None:
    """``count`` messages that were waiting when the thread looked: as quick as it gets."""
    for _ in range(count):
        os.write(agent_stdout, b"{}\n")
        assert pipes.fill(10) == "ready"


def shared(pipes: LentPipes) -> bool:
    return pipes._share is not None and pipes._share.active


def test_sharing_begins_after_share_after_quick_messages(
    agent: subprocess.Popen[str], lent: tuple[LentPipes, int]
) -> None:
    pipes, agent_stdout = lent

    def converse() -> tuple[bool, bool, set[int]]:
        quick_messages(pipes, agent_stdout, SHARE_AFTER - 1)
        before = shared(pipes)  # a conversation of a few calls never pays for moving
        quick_messages(pipes, agent_stdout, 1)
        return before, shared(pipes), os.sched_getaffinity(0)

    before, after, own = on_thread(converse)
    assert not before
    assert after
    assert len(own) == 1
    assert os.sched_getaffinity(agent.pid) == own


def test_a_slow_agent_gets_its_cpus_back_and_the_wait_still_runs_its_whole_time(
    agent: subprocess.Popen[str], lent: tuple[LentPipes, int]
) -> None:
    pipes, agent_stdout = lent

    def wait() -> tuple[bool, str, float, bool]:
        quick_messages(pipes, agent_stdout, SHARE_AFTER)
        was_shared = shared(pipes)
        started = time.monotonic()
        waited = pipes.fill(5 * SLOW_ANSWER_S)
        return was_shared, waited, time.monotonic() - started, os.sched_getaffinity(0) == ALL

    was_shared, waited, took, own_back = on_thread(wait)
    assert was_shared
    assert waited == "timeout"
    assert took >= 5 * SLOW_ANSWER_S * 0.9
    assert own_back
    assert os.sched_getaffinity(agent.pid) == ALL


def test_after_a_slow_answer_it_takes_share_after_quick_ones_to_share_again(
    agent: subprocess.Popen[str], lent: tuple[LentPipes, int]
) -> None:
    pipes, agent_stdout = lent

    def answer_late() -> None:
        time.sleep(2 * SLOW_ANSWER_S)
        os.write(agent_stdout, b"slow\n")

    def converse() -> tuple[bool, bool, bool]:
        quick_messages(pipes, agent_stdout, SHARE_AFTER)
        threading.Thread(target=answer_late).start()
        assert pipes.fill(10) == "ready"  # came after SLOW_ANSWER_S: stepped back
        released = not shared(pipes)
        quick_messages(pipes, agent_stdout, SHARE_AFTER - 1)
        not_yet = not shared(pipes)
        quick_messages(pipes, agent_stdout, 1)
        return released, not_yet, shared(pipes)

    released, not_yet, again = on_thread(converse)
    assert released
    assert not_yet
    assert again


def test_the_share_is_placed_again_every_reshare_s(
    agent: subprocess.Popen[str], lent: tuple[LentPipes, int]
) -> None:
    pipes, agent_stdout = lent

    def converse() -> tuple[bool, set[int], float, float, bool]:
        quick_messages(pipes, agent_stdout, SHARE_AFTER)
        share = pipes._share
        assert share is not None and share.active
        share.since -= 2 * RESHARE_S  # as if shared for that long
        first = share.since
        assert pipes.fill(0.001) == "timeout"  # a wait: stepped back before it
        stepped_back, agent_cpus = not share.active, os.sched_getaffinity(agent.pid)
        quick_messages(pipes, agent_stdout, 1)  # one quick message shares again
        return stepped_back, agent_cpus, first, share.since, share.active

    stepped_back, agent_cpus, first, since, active = on_thread(converse)
    assert stepped_back
    assert agent_cpus == ALL
    assert active
    assert since > first
    assert len(os.sched_getaffinity(agent.pid)) == 1


def test_where_sharing_is_impossible_the_pipes_stop_trying(
    agent: subprocess.Popen[str], lent: tuple[LentPipes, int]
) -> None:
    pipes, agent_stdout = lent

    def held_to_one_cpu() -> bool:
        os.sched_setaffinity(0, {min(ALL)})
        quick_messages(pipes, agent_stdout, SHARE_AFTER + 3)
        return pipes._share is None

    assert on_thread(held_to_one_cpu)
    assert os.sched_getaffinity(agent.pid) == ALL


# -- in a replayed conversation --------------------------------------------------------------

CONVERSING_AGENT = r"""
import json, os, sys, time
def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()
lines = iter(sys.stdin)
next(lines)
fewest = len(os.sched_getaffinity(0))
for i in range(500):  # quick calls: shared from the first quick answer on
    send({"type": "tool_call", "name": "t", "call_id": f"c{i}", "args": {}})
    next(lines)
    fewest = min(fewest, len(os.sched_getaffinity(0)))
    if fewest == 1:
        break
time.sleep(0.2)  # slow: its CPUs come back meanwhile
send({"type": "final_output", "output": {"fewest": fewest, "after": len(os.sched_getaffinity(0))}})
"""


class Answered:
    ok = True
    result = None
    error = None


class ImmediateTools:
    async def call(self, name: str, args: dict[str, Any], local: Any = None) -> Answered:
        return Answered()

    def prepare_answers(self) -> None:
        pass

    def answer_now(self, name: str, args: dict[str, Any]) -> Answered:
        return Answered()

    def close(self, *, clean: bool) -> None:
        pass

    def unused(self) -> int:
        return 0


def converse(spawn: Spawn) -> Any:
    limits = Limits(wall_ms=None, idle_ms=10_000, max_message_bytes=1 << 20, kill_grace_ms=500)
    run = asyncio.run(
        run_agent(
            spawn,
            case_id="c",
            task_input={},
            tools=ImmediateTools(),  # type: ignore[arg-type]
            allowed_tools={"t"},
            limits=limits,
        )
    )
    assert run.failure is None, run.failure
    return run.output


def test_a_replayed_agent_shares_a_cpu_while_quick_and_gets_them_all_back_while_slow() -> None:
    assert converse(Spawn([sys.executable, "-c", CONVERSING_AGENT])) == {
        "fewest": 1,
        "after": len(ALL),
    }
    assert os.sched_getaffinity(0) == ALL  # the test's own thread was never moved


def test_share_cpu_false_leaves_the_agent_on_all_its_cpus() -> None:
    spawn = Spawn([sys.executable, "-c", CONVERSING_AGENT], share_cpu=False)
    assert converse(spawn) == {"fewest": len(ALL), "after": len(ALL)}
