"""Trigger evaluation by selector: ask a ``triggers.command`` which subjects a prompt calls for.

When compare.yaml has ``triggers: {command: [argv...]}``, each prompt of ``triggers.yaml`` is not
run through the candidate agent; instead the selector reads one JSON document on stdin,

    {"catalog": [{"name": ..., "description": ...}, ...], "prompt": ...}

and prints ``{"selected": [names]}``. The subject fired when its name (compare.yaml ``name``, the
name it is staged under) is among the selected. The catalog is every subject beside the one
evaluated, as the seed sent the Library root's ``- name: description`` lines: each sibling folder
with a ``SKILL.md`` (its frontmatter ``name`` and ``description``; the folder name when the
frontmatter has none), plus the evaluated subject itself, sorted by name so the order never
depends on the file system.

Each call runs in its own process group with a timeout; the whole group is killed afterwards, so
a helper left in the background cannot outlive its call. A call that cannot start, exits non-zero,
times out or prints anything but the expected answer is an errored probe (``fired`` None): it
counts in neither cell of its row and is named in the report, whichever way the prompt should go.

``k`` repeats every prompt; each call is its own probe, so recall and precision are rates over
calls and a prompt that went the wrong way twice is listed twice. The environment variable
``TRIALRUN_REP`` (0-based) tells the selector which repetition it is answering.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trialrun.base.fsutil import read_problem
from trialrun.base.quoting import shortened
from trialrun.compare.oneshot import CommandTimeout, ask_command
from trialrun.config.spec import ListOf, Record, Str, keyed
from trialrun.config.yamlload import parse_yaml_value
from trialrun.errors import ConfigError, ConfigErrors

__all__ = [
    "SKILL_FILE",
    "CatalogEntry",
    "SelectorCallError",
    "SelectorSection",
    "ask_selector",
    "build_catalog",
    "parse_selection",
    "read_description",
    "selection_payload",
]

SKILL_FILE = "SKILL.md"
_FRONTMATTER_FENCE = "---"


class SelectorSection(Record):
    """compare.yaml's ``triggers`` section: the selector's argv (``{evals}`` and ``{name}``)."""

    command: list[str] = keyed(ListOf(Str(), min_length=1))


@dataclass(frozen=True)
class CatalogEntry:
    name: str
    description: str


class SelectorCallError(Exception):
    """One selector call gave no usable answer; the message is what the report shows."""


def read_description(folder: Path, *, strict: bool = False) -> tuple[str | None, str]:
    """The frontmatter ``name`` (None when absent) and ``description`` ("" when absent) of
    ``folder/SKILL.md``.

    A sibling's unreadable or malformed frontmatter reads as neither: it must not stop the
    evaluation of this subject. With ``strict`` (the subject itself) it is a ``ConfigError`` at
    its line: read as an empty description, it would change what the selector picks, silently.
    """
    try:
        return _frontmatter(folder / SKILL_FILE)
    except ConfigError:
        if strict:
            raise
        return None, ""


def _frontmatter(path: Path) -> tuple[str | None, str]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, ""  # a subject need not be a skill
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the skill file: {read_problem(exc)}", file=path) from None
    lines = text.splitlines()
    if not lines or lines[0].strip() != _FRONTMATTER_FENCE:
        return None, ""
    end = next(
        (i for i, line in enumerate(lines[1:], 1) if line.strip() == _FRONTMATTER_FENCE), None
    )
    if end is None:
        raise ConfigError("the frontmatter opened here is never closed by '---'", file=path, line=1)
    try:
        data = parse_yaml_value("\n".join(lines[1:end]), file=str(path))
    except ConfigErrors as exc:  # duplicate keys: the first says enough about a frontmatter
        raise _in_frontmatter(exc.errors[0], path) from None
    except ConfigError as exc:
        raise _in_frontmatter(exc, path) from None
    if data is None:
        return None, ""
    if not isinstance(data, dict):
        raise ConfigError("expected the frontmatter to be a mapping of keys", file=path, line=2)
    name, description = data.get("name"), data.get("description", "")
    if not isinstance(description, str):
        raise ConfigError(
            f"expected 'description' to be text, found {type(description).__name__}",
            file=path,
            line=_key_line(lines[1:end], "description"),
        )
    return (name.strip() if isinstance(name, str) and name.strip() else None), description.strip()


def _in_frontmatter(error: ConfigError, path: Path) -> ConfigError:
    """``error`` about the frontmatter's text, at its line in the file (after the fence)."""
    message = error.message.replace("invalid YAML: ", "invalid YAML in the frontmatter: ", 1)
    line = error.line + 1 if error.line is not None else 2
    return ConfigError(message, file=path, line=line, key=error.key)


