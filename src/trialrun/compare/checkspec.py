"""The check kinds a compare case may use, validated and compiled when the case is loaded.

A check is a single-key mapping from its kind to one string (``file_exists: out.txt``). A bare
string is refused rather than guessed at. Regexes are compiled here, so a bad pattern is a load
error at its line, never a check that silently fails during a run. Paths must stay in the sandbox.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from trialrun.base.quoting import excerpt
from trialrun.base.suggest import did_you_mean
from trialrun.config.messages import describe_value
from trialrun.config.paths import PATH_CHARS, nul_problem
from trialrun.config.yamlload import LoadedYaml, PathElement
from trialrun.errors import ConfigError

CHECK_KINDS = (
    "transcript_mentions",
    "transcript_omits",
    "command_matching",
    "no_command_matching",
    "file_exists",
    "file_absent",
    "command_succeeds",
)
REGEX_KINDS = frozenset({"command_matching", "no_command_matching"})
PATH_KINDS = frozenset({"file_exists", "file_absent"})


@dataclass(frozen=True)
class Check:
    kind: str
    """One of ``CHECK_KINDS``."""
    param: str
    pattern: re.Pattern[str] | None
    """Compiled for command_matching / no_command_matching, else None."""
    line: int


def sandbox_path_problem(raw: str) -> str | None:
    """Why ``raw`` cannot name a file inside a sandbox, or None when it can.

    Either slash separates; ``a/../b`` is fine, ``../b``, ``/b`` and ``C:/b`` are not.
    """
    cleaned = raw.replace("\\", "/")
    if not cleaned.strip():
        return "path is empty"
    if (problem := nul_problem(raw)) is not None:
        return problem
    shown = excerpt(raw, PATH_CHARS)
    if cleaned.startswith("/") or re.match(r"[A-Za-z]:", cleaned):
        return f"path '{shown}' is absolute; write it relative to the sandbox"
    normal = posixpath.normpath(cleaned)
    if normal == ".." or normal.startswith("../"):
        return f"path '{shown}' escapes the sandbox"
    if normal == ".":
        return f"path '{shown}' names the sandbox itself, not a file in it"
    return None


def compile_checks(
    doc: LoadedYaml, at: Sequence[PathElement], raw: Any
) -> tuple[tuple[Check, ...] | None, list[ConfigError]]:
    """The checks of the list at ``at`` (None when any is bad) and every problem found.

    A missing list is no checks; a list of the wrong type is left to model validation.
    """
    if not isinstance(raw, list):
        return (() if raw is None else None), []
    checks: list[Check] = []
    errors: list[ConfigError] = []
    for index, entry in enumerate(raw):
        check, error = _compile_check(doc, (*at, index), entry)
        if error is not None:
            errors.append(error)
        elif check is not None:
            checks.append(check)
    return (None if errors else tuple(checks)), errors


def _compile_check(
    doc: LoadedYaml, at: tuple[PathElement, ...], entry: Any
) -> tuple[Check | None, ConfigError | None]:
    if not isinstance(entry, dict) or len(entry) != 1:
        if isinstance(entry, dict):
            shown = f"a mapping with {len(entry)} keys"
        else:
            shown = f"string {entry!r}" if isinstance(entry, str) else describe_value(entry)
        message = (
            "a check is a mapping of one kind to its value (e.g. 'file_exists: out.txt'), "
            f"found {shown}"
        )
        return None, doc.error(message, at)
    ((kind, param),) = entry.items()
    if kind not in CHECK_KINDS:
        hint = did_you_mean(str(kind), CHECK_KINDS)
        message = f"unknown check kind '{kind}'{hint}; known: {', '.join(CHECK_KINDS)}"
        return None, doc.error(message, at, str(kind))
    where = (*at, kind)
    if not isinstance(param, str) or not param.strip():
        found = "an empty string" if isinstance(param, str) else describe_value(param)
        return None, doc.error(f"'{kind}' needs a non-empty string, found {found}", where, kind)
    pattern = None
    if kind in REGEX_KINDS:
        try:
            pattern = re.compile(param)
        except re.error as exc:
            position = f" at position {exc.pos}" if exc.pos is not None else ""
            message = f"invalid regular expression in '{kind}': {exc.msg}{position}"
            return None, doc.error(message, where, kind)
    if kind in PATH_KINDS and (problem := sandbox_path_problem(param)) is not None:
        return None, doc.error(f"'{kind}': {problem}", where, kind)
    return Check(kind, param, pattern, doc.line_of(at)), None
