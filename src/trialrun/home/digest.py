"""Content digests that bind a compare receipt to the exact bytes it evaluated.

All three digests use one construction: ``"sha256:"`` + SHA-256 of the lines
``"<relpath>:<sha256-hex of the file's bytes>\\n"``, one per file, sorted.

Decisions the issue leaves open, fixed here so that two machines agree:

- Only regular files count. A symlink (to a file or a directory) is left out and never followed:
  following it would let the digest depend on bytes outside the folder, and the arms copy the
  folder without it. Empty directories, sockets and FIFOs leave no trace either; file modes do not
  count.
- ``relpath`` joins the path components with ``/``. A backslash inside a POSIX file name stays a
  literal character (it is not a separator there).
- Lines are sorted by the UTF-8 bytes of ``relpath`` (the same as code-point order), over the
  whole tree at once, never directory by directory: ``a-b`` < ``a.txt`` < ``a/b``. Names that are
  not valid UTF-8 keep their raw bytes (surrogate escapes), so every name has one encoding.
- ``.DS_Store`` and ``Thumbs.db`` are left out at any depth.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

from trialrun.config.yamlload import load_yaml_file
from trialrun.errors import ConfigError

DIGEST_PREFIX = "sha256:"
SUBJECT_EXCLUDED_TOP_LEVEL = frozenset({"evals", ".git"})
"""Eval assets have their own digest; a subject's git metadata is not part of its content."""
EXCLUDED_NAMES_ANYWHERE = frozenset({".DS_Store", "Thumbs.db"})
CASE_LINE_NAME = "case"
"""The name under which a case file's own bytes enter its case digest."""
FIXTURE_PREFIX = "fixture/"


def content_digest(subject: Path) -> str:
    """The subject's digest, leaving out its top-level ``evals/`` and ``.git/``."""
    return digest_tree(subject, excluded_top_level=SUBJECT_EXCLUDED_TOP_LEVEL)


def eval_assets_digest(evals_dir: Path) -> str:
    """The digest of every eval asset (cases, session, triggers, fixtures, compare.yaml)."""
    return digest_tree(evals_dir, excluded_top_level=frozenset())


def case_digest(case_file: Path) -> str:
    """The digest of one case: its file's bytes, plus its ``fixture`` directory when it has one.

    Inline ``files`` are part of the case file, so its bytes already cover them. The fixture is
    resolved against the case file's directory, as the loader does, and its files enter as
    ``fixture/<relpath>`` lines. Two receipts compare the same case only when these are equal.
    Raises ConfigError when the case file or its fixture cannot be read.
    """
    lines = [(CASE_LINE_NAME, _file_sha256(case_file))]
    fixture = load_yaml_file(case_file).data.get("fixture")
    if isinstance(fixture, str):
        fixture_dir = case_file.parent / fixture.replace("\\", "/")
        if not fixture_dir.is_dir():
            raise ConfigError(
                f"fixture '{fixture}' is not a directory ({fixture_dir})", file=case_file
            )
        lines.extend(
            (FIXTURE_PREFIX + relpath, sha)
            for relpath, sha in _tree_lines(fixture_dir, frozenset())
        )
    return _combine(lines)


def digest_tree(root: Path, *, excluded_top_level: frozenset[str]) -> str:
    """The digest of every regular file under ``root`` (see the module docstring)."""
    if not root.is_dir():
        raise ConfigError(f"cannot digest {root}: expected a directory, found none")
    return _combine(list(_tree_lines(root, excluded_top_level)))


def _combine(lines: list[tuple[str, str]]) -> str:
    outer = hashlib.sha256()
    for relpath, sha in sorted(lines, key=lambda line: _name_bytes(line[0])):
        outer.update(_name_bytes(relpath) + f":{sha}\n".encode("ascii"))
    return DIGEST_PREFIX + outer.hexdigest()


def _tree_lines(root: Path, excluded_top_level: frozenset[str]) -> Iterator[tuple[str, str]]:
    for relpath, path in _regular_files(root, (), excluded_top_level):
        yield relpath, _file_sha256(path)


def _regular_files(
    directory: Path, parts: tuple[str, ...], excluded_top_level: frozenset[str]
) -> Iterator[tuple[str, Path]]:
    try:
        entries = list(os.scandir(directory))
    except OSError as exc:
        raise ConfigError(f"cannot list {directory}: {exc.strerror or exc}") from None
    for entry in entries:
        if entry.name in EXCLUDED_NAMES_ANYWHERE:
            continue
        if not parts and entry.name in excluded_top_level:
            continue
        if entry.is_symlink():
            continue
        path = Path(entry.path)
        if entry.is_dir(follow_symlinks=False):
            yield from _regular_files(path, (*parts, entry.name), excluded_top_level)
        elif entry.is_file(follow_symlinks=False):
            yield "/".join((*parts, entry.name)), path


def _file_sha256(path: Path) -> str:
    try:
        with path.open("rb") as handle:
            return hashlib.file_digest(handle, "sha256").hexdigest()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None


def _name_bytes(relpath: str) -> bytes:
    return relpath.encode("utf-8", "surrogateescape")
