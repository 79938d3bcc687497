"""The order a runner spawned its agents in, told from their pids and start times alone.

Shared by the fake agents that number themselves (``prestart_agent.py``) and by the test that
checks the rule across a pid wrap-around.
"""

from __future__ import annotations


def spawned_no_later(pid: int, start: int, me: int, my_start: int, pid_max: int) -> bool:
    """Whether the process (pid, start) was spawned before process (me, my_start), or is it.

    The start time (in clock ticks since boot) orders processes spawned in different ticks. Pids
    order the rest, but they wrap around at pid_max (32768 on many machines, where a busy machine
    wraps in seconds), so the nearer way round the circle decides, not the plain comparison.
    """
    if start != my_start:
        return start < my_start
    return (me - pid) % pid_max < pid_max // 2


def spawn_number(me: int, spawned: dict[int, int], pid_max: int) -> int:
    """``me``'s place (from 1) among ``spawned`` (pid -> start time, ``me`` included)."""
    my_start = spawned[me]
    return sum(
        1 for pid, start in spawned.items() if spawned_no_later(pid, start, me, my_start, pid_max)
    )
