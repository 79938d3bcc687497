"""What a trialrun process would leave behind if it were killed, and who clears it then.

A SIGKILL (an OOM kill, a CI runner's hard stop) gives trialrun no chance to stop its agents'
process groups or to remove its scratch directories and temporary files. So each process that
starts a child or makes a temporary file first gets an *area*: a directory
``<tmp>/trialrun-<uid>/run-<pid>-<start>-<boot>-<pidns>`` named after its owner (pid, the
start time the kernel gives that pid, the boot and the pid namespace), holding a ledger and the
owner's scratch directories. The ledger is an append-only file of one record a line, written
before the thing it names exists (a temporary file's path) or as soon as it does (a process
group or a process, with the start time of its first process, so that a recycled pid is never
mistaken for it), and when a group or process ends.

Clearing an area kills what its ledger names that still runs and is still the same process,
removes the temporary files it names, and removes the area. Two clear a dead owner's area:

- its watchdog, at once: a small process started with the first child noted, in a session of
  its own, that reads a pipe only the owner holds; the owner's end closes however it dies, and
  the watchdog (``watch``) then clears the area, or finds it gone after a normal exit. One
  process per trialrun, started off the critical path, rather than a ``PR_SET_PDEATHSIG`` for
  each child: that needs a ``preexec_fn``, which forbids ``vfork`` and ran Python in every
  child between fork and exec (~1-5 ms more per agent start, measured, on the event loop), and
  it kills only the child, not the helpers in its group;
- the next trialrun, should the watchdog be gone too: the first area a process makes sweeps
  the areas of owners that are gone.

An owner that still runs (a parallel run) is never touched, nor one in another pid namespace (a
container sharing the temporary directory), where its pid means nothing here; after a reboot
only files are removed. A normal exit removes the process's own area.

Identity comes from ``/proc`` (Linux). Elsewhere a pid that exists counts as its owner, and no
process is ever killed by a sweep, since its identity cannot be proven.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
from pathlib import Path

from trialrun.base.procinfo import all_processes, boot_id, pid_namespace, start_time

__all__ = [
    "area",
    "note_ended",
    "note_group",
    "note_path",
    "note_process",
    "scratch_root",
    "sweep",
    "watch",
]

_GROUP = "group"
_PROCESS = "process"
_ENDED = "ended"
_PATH = "path"
_LEDGER = "ledger"
_PREFIX = "run-"


class _Area:
    def __init__(self, path: Path, ledger: int) -> None:
        self.path = path
        self.ledger = ledger
        self.watched = False


_area: _Area | None = None
_unavailable = False
"""The area could not be made (no safe place for it): children and files go on without it."""


def area() -> Path | None:
    """This process's area, made on first use (after sweeping those of dead owners)."""
    made = _the_area()
    return made.path if made is not None else None


def scratch_root() -> str | None:
    """Where this process's scratch directories go (``tempfile.mkdtemp(dir=...)``): its area,
    so that a killed run's scratch goes with it; None (the system's) where there is no area."""
    path = area()
    return str(path) if path is not None else None


def note_group(pgid: int) -> None:
    """``pgid`` (a new session's leader) is ours: its whole group is killed should we die first."""
    _note(_GROUP, pgid)


def note_process(pid: int) -> None:
    """``pid`` (a child that stays in our own group) is ours: killed should we die first."""
    _note(_PROCESS, pid)


def note_ended(pid: int) -> None:
    """The group or process ``pid`` was stopped: nothing of it is to be killed any more."""
    made = _area
    if made is not None:
        _append(made, f"{_ENDED}\t{pid}\n")


def note_path(path: str | Path) -> None:
    """``path`` is about to be made and is temporary: removed should we die before it goes."""
    made = _the_area()
    if made is not None:
        _append(made, f"{_PATH}\t{os.fsencode(os.path.abspath(path)).hex()}\n")


def sweep() -> int:
    """Clear the areas of owners that are gone; how many were cleared."""
    root = _root()
    try:
        entries = list(os.scandir(root))
    except OSError:
        return 0
    boot, namespace = boot_id(), pid_namespace()
    own = _area.path.name if _area is not None else None
    cleared = 0
    for entry in entries:
        owner = _owner(entry.name)
        if owner is None or entry.name == own or not entry.is_dir(follow_symlinks=False):
            continue
        pid, started, owner_boot, owner_namespace = owner
        same_boot = owner_boot == boot
        if same_boot and owner_namespace != namespace:
            continue  # its pid names another process here: whether it runs cannot be known
        if _still_runs(pid, started if same_boot else None):
            continue
        _clear(Path(entry.path), kill=same_boot and started > 0)
        cleared += 1
    return cleared


