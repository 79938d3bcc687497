"""One file's difference between a workspace snapshot and the workspace now.

Diffs are git-style unified diffs with ``a/`` and ``b/`` headers (``old mode`` / ``new mode``
lines first when the mode changed). ``diff_sha256`` is always present: the SHA-256 of the full
UTF-8 diff text even when the text itself is omitted for size, or, for binary files (a NUL byte,
or not UTF-8), of the new bytes (the empty string's hash for a deleted file). A symlink's content
is its target. Secrets are NOT redacted here: the harness redacts diffs before they enter a
receipt.
"""

from __future__ import annotations

import difflib
import hashlib
import stat
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["DEFAULT_MAX_DIFF_BYTES", "ChangeKind", "FileChange", "describe", "git_mode"]

DEFAULT_MAX_DIFF_BYTES = 64 * 1024

ChangeKind = Literal["added", "modified", "deleted"]
_RECEIPT_STATUS: dict[ChangeKind, str] = {
    "added": "created",
    "modified": "modified",
    "deleted": "deleted",
}


@dataclass(frozen=True, slots=True)
class FileChange:
    """One file that differs between a snapshot and the workspace now."""

    path: str  # posix, relative to the workspace root
    change: ChangeKind
    diff: str | None  # None for binary files and for diffs past max_diff_bytes
    diff_sha256: str
    binary: bool
    truncated: bool
    before_sha256: str | None = None  # content hash in the snapshot; None when added
    after_sha256: str | None = None  # content hash now; None when deleted

    def receipt_data(self) -> dict[str, Any]:
        """The ``file_change`` event members of the receipt format (status ``created`` etc.)."""
        data: dict[str, Any] = {
            "path": self.path,
            "status": _RECEIPT_STATUS[self.change],
            "beforeSha256": self.before_sha256,
            "afterSha256": self.after_sha256,
            "diffSha256": self.diff_sha256,
        }
        if self.diff is not None:
            data["diff"] = self.diff
        if self.truncated:
            data["diffTruncated"] = True
        return data


def git_mode(is_symlink: bool, mode: int) -> str:
    return "120000" if is_symlink else f"{stat.S_IFREG | mode:06o}"


def describe(
    rel: str,
    old: tuple[bytes, str] | None,
    new: tuple[bytes, str] | None,
    max_diff_bytes: int,
) -> FileChange:
    """The change from ``old`` to ``new``, each (content, git mode) or None when absent."""
    change: ChangeKind = "added" if old is None else "deleted" if new is None else "modified"
    old_bytes = old[0] if old else b""
    new_bytes = new[0] if new else b""
    before = _sha256(old_bytes) if old else None
    after = _sha256(new_bytes) if new else None
    old_text, new_text = _as_text(old_bytes), _as_text(new_bytes)
    if old_text is None or new_text is None:
        return FileChange(rel, change, None, _sha256(new_bytes), True, False, before, after)
    header = ""
    if old and new and old[1] != new[1]:
        header = f"old mode {old[1]}\nnew mode {new[1]}\n"
    text = header + _unified_diff(rel, old_text, new_text)
    digest = _sha256(text.encode("utf-8", "surrogateescape"))
    if len(text.encode("utf-8", "surrogateescape")) > max_diff_bytes:
        return FileChange(rel, change, None, digest, False, True, before, after)
    return FileChange(rel, change, text, digest, False, False, before, after)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _as_text(data: bytes) -> str | None:
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _unified_diff(rel: str, old_text: str, new_text: str) -> str:
    lines = difflib.unified_diff(
        old_text.splitlines(keepends=True),
        new_text.splitlines(keepends=True),
        fromfile=f"a/{rel}",
        tofile=f"b/{rel}",
    )
    # A last line without a newline gets git's marker, so the diff stays line-structured.
    return "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines
    )
