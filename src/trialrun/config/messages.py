"""Plain-language messages for validation errors in suite, case, compare and plan files.

``config.spec`` says "int_type" under a location tuple; a user wants "'max_tool_calls' must be an
integer, found string '10'" at the line they wrote it, and a did-you-mean for a misspelt key. This
module does that translation and nothing else.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from datetime import date, datetime
from typing import Any, Protocol

from trialrun.base.quoting import excerpt
from trialrun.base.suggest import closest
from trialrun.config import spec
from trialrun.config.yamlload import PathElement
from trialrun.errors import ConfigError

Detail = Mapping[str, Any]
"""A ``config.spec`` issue."""


class Located(Protocol):
    """A loaded file that places an error at the line of a path (``LoadedYaml``, ...)."""

    def error(
        self, message: str, path: Sequence[PathElement] = (), key: str | None = None
    ) -> ConfigError: ...


_PREVIEW_CHARS = 40
_SUGGESTED_CHARS = 200
"""A message quotes or rewrites at most this much of a value (a command it suggests, say)."""

_MUST_BE = {
    "int_type": "an integer",
    "float_type": "a number",
    "string_type": "a string",
    "bool_type": "true or false",
    "list_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "finite_number": "a finite number",
    "host_port": "host:port (a port from 1 to 65535; [address]:port for IPv6)",
}
_BOUNDS = {
    "greater_than_equal": (">=", "ge"),
    "greater_than": (">", "gt"),
    "less_than_equal": ("<=", "le"),
}


def describe_value(value: Any) -> str:
    """``string '10'``, ``integer 5``, ``null``, ``a list``: how a found value is shown."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean {'true' if value else 'false'}"
    if isinstance(value, int):
        return f"integer {value}"
    if isinstance(value, float):
        return f"number {value}"
    if isinstance(value, str):
        return f"string {excerpt(value, _PREVIEW_CHARS)!r}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, datetime | date):
        return f"a YAML {type(value).__name__} ({value.isoformat()})"
    return f"a YAML {type(value).__name__}"


def spec_errors(
    exc: spec.SpecError,
    doc: Located,
    record: type[spec.Record] | spec.Spec,
    what: str,
    *,
    owner: Callable[[tuple[PathElement, ...]], str | None] = lambda loc: None,
) -> list[ConfigError]:
    """One ConfigError per issue ``spec.parse`` found in ``doc``, at the line of the key.

    ``what`` names the top-level mapping in messages ("suite", "case"). ``owner`` names the entry
    an issue's location is in ("rule 'a'", "prices of 'gpt-4o'"), when a message should say so.
    Assertion entries are left to the assertion compiler, which explains them better.
    """

    def keys_at(loc: Sequence[PathElement]) -> list[str]:
        found = spec.record_at(record, loc)
        return spec.accepted_keys(found) if found is not None else []

    details = [d for d in exc.issues if not _is_assertion_entry(d["loc"])]
    missing = {(d["loc"][:-1], d["loc"][-1]) for d in details if d["type"] == "missing"}
    explained_missing: set[tuple[tuple[PathElement, ...], PathElement]] = set()
    errors: list[ConfigError] = []
    for detail in details:
        loc = tuple(detail["loc"])
        if detail["type"] == "extra_forbidden":
            unknown = str(loc[-1])
            choices = keys_at(loc[:-1])
            suggestion = closest(unknown, choices) if len(unknown) <= _PREVIEW_CHARS else None
            hint = f" (did you mean '{suggestion}'?)" if suggestion else ""
            if suggestion is not None and (loc[:-1], suggestion) in missing:
                explained_missing.add((loc[:-1], suggestion))
            where = owner(loc) or (_name(loc[:-1]) if loc[:-1] else what)
            message = f"unknown key '{excerpt(unknown, _PREVIEW_CHARS)}' in {where}{hint}"
            errors.append(doc.error(message, loc, unknown))
    for detail in details:
        loc = tuple(detail["loc"])
        if detail["type"] == "extra_forbidden":
            continue
        if detail["type"] == "missing":
            if (loc[:-1], loc[-1]) in explained_missing:
                continue
            where = owner(loc) or (_name(loc[:-1]) if loc[:-1] else what)
            message = f"missing required key '{loc[-1]}' in {where}"
            errors.append(doc.error(message, loc[:-1], str(loc[-1])))
            continue
        line_path = _without_key_mark(loc)
        entry = owner(loc)
        if entry and _name(loc).startswith("[") and detail["type"] != "invalid_key":
            # An entry of a top-level list itself: named by the owner, not by its index.
            message = _message(detail, loc, entry)
        else:
            message = f"{entry}: {_message(detail, loc)}" if entry else _message(detail, loc)
        errors.append(doc.error(message, line_path, _key(loc)))
    errors.sort(key=lambda e: e.line or 0)
    return errors


