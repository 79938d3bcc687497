"""The commit and branch a run starts from, for the receipt's ``run_start``.

Asking git means waiting for git processes to start and answer. ``git_state_ahead`` starts
the question early, so a run does other work (its imports) while git answers, and the
``git_state`` call inside the block only collects the answer.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_TIMEOUT_S = 10
# Questions started by git_state_ahead, by the root asked about, until git_state collects them.
_ahead: dict[Path, subprocess.Popen[str]] = {}


def git_state(root: Path) -> tuple[str | None, str]:
    """``(commit, branch)`` of the repository holding ``root``; ``(None, "")`` outside git or
    before the first commit. One git process, so every run pays for it once and briefly."""
    process = _ahead.pop(root, None) or _ask(root)
    if process is None:
        return None, ""
    return _answer(process)


@contextmanager
def git_state_ahead(root: Path) -> Iterator[None]:
    """Ask git about ``root`` now; a ``git_state(root)`` inside the block collects the answer.

    A question nobody collected is reaped when the block ends, so a later ``git_state`` never
    gets an answer older than its own block.
    """
    if root in _ahead:  # an enclosing block already asked
        yield
        return
    process = _ask(root)
    if process is None:
        yield
        return
    _ahead[root] = process
    try:
        yield
    finally:
        if _ahead.get(root) is process:
            del _ahead[root]
            process.kill()
            process.communicate()


def _ask(root: Path) -> subprocess.Popen[str] | None:
    try:
        return subprocess.Popen(
            ["git", "rev-parse", "HEAD", "--abbrev-ref", "HEAD"],
            cwd=root,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
    except (OSError, subprocess.SubprocessError):  # no git, or root is gone
        return None


def _answer(process: subprocess.Popen[str]) -> tuple[str | None, str]:
    try:
        stdout, _ = process.communicate(timeout=_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        return None, ""
    lines = stdout.split()
    if process.returncode != 0 or len(lines) != 2:
        return None, ""
    return lines[0], lines[1]