def _key_line(frontmatter: list[str], key: str) -> int:
    for number, line in enumerate(frontmatter, 2):
        if line.startswith(f"{key}:"):
            return number
    return 2


def build_catalog(subject: Path, name: str) -> list[CatalogEntry]:
    """The evaluated subject (as ``name``) and every sibling folder holding a SKILL.md, by name.

    A sibling whose name equals an entry already taken (the subject's first) is left out: two
    entries of one name would make a selection of that name ambiguous.
    """
    root = subject.resolve()
    entries = {name: CatalogEntry(name, read_description(root, strict=True)[1])}
    for folder in sorted(root.parent.iterdir(), key=lambda path: path.name):
        if folder.name.startswith(".") or not (folder / SKILL_FILE).is_file():
            continue
        if folder.resolve() == root:
            continue
        own_name, description = read_description(folder)
        entry = CatalogEntry(own_name or folder.name, description)
        entries.setdefault(entry.name, entry)
    return sorted(entries.values(), key=lambda entry: entry.name)


def selection_payload(catalog: list[CatalogEntry], prompt: str) -> str:
    items = [{"name": entry.name, "description": entry.description} for entry in catalog]
    return json.dumps({"catalog": items, "prompt": prompt}, ensure_ascii=False)


def parse_selection(stdout: str) -> list[str]:
    """The names of a ``{"selected": [names]}`` answer: the whole output, or its last non-empty
    line (a selector may log before answering). Raises SelectorCallError saying what was found."""
    candidates = [stdout.strip()]
    # Only newlines end a line: json.dumps leaves U+0085 / U+2028 raw inside strings.
    lines = [line.strip() for line in stdout.split("\n") if line.strip()]
    if lines:
        candidates.append(lines[-1])
    for text in candidates:
        try:
            answer: Any = json.loads(text)
        except (ValueError, RecursionError):  # also an integer of 5,000 digits, or nesting
            continue
        selected = answer.get("selected") if isinstance(answer, dict) else None
        if isinstance(selected, list) and all(isinstance(item, str) for item in selected):
            return list(selected)
    raise SelectorCallError(
        f'expected {{"selected": [names]}} on stdout, found {_preview(stdout) or "nothing"}'
    )


def ask_selector(argv: list[str], payload: str, rep: int, timeout_s: float) -> list[str]:
    """The names one selector call selects; ``SelectorCallError`` when it gives no usable answer."""
    env = {**os.environ, "TRIALRUN_REP": str(rep)}
    try:
        answer = ask_command(argv, payload, timeout_s=timeout_s, env=env)
    except OSError as error:
        raise SelectorCallError(
            f"cannot start selector {argv[0]!r}: {error.strerror or error}"
        ) from None
    except CommandTimeout:
        raise SelectorCallError(
            f"selector gave no answer within {timeout_s:g}s (its process group was killed)"
        ) from None
    if answer.returncode != 0:
        stderr = _preview(answer.stderr)
        raise SelectorCallError(
            f"selector exited with code {answer.returncode}, expected 0"
            + (f" (stderr: {stderr})" if stderr else "")
        )
    return parse_selection(answer.stdout)


def _preview(text: str, limit: int = 120) -> str:
    return shortened(" ".join(text.split()), limit)
