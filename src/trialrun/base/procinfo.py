"""Facts about processes from ``/proc`` (Linux): when each started, its group and session.

A pid names a process only while it runs: once it is gone, the kernel hands the number out
again. The start time (clock ticks since boot, field 22 of ``/proc/PID/stat``) together with
the pid, the boot and the pid namespace names one process for good. Elsewhere every answer is
None (or an empty list): nothing can be proven there.
"""

from __future__ import annotations

import os
import sys

__all__ = ["all_processes", "boot_id", "pid_namespace", "start_time"]


def start_time(pid: int) -> int | None:
    """When ``pid`` started, in clock ticks since boot (``/proc/PID/stat``); None if unknown."""
    fields = _stat_fields(pid)
    return int(fields[19]) if fields is not None else None


def all_processes() -> list[tuple[int, int, int, int]]:
    """``(pid, pgid, session, start time)`` of every process ``/proc`` shows."""
    found: list[tuple[int, int, int, int]] = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    for name in names:
        if not name.isdigit():
            continue
        fields = _stat_fields(int(name))
        if fields is not None:
            found.append((int(name), int(fields[2]), int(fields[3]), int(fields[19])))
    return found


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command name: state first (field 3)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    fields = raw.rpartition(b")")[2].decode("ascii", "replace").split()
    return fields if len(fields) > 19 and fields[0] not in ("Z", "X") else None


def pid_namespace() -> str:
    """This process's pid namespace (a container has its own): pids mean nothing across them."""
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return "0"


def boot_id() -> str:
    """The boot, shortened: a start time means nothing across boots."""
    try:
        with open("/proc/sys/kernel/random/boot_id", "rb") as handle:
            return handle.read().decode("ascii", "replace").strip().replace("-", "")[:12] or "0"
    except OSError:
        return "0" if sys.platform != "win32" else "w"
