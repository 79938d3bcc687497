"""A snapshot on disk: numbered copies of the files and the map that names them.

A store is one directory holding ``0000000``, ``0000001``, ... (the saved files' bytes) and
``map.json``: the workspace root and, for every saved directory, file and symlink, its relative
path, kind, permission bits, size, and its copy's name (files) or link text (symlinks). The map
is written last, atomically and fsynced: a store without ``map.json`` is an unfinished snapshot
and never used. With the map on disk a snapshot outlives the process that took it, so a
workspace can be restored after that process was killed (``trialrun attempt recover``).

``read_map`` trusts nothing it reads: a map that names a path outside the workspace (absolute,
``..``, ``.git``), a copy that is missing or of another size than recorded, or an entry whose
parent directory is not in the map is refused before anything is restored.
"""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeGuard

from trialrun.base.fsutil import atomic_write_text, dumps_json
from trialrun.errors import TrialrunError

__all__ = ["MAP_FILE", "Entry", "Kind", "SnapshotError", "read_map", "write_map"]

MAP_FILE = "map.json"
FORMAT = "trialrun-workspace-snapshot"
VERSION = 1
_STORED_NAME = re.compile(r"[0-9]{7,}")
_KINDS = ("file", "symlink", "dir")
GIT_NAME = ".git"

Kind = Literal["file", "symlink", "dir"]


class SnapshotError(TrialrunError):
    """A workspace could not be snapshotted or restored (the message names the path)."""


@dataclass(frozen=True, slots=True)
class Entry:
    kind: Kind
    mode: int  # permission bits (stat.S_IMODE)
    size: int
    stored: str | None = None  # file name inside the snapshot's store (files only)
    target: str | None = None  # link text (symlinks only)


def write_map(store: Path, root: Path, entries: dict[str, Entry]) -> None:
    """Write ``store/map.json`` atomically (paths that are not UTF-8 keep their bytes)."""
    rows: list[dict[str, Any]] = []
    for rel, entry in entries.items():
        row: dict[str, Any] = {"path": rel, "kind": entry.kind, "mode": entry.mode}
        if entry.kind == "file":
            row |= {"size": entry.size, "stored": entry.stored}
        elif entry.kind == "symlink":
            row["target"] = entry.target
        rows.append(row)
    document = {"format": FORMAT, "version": VERSION, "root": os.fspath(root), "entries": rows}
    # dumps_json writes the lone surrogates of undecodable names as \udcxx escapes, which
    # json.loads turns back into the same surrogates, so os.fsencode gives the original bytes.
    atomic_write_text(store / MAP_FILE, dumps_json(document, indent=None, sort_keys=False) + "\n")


def read_map(store: Path) -> tuple[Path, dict[str, Entry]]:
    """The root and entries ``store/map.json`` records; SnapshotError naming what is wrong."""
    map_path = store / MAP_FILE
    try:
        text = map_path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SnapshotError(
            f"{map_path}: no snapshot map: the snapshot was never finished"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SnapshotError(f"{map_path}: cannot read the snapshot map: {exc}") from exc
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as exc:
        line = getattr(exc, "lineno", None)
        where = f"{map_path}:{line}" if line else str(map_path)
        raise SnapshotError(f"{where}: expected a JSON snapshot map, found invalid JSON") from None
    return _parse(map_path, store, document)


def _parse(map_path: Path, store: Path, document: object) -> tuple[Path, dict[str, Entry]]:
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise SnapshotError(f"{map_path}: expected a {FORMAT} map, found something else")
    if document.get("version") != VERSION:
        raise SnapshotError(
            f"{map_path}: expected map version {VERSION}, found {document.get('version')!r}"
        )
    root = document.get("root")
    rows = document.get("entries")
    if not isinstance(root, str) or not os.path.isabs(root) or "\0" in root:
        raise SnapshotError(f"{map_path}: expected an absolute workspace root, found {root!r}")
    if not isinstance(rows, list):
        raise SnapshotError(f"{map_path}: expected a list of entries, found {type(rows).__name__}")
    entries: dict[str, Entry] = {}
    for index, row in enumerate(rows):
        rel, entry = _entry(row, lambda what, i=index: f"{map_path}: entry {i}: {what}")
        if rel in entries:
            raise SnapshotError(f"{map_path}: entry {index}: {rel!r} is listed twice")
        entries[rel] = entry
    for rel, entry in entries.items():
        parent = rel.rpartition("/")[0]
        if parent and (parent not in entries or entries[parent].kind != "dir"):
            raise SnapshotError(
                f"{map_path}: {rel!r}: expected its parent {parent!r} as a directory entry, "
                "found none"
            )
        if entry.kind == "file":
            _check_copy(map_path, store, rel, entry)
    return Path(root), entries


def _entry(row: object, problem: Any) -> tuple[str, Entry]:
    if not isinstance(row, dict):
        raise SnapshotError(problem(f"expected an object, found {type(row).__name__}"))
    rel, kind, mode = row.get("path"), row.get("kind"), row.get("mode")
    if not isinstance(rel, str) or not _is_inside_path(rel):
        raise SnapshotError(
            problem(f"expected a relative path inside the workspace, found {rel!r}")
        )
    if kind not in _KINDS:
        raise SnapshotError(problem(f"{rel!r}: expected kind file, symlink or dir, found {kind!r}"))
    if not _is_int(mode) or not 0 <= mode <= 0o7777:
        raise SnapshotError(problem(f"{rel!r}: expected permission bits, found {mode!r}"))
    if kind == "file":
        size, stored = row.get("size"), row.get("stored")
        if not _is_int(size) or size < 0:
            raise SnapshotError(problem(f"{rel!r}: expected a size in bytes, found {size!r}"))
        if not isinstance(stored, str) or not _STORED_NAME.fullmatch(stored):
            raise SnapshotError(problem(f"{rel!r}: expected a copy's name, found {stored!r}"))
        return rel, Entry("file", mode, size, stored=stored)
    if kind == "symlink":
        target = row.get("target")
        if not isinstance(target, str) or not target or "\0" in target:
            raise SnapshotError(problem(f"{rel!r}: expected a link target, found {target!r}"))
        return rel, Entry("symlink", mode, len(os.fsencode(target)), target=target)
    return rel, Entry("dir", mode, 0)


def _check_copy(map_path: Path, store: Path, rel: str, entry: Entry) -> None:
    copy = store / (entry.stored or "")
    try:
        info = copy.lstat()
    except OSError:
        raise SnapshotError(
            f"{map_path}: {rel!r}: its saved copy {copy} is missing; the snapshot is damaged"
        ) from None
    if not stat.S_ISREG(info.st_mode) or info.st_size != entry.size:
        found = f"{info.st_size} bytes" if stat.S_ISREG(info.st_mode) else "no regular file"
        raise SnapshotError(
            f"{map_path}: {rel!r}: expected a saved copy of {entry.size} bytes at {copy}, "
            f"found {found}; the snapshot is damaged"
        )


def _is_inside_path(rel: str) -> bool:
    """A relative posix path whose every part names an entry below the root (never ``.git``)."""
    if not rel or "\0" in rel or rel.startswith("/"):
        return False
    return all(part not in ("", ".", "..", GIT_NAME) for part in rel.split("/"))


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)