# ---- the area -------------------------------------------------------------------------------


def _root() -> Path:
    # tempfile.gettempdir's first choices, without importing tempfile before the first agent.
    for name in ("TMPDIR", "TEMP", "TMP"):
        value = os.environ.get(name)
        if value:
            return Path(value) / f"trialrun-{_uid()}"
    return Path("/tmp") / f"trialrun-{_uid()}"


def _uid() -> int:
    return os.getuid() if hasattr(os, "getuid") else 0


def _the_area() -> _Area | None:
    global _area, _unavailable
    if _area is not None and _area.path.is_dir():
        return _area
    if _unavailable:
        return None
    root = _root()
    if not _safe_root(root):
        _unavailable = True
        return None
    sweep()
    pid = os.getpid()
    path = root / f"{_PREFIX}{pid}-{start_time(pid) or 0}-{boot_id()}-{pid_namespace()}"
    try:
        path.mkdir(mode=0o700, exist_ok=True)
        ledger = os.open(
            path / _LEDGER,
            os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0),
            0o600,
        )
    except OSError:
        _unavailable = True
        return None
    first = _area is None
    _area = _Area(path, ledger)
    if first:
        atexit.register(_remove_own)
    return _area


def _safe_root(root: Path) -> bool:
    """The shared parent is ours alone: a directory we own that no one else may write to."""
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        found = os.lstat(root)
    except OSError:
        return False
    import stat

    return (
        stat.S_ISDIR(found.st_mode)
        and found.st_uid == _uid()
        and not found.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    )


def _remove_own() -> None:
    global _area
    made, _area = _area, None
    if made is None or os.getpid() != _owner_pid(made.path.name):
        return  # a forked child inherited the registration: the area is its parent's
    with contextlib.suppress(OSError):
        os.close(made.ledger)
    try:
        # Usually the ledger is all that is left: no shutil (its import costs more than this).
        os.unlink(made.path / _LEDGER)
        os.rmdir(made.path)
    except OSError:
        remove_tree(made.path)


def _owner_pid(name: str) -> int | None:
    owner = _owner(name)
    return owner[0] if owner is not None else None


def _note(kind: str, pid: int) -> None:
    made = _the_area()
    if made is not None:
        _append(made, f"{kind}\t{pid}\t{start_time(pid) or 0}\n")
        if not made.watched:
            made.watched = True
            _start_watchdog(made)


_WATCHDOG = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from trialrun.base.leftovers import watch; watch(sys.argv[2])"
)
_SHELL = "/bin/sh"
_WAIT_THEN_CLEAR = 'read _; exec "$0" -I -S -c "$1" "$2" "$3"'
"""The shell waits (``read`` returns at end of file), then becomes the Python that clears."""