def _message(detail: Detail, loc: tuple[PathElement, ...], name: str | None = None) -> str:
    kind = detail["type"]
    value = detail.get("input")
    ctx = detail.get("ctx") or {}
    name = name or _name(loc)
    if loc and loc[-1] == "[key]":
        owner = f"'{_name(loc[:-2])}'" if loc[:-2] else "the file"
        if kind == "string_pattern_mismatch":
            return (
                f"keys of {owner} must be plain names (letters, digits, '_' and '-', starting "
                f"with a letter or digit), found {describe_value(value)}"
            )
        if kind == "literal_error":
            expected = ctx.get("expected")
            return f"keys of {owner} must be one of {expected}, found {describe_value(value)}"
        return f"keys of {owner} must be strings, found {describe_value(value)}"
    if kind == "invalid_key":  # a YAML key that is a number, a date, ...: loc ends with it
        owner = f"'{_name(loc[:-1])}'" if loc[:-1] else "the file"
        return f"keys of {owner} must be strings, found {describe_value(loc[-1])}"
    if (
        loc == ("agent_command",)
        and kind == "list_type"
        and isinstance(value, str)
        and len(value) <= _SUGGESTED_CHARS
    ):
        return (
            "'agent_command' must be a list of strings, not one string; write "
            f"agent_command: {json.dumps(_split_command(value))}"
        )
    if kind in _MUST_BE:
        return f"'{name}' must be {_MUST_BE[kind]}, found {describe_value(value)}"
    if kind in _BOUNDS:
        symbol, bound_key = _BOUNDS[kind]
        return f"'{name}' must be {symbol} {_scalar(ctx.get(bound_key))}, found {_scalar(value)}"
    if kind == "literal_error":
        allowed = re.findall(r"'([^']*)'", str(ctx.get("expected", "")))
        hint = ""
        if isinstance(value, str) and (match := closest(value, allowed)) is not None:
            hint = f" (did you mean '{match}'?)"
        return f"'{name}' must be one of {', '.join(allowed)}; found {describe_value(value)}{hint}"
    if kind == "string_pattern_mismatch":
        return f"'{name}' must match {ctx.get('pattern')}, found {describe_value(value)}"
    if kind in ("string_too_short", "too_short"):
        minimum = ctx.get("min_length", 1)
        if minimum == 1:
            return f"'{name}' must not be empty"
        if kind == "too_short":
            return f"'{name}' must have at least {minimum} items, found {ctx.get('actual_length')}"
        return f"'{name}' must be at least {minimum} characters, found {describe_value(value)}"
    return f"'{name}': {kind}"  # a new kind of issue that no message words yet


def _name(loc: Sequence[PathElement]) -> str:
    """The last key of ``loc`` plus the list indexes after it: ``agent_command[1]``."""
    parts = list(_without_key_mark(loc))
    suffix = ""
    while parts and isinstance(parts[-1], int):
        suffix = f"[{parts.pop()}]" + suffix
    return (excerpt(str(parts[-1]), _PREVIEW_CHARS) if parts else "") + suffix


def _key(loc: Sequence[PathElement]) -> str | None:
    names = [e for e in _without_key_mark(loc) if isinstance(e, str)]
    return names[-1] if names else None


def _without_key_mark(loc: Sequence[PathElement]) -> tuple[PathElement, ...]:
    """``loc`` without the ``"[key]"`` that ends the place of a refused key: only at the end,
    so a key that is itself spelled ``[key]`` stays in the path."""
    return tuple(loc[:-1]) if loc and loc[-1] == "[key]" else tuple(loc)


def _scalar(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))  # a bound of 0.0 reads better as 0
    return json.dumps(value) if isinstance(value, int | float) else describe_value(value)


def _split_command(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError:  # unbalanced quotes: a plain split is still a useful suggestion
        return text.split()


def _is_assertion_entry(loc: Sequence[PathElement]) -> bool:
    return len(loc) >= 2 and loc[0] == "assertions" and isinstance(loc[1], int)
