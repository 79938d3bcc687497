"""Crash-safe file writes: a reader sees the old file or the new one, never half of either.

Every artifact and baseline goes through ``atomic_write_bytes``: the data is written to a
temporary file in the target's own directory (so the final rename never crosses a file system),
flushed and fsynced, then moved over the target with ``os.replace``. If anything fails before the
rename, the temporary file is removed and the previous file is untouched.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
from pathlib import Path
from typing import Any

from trialrun.base import leftovers

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically, creating missing parent directories.

    A failure (a full disk, a read-only file system, a folder the user may not write) raises
    ``OSError`` naming ``path`` itself, never the temporary file; the previous file is untouched
    and the temporary file is gone.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = temporary_beside(target)
    try:
        # O_EXCL: never follow or reuse someone else's file; mode 0o666 lets the umask decide,
        # as for any file the user creates.
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    except OSError as exc:
        raise naming(exc, target) from None
    try:
        try:
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        _keep_permissions(target, temp)
        os.replace(temp, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            temp.unlink()
        if isinstance(exc, OSError):
            raise naming(exc, target) from None
        raise
    fsync_directory(target.parent)


def write_all(fd: int, data: bytes) -> None:
    """``os.write`` until every byte of ``data`` is written (a write may take only part)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def naming(exc: OSError, path: str | Path) -> OSError:
    """``exc`` as an error about ``path``: what a failed write says to the user.
    A ``write`` or ``fsync`` that fails (``ENOSPC``, ``EIO``) carries no file name, and one on a
    temporary file names a file the user never asked for; the CLI reports an ``OSError`` that
    names a file as ``error: <file>: <cause>``. The errno picks the same subclass.
    """
    return OSError(exc.errno, exc.strerror or str(exc), os.fspath(path))


def temporary_beside(target: Path) -> Path:
    """A fresh temporary name in ``target``'s directory, noted (``base.leftovers``) so that it
    is removed should this process be killed before it renames or removes it; ``trialrun`` and
    the owner's pid in the name tell a reader whose it is."""
    # secrets.token_hex(6), without importing random and hmac before the first agent starts.
    temp = target.with_name(f".{target.name}.trialrun-{os.getpid()}-{os.urandom(6).hex()}.tmp")
    leftovers.note_path(temp)
    return temp


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` as UTF-8 with the newlines given (no CRLF translation on any platform)."""
    atomic_write_bytes(path, text.encode("utf-8"))


def dumps_json(value: Any, *, indent: int | None = 2, sort_keys: bool = True) -> str:
    """JSON text that is always encodable as UTF-8.

    Non-ASCII text stays readable (``ensure_ascii=False``), but lone surrogates (an agent can send
    them as ``\\ud800`` escapes) are written back as ``\\udxxx`` escapes instead of making the
    UTF-8 encoder crash. A surrogate can only occur inside a JSON string, so the escape is valid
    JSON and decodes to the same value.
    """
    text = json.dumps(value, ensure_ascii=False, indent=indent, sort_keys=sort_keys)
    return escape_lone_surrogates(text)


def escape_lone_surrogates(text: str) -> str:
    """Replace each lone surrogate code point with its ``\\udxxx`` escape text."""
    return _LONE_SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def write_json(path: str | Path, value: Any) -> None:
    """Write ``value`` atomically: indent 2, sorted keys, UTF-8, trailing newline."""
    atomic_write_text(path, dumps_json(value) + "\n")


def _keep_permissions(target: Path, temp: Path) -> None:
    # Replacing a file must not silently change who may read it.
    try:
        mode = stat.S_IMODE(target.stat().st_mode)
    except FileNotFoundError:
        return
    os.chmod(temp, mode)


def fsync_directory(directory: Path) -> None:
    # Makes the rename itself durable on POSIX; directories cannot be opened on Windows.
    if os.name != "posix":
        return
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def make_output_dir(path: Path, *, exist_ok: bool = True) -> None:
    """``mkdir -p path`` for an output folder; ``ConfigError`` naming the path when it cannot be.

    A regular file in the way or a folder the user may not write is the user's input to fix,
    reported before any work starts rather than as a traceback after it.
    """
    from trialrun.errors import ConfigError

    try:
        path.mkdir(parents=True, exist_ok=exist_ok)
    except (FileExistsError, NotADirectoryError, PermissionError) as exc:
        if isinstance(exc, FileExistsError) and not exist_ok and os.path.isdir(path):
            raise
        blocker = _file_in_the_way(exc)
        if blocker is not None:
            raise ConfigError(_blocked(path), file=blocker) from None
        why = exc.strerror or str(exc)
        raise ConfigError(f"cannot create this folder: {why}", file=path) from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise ConfigError("cannot write to this folder: permission denied", file=path)


def describe_os_error(exc: OSError) -> str:
    """``<path>: <what went wrong>``; a file standing where a folder must be is named."""
    blocker = _file_in_the_way(exc)
    if blocker is not None:
        return f"{blocker}: {_blocked(os.fsdecode(exc.filename))}"
    if exc.filename is None:
        return str(exc)
    return f"{os.fsdecode(exc.filename)}: {exc.strerror or exc}"


def _blocked(needed: str | Path) -> str:
    return f"expected a folder, found a file (a folder is needed here for {needed})"


def _file_in_the_way(exc: OSError) -> Path | None:
    """The regular file among ``exc.filename``'s ancestors (or itself, for a mkdir) if any."""
    if exc.filename is None or not isinstance(exc, (FileExistsError, NotADirectoryError)):
        return None
    path = Path(os.fsdecode(exc.filename))
    for candidate in (path, *path.parents):
        # os.path, not Path: its checks answer False instead of raising PermissionError.
        if os.path.lexists(candidate) and not os.path.isdir(candidate):
            return candidate
    return None


def undecodable(raw: bytes, exc: UnicodeDecodeError) -> tuple[str, int]:
    """Where ``raw`` stops being UTF-8: ``byte 0x.. at offset N`` and the 1-based line it is on."""
    return (
        f"byte 0x{raw[exc.start]:02x} at offset {exc.start}",
        raw.count(b"\n", 0, exc.start) + 1,
    )


def read_problem(exc: OSError | UnicodeDecodeError) -> str:
    """Why a text file could not be read, for a message that already names the file."""
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 text: {undecodable(exc.object, exc)[0]}"
    if isinstance(exc, FileNotFoundError):
        return "file not found"
    if isinstance(exc, IsADirectoryError):
        return "expected a file, found a folder"
    return exc.strerror or str(exc)