def _start_watchdog(made: _Area) -> None:
    """Start the process that clears ``made`` as soon as this one is gone, however it goes.

    Its stdin is a pipe whose other end only this process holds (close-on-exec: no agent
    inherits it), so end of file there means we are gone. It runs in a
    session of its own (a Ctrl-C or a signal to our group is not for it) with nothing of our
    stdout or stderr (a reader waiting for their end must not wait for it). While we run it is
    a shell blocked in ``read`` (~1 ms to start; a Python waiting there would compete with the
    first agent for ~10 ms of CPU, +8% on a one-case run, measured); only once we are gone does
    it become Python, isolated (``-I``) and without ``site``: it needs this package and the
    standard library. ``posix_spawn`` (vfork and exec) costs the loop ~0.1 ms, and leaves no
    ``Popen`` to warn, as it is collected, that its child still runs: it is meant to outlive us.
    """
    if not sys.executable or not hasattr(os, "posix_spawn"):
        return  # nothing to start it with: the next run's sweep remains
    python = [sys.executable, _WATCHDOG, str(Path(__file__).resolve().parents[2]), str(made.path)]
    if os.path.exists(_SHELL):
        argv = [_SHELL, "-c", _WAIT_THEN_CLEAR, *python]
    else:
        argv = [python[0], "-I", "-S", "-c", *python[1:]]
    read_end, write_end = os.pipe()
    try:
        os.posix_spawn(
            argv[0],
            argv,
            os.environ,
            file_actions=[
                (os.POSIX_SPAWN_DUP2, read_end, 0),
                (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
            ],
            setsid=True,
        )
    except (OSError, ValueError):  # ValueError: a NUL in a path
        os.close(write_end)
    else:
        _watch_ends.append(write_end)  # held, never written, until the process ends
    finally:
        os.close(read_end)


_watch_ends: list[int] = []


def watch(path: str) -> None:
    """The watchdog's work: wait for end of file on stdin, then clear the area at ``path``."""
    for signum in (signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)
    with contextlib.suppress(OSError):
        while os.read(0, 4096):
            pass
    area = Path(path)
    owner = _owner(area.name)
    if owner is not None and area.is_dir():  # a normal exit removed it already
        _clear(area, kill=owner[1] > 0)  # a start time: /proc tells who is who


def _append(made: _Area, line: str) -> None:
    # One write of one line on an O_APPEND descriptor: a record is whole or, if we are killed
    # mid-write, a torn last line that the sweep skips.
    with contextlib.suppress(OSError):
        os.write(made.ledger, line.encode("ascii"))


# ---- the sweep ------------------------------------------------------------------------------


def _owner(name: str) -> tuple[int, int, str, str] | None:
    """``(pid, start time, boot, pid namespace)`` of an area's name; None: not an area."""
    if not name.startswith(_PREFIX):
        return None
    parts = name[len(_PREFIX) :].split("-")
    if len(parts) != 4 or not parts[0].isdigit() or not parts[1].isdigit():
        return None
    return int(parts[0]), int(parts[1]), parts[2], parts[3]


def _still_runs(pid: int, started: int | None) -> bool:
    if started:
        return start_time(pid) == started
    if started is None:  # another boot: the pid names someone else now
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _clear(path: Path, *, kill: bool) -> None:
    groups: dict[int, int] = {}
    processes: dict[int, int] = {}
    paths: list[bytes] = []
    try:
        text = (path / _LEDGER).read_bytes().decode("ascii", "replace")
    except OSError:
        text = ""
    for line in text.splitlines():
        fields = line.split("\t")
        try:
            if fields[0] == _PATH and len(fields) == 2:
                paths.append(bytes.fromhex(fields[1]))
            elif fields[0] == _ENDED and len(fields) == 2:
                groups.pop(int(fields[1]), None)
                processes.pop(int(fields[1]), None)
            elif fields[0] in (_GROUP, _PROCESS) and len(fields) == 3:
                table = groups if fields[0] == _GROUP else processes
                table[int(fields[1])] = int(fields[2])
        except ValueError:
            continue  # a line torn by the owner's death
    if kill:
        _kill_leftovers(groups, processes)
    for raw in paths:
        _remove_file(os.fsdecode(raw))
    remove_tree(path)


def _kill_leftovers(groups: dict[int, int], processes: dict[int, int]) -> None:
    """SIGKILL what the ledger names that still runs and is provably the same.

    A group's members are the processes of its session and group that started no earlier than
    its leader, while the leader is gone or still the one recorded: a pid in use as a group id
    cannot be handed out again, so such members are the recorded group's own helpers.
    """
    for pid, started in processes.items():
        if started and start_time(pid) == started:
            _kill(pid)
    if not groups:
        return
    leaders_ok = {
        pgid for pgid, started in groups.items() if start_time(pgid) in (None, started) and started
    }
    for pid, pgid, session, started in all_processes():
        if pgid in leaders_ok and session == pgid and started >= groups[pgid]:
            _kill(pid)


def _kill(pid: int) -> None:
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)


def _remove_file(name: str) -> None:
    import stat

    with contextlib.suppress(OSError):
        if stat.S_ISREG(os.lstat(name).st_mode):
            os.unlink(name)


def remove_tree(path: Path) -> None:
    """Delete ``path`` and everything under it, as far as it can be deleted."""
    import shutil

    shutil.rmtree(path, ignore_errors=True)
