"""Where the paths written in suite and case files point, and which of them are allowed.

Every path in a suite is relative to the suite directory (RunLedger's rule), written with either
slash. A suite may reach outside its own directory (``../../baselines/demo.json`` is common) but
never outside the repository that holds it, so a checked-in suite cannot make the runner read or
overwrite arbitrary files. Without a repository (a tarball, ``git archive``, a Docker build), the
boundary is the working directory when the suite lies below it, else the suite directory.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from trialrun.base.quoting import excerpt

PATH_CHARS = 160
"""How much of a path written in a file a message quotes (it can be as long as the file)."""


class PathEscapeError(ValueError):
    """A configured path resolves outside the allowed root (the message says which root)."""


def find_repository_root(start: Path) -> Path | None:
    """The nearest directory at or above ``start`` holding ``.git`` (a directory or a file)."""
    for directory in (start, *start.parents):
        if (directory / ".git").exists():
            return directory
    return None


def with_forward_slashes(raw: str) -> str:
    """Suites written on Windows use backslashes; both mean the same directory separator."""
    return raw.replace("\\", "/")


def display_path(path: str | Path, cwd: Path | None = None) -> str:
    """How trialrun names a file to a person, in messages and artifacts alike.

    An absolute path inside ``cwd`` (default: the working directory) becomes relative to it,
    symlinks in either one resolved if that is what it takes; anything else stays as it is.
    Separators are always ``/``.
    """
    text = str(path)
    if not text or not Path(text).is_absolute():
        return text.replace("\\", "/")
    absolute = Path(text)
    base = _resolved_dir(str(cwd if cwd is not None else Path.cwd()))
    for candidate in (absolute, absolute.resolve()):
        try:
            return candidate.relative_to(base).as_posix() or "."
        except ValueError:
            continue
    return absolute.as_posix()


def nul_problem(raw: str, what: str = "path") -> str | None:
    """Why ``raw`` names no file when it holds a NUL (YAML lets ``"\\0"`` in), else None.

    Checked before anything resolves it: ``Path.resolve`` raises ValueError on one.
    """
    if "\0" not in raw:
        return None
    return f"{what} {excerpt(raw, PATH_CHARS)!r} holds a NUL character, which no file name can"


@lru_cache(maxsize=16)
def _resolved_dir(directory: str) -> Path:
    # A run names hundreds of files relative to one or two directories: resolve each once.
    return Path(directory).resolve()


@dataclass(frozen=True)
class SuitePaths:
    """Resolves the paths of one suite against its directory, inside its root."""

    suite_dir: Path
    """Absolute, symlinks resolved."""
    root: Path
    """The repository root holding the suite; without one, the working directory when the suite
    lies below it, else ``suite_dir``."""
    in_repository: bool

    @classmethod
    def for_suite_dir(cls, suite_dir: Path, cwd: Path | None = None) -> SuitePaths:
        resolved = suite_dir.resolve()
        repository = find_repository_root(resolved)
        if repository is not None:
            return cls(suite_dir=resolved, root=repository, in_repository=True)
        here = _resolved_dir(str(cwd if cwd is not None else Path.cwd()))
        root = here if resolved.is_relative_to(here) else resolved
        return cls(suite_dir=resolved, root=root, in_repository=False)

    def resolve(self, raw: str) -> Path:
        """The absolute, symlink-free path ``raw`` names; PathEscapeError if it leaves the root."""
        if not raw.strip():
            raise PathEscapeError("path is empty")
        if (problem := nul_problem(raw)) is not None:
            raise PathEscapeError(problem)
        resolved = (self.suite_dir / with_forward_slashes(raw)).resolve()
        if not resolved.is_relative_to(self.root):
            raise PathEscapeError(
                f"path '{excerpt(raw, PATH_CHARS)}' resolves outside {self.boundary} ({self.root})"
            )
        return resolved

    @property
    def boundary(self) -> str:
        """What the root is, in words: the repository, the working directory or the suite
        directory."""
        if self.in_repository:
            return "the repository"
        return "the suite directory" if self.root == self.suite_dir else "the working directory"

    def is_inside(self, path: Path) -> bool:
        """Whether ``path`` (absolute), symlinks followed, lies inside the root.

        For files a suite reaches without naming them (the files of ``cases_path``, the
        recordings beside a cassette): a symlink among them may point anywhere.
        """
        try:
            return path.resolve().is_relative_to(self.root)
        except (OSError, RuntimeError):  # a symlink loop leads nowhere, certainly not inside
            return False

    def module_outside(self, name: str) -> Path | None:
        """The file or package of module ``name`` in the suite directory that lies outside the
        root, if any.

        A tool module is imported by name, from the suite directory first: a symlink there (the
        module, or a package it is in) would run code from anywhere.
        """
        if not name or "\0" in name:
            return None
        parts = name.split(".")
        for depth in range(1, len(parts) + 1):
            stem = self.suite_dir.joinpath(*parts[:depth])
            for candidate in (stem, stem.with_name(stem.name + ".py")):
                if os.path.lexists(candidate) and not self.is_inside(candidate):
                    return candidate
        return None

    def agent_command(self, parts: Sequence[str]) -> list[str]:
        """RunLedger's rule: a relative part naming something under the suite dir becomes absolute.

        Other parts (``python3``, flags, paths that do not exist here) pass through unchanged, so
        they keep resolving against the working directory or PATH as they did for RunLedger.
        Symlinks are kept: a virtualenv's ``bin/python`` must not be replaced by its target.
        """
        command: list[str] = []
        for part in parts:
            cleaned = with_forward_slashes(part)
            if cleaned.strip() and not os.path.isabs(cleaned):
                candidate = os.path.normpath(self.suite_dir / cleaned)
                if os.path.exists(candidate):
                    command.append(candidate)
                    continue
            command.append(cleaned)
        return command
