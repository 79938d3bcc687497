"""Where ``trialrun attempt`` keeps a workspace's snapshots, so that no crash can lose it.

Each workspace has one recovery directory, ``<trialrun home>/attempt/<name>-<key>`` (``key``: the
first 16 hex digits of the SHA-256 of its resolved path). It lives in the trialrun home, not in
/tmp, because /tmp is often a RAM disk wiped at reboot and swept of old files, and not beside the
workspace, whose parent may be read-only or shared; an agent cleaning the workspace
(``git clean -fdx``) does not reach it either. It holds:

* ``lock``: ``flock``-ed by the run that owns it. The kernel drops the lock when that process
  dies, even by SIGKILL, so a held lock means a run is alive and a free one means it stopped.
* ``state.json``: the workspace, the paths left out of its snapshots, the owner's pid, and
  ``restore``: the snapshot that holds the workspace's last kept state while the workspace may
  differ from it (an attempt running, a rollback), else null. It is rewritten atomically.
* one store per snapshot (``initial``, ``attempt-N``; ``trialrun.attempt.snapshot_store``).

The directory is built under a temporary name, with its lock held, and renamed into place, so
another run never sees it half made. While it exists, a new attempt in that workspace is
refused; ``recover`` restores the workspace from it (or drops it) and removes it. Removal renames
it aside first, so a crash while deleting leaves no directory that reads as a stopped run; what
such a crash leaves is swept by the next claim.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from trialrun.attempt.snapshot import Snapshot, Workspace
from trialrun.base.fsutil import dumps_json, write_json
from trialrun.errors import TrialrunError
from trialrun.home.paths import trialrun_home

__all__ = ["Recovered", "RecoveryDir", "RecoveryError", "recover", "recovery_path"]

LOCK_FILE = "lock"
STATE_FILE = "state.json"
_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class RecoveryError(TrialrunError):
    """A workspace's snapshots are in the way, in use, missing or unreadable."""


def attempts_home() -> Path:
    return trialrun_home() / "attempt"


def recovery_path(root: Path) -> Path:
    """The recovery directory of the workspace ``root`` (resolved)."""
    key = hashlib.sha256(os.fsencode(root)).hexdigest()[:16]
    name = _NAME_UNSAFE.sub("_", root.name)[:40].strip("._") or "workspace"
    return attempts_home() / f"{name}-{key}"


def recover_command(root: Path, *, discard: bool = False) -> str:
    return f"trialrun attempt recover --workspace {_quoted(root)}" + (
        " --discard" if discard else ""
    )


class RecoveryDir:
    """A workspace's recovery directory, owned (locked) by this process until ``close``."""

    def __init__(self, path: Path, root: Path, lock_fd: int, state: dict[str, object]) -> None:
        self.path = path
        self.root = root
        self._lock_fd: int | None = lock_fd
        self._state = state

    @classmethod
    def claim(cls, root: Path, *, exclude: list[str], receipt: Path) -> RecoveryDir:
        """Create and lock ``root``'s directory; RecoveryError if one is there already."""
        final = recovery_path(root)
        try:
            final.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            _sweep(final.parent)
            if os.path.lexists(final):
                raise RecoveryError(_in_the_way(root, final))
            staging = final.with_name(f".new-{final.name}-{os.urandom(4).hex()}")
            staging.mkdir(mode=0o700)
            # Nobody else locks a directory that holds no state yet.
            lock_fd = _lock(staging / LOCK_FILE)
        except OSError as exc:
            raise RecoveryError(
                f"{exc.filename or final}: cannot keep the workspace's snapshots there "
                f"({exc.strerror or exc}); set TRIALRUN_HOME to a folder you can write"
            ) from exc
        if lock_fd is None:
            raise RecoveryError(f"{staging}: its lock is held by another process")
        state: dict[str, object] = {
            "workspace": os.fsdecode(root),
            "exclude": exclude,
            "pid": os.getpid(),
            "startedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "receipt": os.fsdecode(receipt),
            "restore": None,
        }
        try:
            write_json(staging / STATE_FILE, state)
            os.rename(staging, final)
        except OSError as exc:
            os.close(lock_fd)
            shutil.rmtree(staging, ignore_errors=True)
            if os.path.lexists(final):  # another run claimed it between the check and here
                raise RecoveryError(_in_the_way(root, final)) from None
            raise RecoveryError(f"{final}: cannot create it: {exc.strerror or exc}") from exc
        return cls(final, root, lock_fd, state)

    @property
    def restore_point(self) -> str | None:
        point = self._state.get("restore")
        return point if isinstance(point, str) else None

    def snapshot(self, workspace: Workspace, name: str) -> Snapshot:
        """Save the workspace as ``name``, then make it the restore point."""
        snapshot = workspace.snapshot(self.path / name)
        self.point_to(name)
        return snapshot

    def point_to(self, name: str | None) -> None:
        """Record which snapshot holds the last kept state (None: the workspace does)."""
        if self._state.get("restore") == name:
            return
        self._state["restore"] = name
        write_json(self.path / STATE_FILE, self._state)

    def close(self) -> None:
        """Remove the directory unless it still holds a restore point; release the lock."""
        if self._lock_fd is None:
            return
        if self.restore_point is None:
            _remove(self.path)
        os.close(self._lock_fd)
        self._lock_fd = None

    def __enter__(self) -> RecoveryDir:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


