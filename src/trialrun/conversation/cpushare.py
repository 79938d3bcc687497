"""One CPU for the answering thread and the agent while they take turns (Linux).

A replayed conversation is a strict ping-pong: each answer wakes the agent, each message of the
agent wakes trialrun's answering thread (``pump.LentPipes``), and neither does anything while
the other works. Left to itself, the scheduler wakes the other side on an idle CPU; on virtual
machines (CI runners) waking an idle vCPU costs more than answering the message. Measured on
this project's 2-vCPU machines, 5,000 replayed calls: ~2.6 s with both sides free, ~1.3 s with
both on one CPU (``bench/deep_bench.py``); a bare driver alike, 1.6 -> 0.7 s. A ping-pong
loses no parallelism on one CPU.

``pump.LentPipes`` decides when. Moving a thread that runs elsewhere costs about a millisecond on
these machines, so it shares only once ``SHARE_AFTER`` messages in a row came quickly (a
conversation of a few calls never pays), and steps back (the agent's threads and processes, and
the answering thread, get back the CPUs they had) in two cases:

* the agent keeps the thread waiting longer than ``SLOW_ANSWER_S``: it is working on its own,
  maybe in parallel, and threads and processes it started meanwhile inherited the shared CPU;
  it must be quick ``SHARE_AFTER`` times again before it shares again;
* every ``RESHARE_S``: the scheduler places both again, so that two runs side by side (or other
  work) that landed on the same CPU spread out; the next quick message shares again, on the CPU
  the scheduler woke the thread on.

Only the agent's main thread is moved (the one that started its process, by its pid): an agent
started through a wrapper (``uv run``, ``npm start``) simply gains nothing. Where the agent's
own CPUs exclude the chosen one, or the system refuses (no ``sched_setaffinity``, one CPU,
a cpuset), nothing changes. Sharing is a speed-up, never a condition: every failure is silent.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator

__all__ = ["RESHARE_S", "SHARE_AFTER", "SLOW_ANSWER_S", "CpuShare"]

SLOW_ANSWER_S = 0.02
"""An agent slower than this to send its next message is doing work of its own: twenty
milliseconds is hundreds of wake-ups, so sharing could not have saved anything noticeable."""

SHARE_AFTER = 32
"""Quick messages in a row before sharing: an unshared round trip costs tens of microseconds more
than a shared one, moving both about a millisecond."""

RESHARE_S = 0.25
"""How long one placement holds before the scheduler gets to place both again (about a
millisecond each time)."""

_SUPPORTED = hasattr(os, "sched_setaffinity") and hasattr(os, "sched_getaffinity")

_lock = threading.Lock()
_shares_per_cpu: dict[int, int] = {}
"""How many conversations of this process share each CPU now (``-j``): a new one takes the
least used, preferring the one the scheduler put its thread on."""


class CpuShare:
    """The answering thread and one agent's main thread on one CPU, while ``active``."""

    def __init__(self, agent_pid: int) -> None:
        self._pid = agent_pid
        self._cpu: int | None = None
        self._agent_cpus: set[int] = set()
        self._own_cpus: set[int] = set()
        self.active = False
        """The two share a CPU now."""
        self.since = 0.0
        """``time.monotonic()`` when they began to."""
        self.possible = _SUPPORTED
        """False once the system or the agent ruled sharing out: ``start`` does nothing then."""

    def start(self) -> None:
        """On the answering thread: move it and the agent's main thread to one CPU."""
        if not self.possible or self._cpu is not None:
            return
        try:
            own = os.sched_getaffinity(0)
            agent = os.sched_getaffinity(self._pid)
        except OSError:  # the agent is gone, or not ours to look at
            self.possible = False
            return
        choices = own & agent
        if len(own) < 2 or not choices:
            self.possible = False
            return
        here = _current_cpu()
        with _lock:
            cpu = min(choices, key=lambda c: (_shares_per_cpu.get(c, 0), c != here, c))
            _shares_per_cpu[cpu] = _shares_per_cpu.get(cpu, 0) + 1
        self._cpu, self._agent_cpus, self._own_cpus = cpu, agent, own
        self.active, self.since = True, time.monotonic()
        try:
            if agent != {cpu}:
                os.sched_setaffinity(self._pid, {cpu})
            os.sched_setaffinity(0, {cpu})
        except OSError:
            self.step_back()
            self.possible = False  # refused: do not ask again

    def step_back(self) -> None:
        """On the answering thread: give back their CPUs to it and to every thread of the agent
        and of the processes it started that is still held to the shared one."""
        cpu = self._end()
        if cpu is None:
            return
        for tid in _tree_threads(self._pid):
            _restore(tid, cpu, self._agent_cpus)
        _restore(0, cpu, self._own_cpus)

    def end(self) -> None:
        """From any thread, once the thread is done: the agent's main thread gets its CPUs back
        (what it started is stopped with it at the end of the case)."""
        cpu = self._end()
        if cpu is not None:
            # The agent may have exited: a recycled pid's thread is touched only if it is held
            # to exactly that CPU, and it is then given more.
            _restore(self._pid, cpu, self._agent_cpus)

    def _end(self) -> int | None:
        cpu = self._cpu
        if cpu is None:
            return None
        self._cpu = None
        self.active = False
        with _lock:
            _shares_per_cpu[cpu] -= 1
            if not _shares_per_cpu[cpu]:
                del _shares_per_cpu[cpu]
        return cpu


def _current_cpu() -> int | None:
    """The CPU the calling thread runs on (``sched_getcpu``, which ``os`` lacks)."""
    try:
        with open("/proc/thread-self/stat", "rb") as stat:
            return int(stat.read().rpartition(b")")[2].split()[36])  # field 39, "processor"
    except (OSError, ValueError, IndexError):
        return None


def _restore(tid: int, cpu: int, cpus: set[int]) -> None:
    """``cpus`` for thread ``tid`` if it is still held to ``cpu`` alone (it did not choose
    another set itself meanwhile)."""
    try:
        if os.sched_getaffinity(tid) == {cpu}:
            os.sched_setaffinity(tid, cpus)
    except OSError:  # exited meanwhile, or not ours
        pass


def _tree_threads(pid: int) -> Iterator[int]:
    """Every thread of process ``pid`` and of its descendants (the agent and what it started)."""
    pending, seen = [pid], set()
    while pending:
        process = pending.pop()
        if process in seen:
            continue
        seen.add(process)
        try:
            tids = [int(tid) for tid in os.listdir(f"/proc/{process}/task")]
        except (OSError, ValueError):
            continue
        for tid in tids:
            yield tid
            try:
                with open(f"/proc/{process}/task/{tid}/children", "rb") as children:
                    pending.extend(int(child) for child in children.read().split())
            except (OSError, ValueError):  # exited, or a kernel without the children file
                pass
