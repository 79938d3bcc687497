"""Exact snapshots of a workspace, so a worse attempt can be rolled back and changes reported.

``Workspace(root).snapshot(store)`` copies every regular file and symlink under ``root`` into the
new directory ``store`` and writes the map of modes, directories and copies there last
(``trialrun.attempt.snapshot_store``): from then on the snapshot can be loaded again
(``Snapshot.load``) by another process, after the one that took it was killed. Without ``store``
the copies go to a private temporary directory that lives only as long as the ``Snapshot``.
``.gitignore`` is not honoured: an agent may touch ignored files too, and an exact rollback means
everything. Any entry named ``.git`` (the repository, a submodule's git file) is never read,
copied, deleted or rewritten; neither are sockets, FIFOs and device files (copying a FIFO would
block), nor the paths given as ``exclude`` (the run's own receipt, when it is written inside the
workspace).

Safety of ``restore``: files are never written in place. A path that must change is unlinked and
created afresh with ``O_EXCL | O_NOFOLLOW``, so a symlink or hard link the agent planted cannot
redirect the write outside the workspace, and removing a symlink removes the link, never what it
points to. Restored files get a fresh modification time (build tools then rebuild them). A
restore that stopped half way (killed, a full disk) is finished by restoring again: it compares
what is there with the snapshot and redoes only what differs.

``changes_since`` reports files and symlinks only (directories carry no content), as
``trialrun.attempt.changes.FileChange``.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import weakref
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import TracebackType

from trialrun.attempt.changes import DEFAULT_MAX_DIFF_BYTES, FileChange, describe, git_mode
from trialrun.attempt.snapshot_store import (
    GIT_NAME,
    Entry,
    Kind,
    SnapshotError,
    read_map,
    write_map,
)

__all__ = [
    "DEFAULT_MAX_DIFF_BYTES",
    "FileChange",
    "Snapshot",
    "SnapshotError",
    "Workspace",
]

_COPY_CHUNK = 1024 * 1024


class Snapshot:
    """The saved state of a workspace, in a store directory that ``discard()`` deletes.

    A temporary store (``Workspace.snapshot()`` without a directory) is also deleted when the
    object is collected or the interpreter exits; a store the caller named is deleted only by
    ``discard()``: it may be all that is left of the workspace when this process dies.
    """

    def __init__(
        self, root: Path, store: Path, entries: dict[str, Entry], *, temporary: bool = False
    ) -> None:
        self.root = root
        self.store = store
        self._entries = entries
        self._discarded = False
        self._finalizer = (
            weakref.finalize(self, shutil.rmtree, store, ignore_errors=True) if temporary else None
        )

    @classmethod
    def load(cls, store: Path) -> Snapshot:
        """The snapshot saved in ``store``, checked entry by entry (SnapshotError if damaged)."""
        root, entries = read_map(store)
        return cls(root, store, entries)

    @property
    def discarded(self) -> bool:
        return self._discarded

    @property
    def paths(self) -> list[str]:
        """Sorted relative paths of the saved files and symlinks."""
        return sorted(rel for rel, entry in self._entries.items() if entry.kind != "dir")

    def discard(self) -> None:
        """Delete the saved copies; the snapshot can no longer be restored. Idempotent."""
        self._discarded = True
        if self._finalizer is not None:
            self._finalizer()
        else:
            shutil.rmtree(self.store, ignore_errors=True)

    def __enter__(self) -> Snapshot:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.discard()

    def _content(self, rel: str) -> bytes:
        entry = self._entries[rel]
        if entry.kind == "symlink":
            return os.fsencode(entry.target or "")
        return (self.store / (entry.stored or "")).read_bytes()

    def _stored_path(self, entry: Entry) -> Path:
        return self.store / (entry.stored or "")


class Workspace:
    """A directory whose state can be saved, compared and restored exactly."""

    def __init__(self, root: Path, *, exclude: Iterable[str] = ()) -> None:
        self.root = Path(root).resolve()
        if not self.root.is_dir():
            raise SnapshotError(f"workspace: expected a directory, found {root!s}")
        self.exclude = frozenset(exclude)
        """Relative posix paths left alone like ``.git``: never saved, compared or restored."""

    def snapshot(self, store: Path | None = None) -> Snapshot:
        """Save the workspace into ``store`` (a new directory; its parent must exist), or into
        a temporary directory when None. The map is written last: a store without one is an
        unfinished snapshot."""
        temporary = store is None
        if store is None:
            store = Path(tempfile.mkdtemp(prefix="trialrun-snapshot-"))
        else:
            try:
                store.mkdir(mode=0o700)
            except OSError as exc:
                raise SnapshotError(
                    f"snapshot of {self.root}: cannot create its store {store}: "
                    f"{exc.strerror or exc}"
                ) from exc
        entries: dict[str, Entry] = {}
        try:
            for index, (rel, kind, st) in enumerate(_walk(self.root, self.exclude)):
                mode = stat.S_IMODE(st.st_mode)
                if kind == "file":
                    stored = f"{index:07d}"
                    # The store is our own fresh 0o700 directory: nothing can be planted there.
                    shutil.copyfile(self.root / rel, store / stored, follow_symlinks=False)
                    entries[rel] = Entry(kind, mode, st.st_size, stored=stored)
                elif kind == "symlink":
                    target = os.readlink(self.root / rel)
                    entries[rel] = Entry(kind, mode, st.st_size, target=target)
                else:
                    entries[rel] = Entry(kind, mode, 0)
            write_map(store, self.root, entries)
        except OSError as exc:
            shutil.rmtree(store, ignore_errors=True)
            raise SnapshotError(
                f"snapshot of {self.root}: cannot save {exc.filename}: {exc}"
            ) from exc
        except BaseException:
            shutil.rmtree(store, ignore_errors=True)
            raise
        return Snapshot(self.root, store, entries, temporary=temporary)

    def restore(self, snapshot: Snapshot) -> None:
        """Make the workspace (outside ``.git``) exactly as it was when ``snapshot`` was taken."""
        self._check_usable(snapshot)
        saved = snapshot._entries
        current = {rel: (kind, st) for rel, kind, st in _walk(self.root, self.exclude)}
        try:
            self._remove_extra(saved, current)
            rewrite = [rel for rel in sorted(saved) if not self._matches(snapshot, rel, current)]
            for rel in rewrite:
                self._recreate(snapshot, rel)
            for rel in sorted(saved, reverse=True):
                entry = saved[rel]
                # Directories last and deepest first: a read-only mode must not block children.
                if entry.kind != "symlink":
                    path = self.root / rel
                    if stat.S_IMODE(path.lstat().st_mode) != entry.mode:
                        os.chmod(path, entry.mode)
        except OSError as exc:
            raise SnapshotError(f"restore of {self.root}: failed at {exc.filename}: {exc}") from exc

    def changes_since(
        self, snapshot: Snapshot, *, max_diff_bytes: int = DEFAULT_MAX_DIFF_BYTES
    ) -> list[FileChange]:
        """Files and symlinks that differ from ``snapshot``, sorted by path."""
        self._check_usable(snapshot)
        saved = {rel: e for rel, e in snapshot._entries.items() if e.kind != "dir"}
        current = {
            rel: (kind, st) for rel, kind, st in _walk(self.root, self.exclude) if kind != "dir"
        }
        changes: list[FileChange] = []
        for rel in sorted(saved.keys() | current.keys()):
            before = saved.get(rel)
            old = None
            if before is not None:
                old = (snapshot._content(rel), git_mode(before.kind == "symlink", before.mode))
            now = current.get(rel)
            new = None
            if now is not None:
                kind, st = now
                mode = git_mode(kind == "symlink", stat.S_IMODE(st.st_mode))
                new = (self._read_content(rel, kind), mode)
            if old != new:
                changes.append(describe(rel, old, new, max_diff_bytes))
        return changes

    def _check_usable(self, snapshot: Snapshot) -> None:
        if snapshot.root != self.root:
            raise SnapshotError(
                f"snapshot belongs to workspace {snapshot.root}, not to {self.root}"
            )
        if snapshot.discarded:
            raise SnapshotError(f"snapshot of {self.root} was discarded; it cannot be used")

    def _read_content(self, rel: str, kind: Kind) -> bytes:
        path = self.root / rel
        return os.fsencode(os.readlink(path)) if kind == "symlink" else path.read_bytes()

    def _remove_extra(
        self, saved: dict[str, Entry], current: dict[str, tuple[Kind, os.stat_result]]
    ) -> None:
        # Children sort after their parent, so reverse order removes contents before directories.
        for rel in sorted(current, reverse=True):
            kind = current[rel][0]
            entry = saved.get(rel)
            if entry is not None and entry.kind == kind:
                continue
            path = self.root / rel
            if kind != "dir":
                path.unlink()
                continue
            try:
                path.rmdir()
            except OSError as exc:
                # Only entries we never touch (a nested .git, a socket) can keep it non-empty.
                if entry is not None:
                    raise SnapshotError(
                        f"restore of {self.root}: {rel} must become a {entry.kind} but is a "
                        f"directory that still holds untouchable entries ({exc})"
                    ) from exc

    def _matches(
        self, snapshot: Snapshot, rel: str, current: dict[str, tuple[Kind, os.stat_result]]
    ) -> bool:
        entry = snapshot._entries[rel]
        now = current.get(rel)
        if now is None or now[0] != entry.kind:
            return False
        path = self.root / rel
        if entry.kind == "dir":
            return True
        if entry.kind == "symlink":
            return os.readlink(path) == entry.target
        return now[1].st_size == entry.size and _same_bytes(path, snapshot._stored_path(entry))

    def _recreate(self, snapshot: Snapshot, rel: str) -> None:
        entry = snapshot._entries[rel]
        path = self.root / rel
        self._assert_real_parents(rel)
        if os.path.lexists(path):
            path.unlink()  # a stale file or link: never write through it
        if entry.kind == "dir":
            path.mkdir(mode=0o700)
        elif entry.kind == "symlink":
            os.symlink(entry.target or "", path)
        else:
            _copy_exclusive(snapshot._stored_path(entry), path, entry.mode)

    def _assert_real_parents(self, rel: str) -> None:
        parent = self.root
        for part in rel.split("/")[:-1]:
            parent = parent / part
            if not stat.S_ISDIR(parent.lstat().st_mode):
                raise SnapshotError(
                    f"restore of {self.root}: expected a real directory at {parent}, "
                    "found a symlink or file; refusing to write through it"
                )


def _walk(
    root: Path, exclude: frozenset[str] = frozenset()
) -> Iterator[tuple[str, Kind, os.stat_result]]:
    """Every directory, regular file and symlink under ``root`` but ``exclude``, never entering
    symlinks."""
    pending: list[tuple[str, str]] = [("", os.fspath(root))]
    while pending:
        rel_dir, abs_dir = pending.pop()
        with os.scandir(abs_dir) as entries:
            for dir_entry in entries:
                if dir_entry.name == GIT_NAME:
                    continue
                rel = f"{rel_dir}/{dir_entry.name}" if rel_dir else dir_entry.name
                if rel in exclude:
                    continue
                try:
                    st = dir_entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue  # vanished while we looked
                if stat.S_ISDIR(st.st_mode):
                    yield rel, "dir", st
                    pending.append((rel, dir_entry.path))
                elif stat.S_ISLNK(st.st_mode):
                    yield rel, "symlink", st
                elif stat.S_ISREG(st.st_mode):
                    yield rel, "file", st


def _copy_exclusive(source: Path, target: Path, mode: int) -> None:
    """Copy into a path that must not exist yet; a planted link there makes this fail."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    flags |= getattr(os, "O_BINARY", 0)
    with open(source, "rb") as reader:
        fd = os.open(target, flags, 0o600)
        with os.fdopen(fd, "wb") as writer:
            shutil.copyfileobj(reader, writer, _COPY_CHUNK)
    os.chmod(target, mode)


def _same_bytes(left: Path, right: Path) -> bool:
    with open(left, "rb") as a, open(right, "rb") as b:
        while True:
            chunk_a = a.read(_COPY_CHUNK)
            if chunk_a != b.read(_COPY_CHUNK):
                return False
            if not chunk_a:
                return True