@dataclass(frozen=True)
class Recovered:
    path: Path
    restored: str | None
    """The snapshot the workspace was restored to; None when nothing was restored."""


def recover(root: Path, *, discard: bool) -> Recovered:
    """Restore ``root`` from the snapshot a stopped attempt left (or drop it), then remove it."""
    path = recovery_path(root)
    if not os.path.lexists(path):
        raise RecoveryError(
            f"{root}: no snapshot of a stopped trialrun attempt for this workspace "
            f"(looked for {path})"
        )
    lock_fd = _lock(path / LOCK_FILE)
    if lock_fd is None:
        raise RecoveryError(
            f"{root}: a trialrun attempt is still running in this workspace "
            f"({_owner(path)}); its snapshots at {path} are in use"
        )
    try:
        restored = None if discard else _restore(root, path)
        _remove(path)
    finally:
        os.close(lock_fd)
    return Recovered(path, restored)


def _restore(root: Path, path: Path) -> str | None:
    state = _read_state(path)
    point = state.get("restore")
    if point is None:
        return None
    exclude = state.get("exclude")
    if not isinstance(point, str) or "/" in point or point in ("", ".", ".."):
        raise RecoveryError(f"{path / STATE_FILE}: expected a snapshot name, found {point!r}")
    if not isinstance(exclude, list) or not all(isinstance(item, str) for item in exclude):
        raise RecoveryError(f"{path / STATE_FILE}: expected a list of paths, found {exclude!r}")
    snapshot = Snapshot.load(path / point)
    workspace = Workspace(root, exclude=exclude)
    workspace.restore(snapshot)
    return point


def _read_state(path: Path) -> dict[str, object]:
    state_file = path / STATE_FILE
    try:
        state = json.loads(state_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RecoveryError(
            f"{state_file}: cannot read the state of the stopped run ({exc}); drop its snapshots "
            "with --discard"
        ) from None
    if not isinstance(state, dict):
        raise RecoveryError(f"{state_file}: expected a JSON object, found {dumps_json(state)}")
    return state


def _in_the_way(root: Path, path: Path) -> str:
    if _is_held(path / LOCK_FILE):
        return (
            f"{root}: another trialrun attempt is running in this workspace ({_owner(path)}); "
            f"its snapshots are at {path}"
        )
    return (
        f"{root}: a trialrun attempt in this workspace stopped before it finished "
        f"({_owner(path)}) and left its snapshot at {path}; restore the workspace with "
        f"`{recover_command(root)}` or drop the snapshot with "
        f"`{recover_command(root, discard=True)}`, then start again"
    )


def _owner(path: Path) -> str:
    with contextlib.suppress(RecoveryError):
        state = _read_state(path)
        return f"pid {state.get('pid')}, started {state.get('startedAt')}"
    return "its state is unreadable"


def _lock(lock_file: Path) -> int | None:
    """An open descriptor holding the lock, or None when another process holds it."""
    fd = os.open(lock_file, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _is_held(lock_file: Path) -> bool:
    fd = _lock(lock_file)
    if fd is None:
        return True
    os.close(fd)
    return False


def _remove(path: Path) -> None:
    """Rename ``path`` aside (atomically: it no longer reads as a stopped run), then delete."""
    trash = path.with_name(f".trash-{path.name}-{os.urandom(4).hex()}")
    os.rename(path, trash)
    shutil.rmtree(trash, ignore_errors=True)


def _sweep(home: Path) -> None:
    """Delete what a crash left while a directory was being built or removed."""
    for leftover in home.iterdir():
        # A builder locks its .new- directory before writing the state and holds the lock
        # until it dies: a state without a held lock is a crash's leftover.
        with contextlib.suppress(OSError):  # sweeping is a courtesy; it never blocks a run
            if leftover.name.startswith(".trash-") or (
                leftover.name.startswith(".new-")
                and (leftover / STATE_FILE).exists()
                and not _is_held(leftover / LOCK_FILE)
            ):
                shutil.rmtree(leftover, ignore_errors=True)


def _quoted(path: Path) -> str:
    return shlex.quote(os.fsdecode(path))
