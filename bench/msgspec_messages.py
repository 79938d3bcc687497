"""Prototype: today's messages from a msgspec ValidationError, as far as its text allows.

msgspec raises one ``ValidationError`` whose only content is a sentence such as
``Expected `int` >= 0 - at `$.budgets.max_wall_ms``` (no type code, no location tuple, no input
value). This module parses that sentence back into a pydantic-shaped detail (``type``, ``loc``,
``input``, ``ctx``) and hands it to ``trialrun.config.messages``, which words it and finds its
line, exactly as the loader does for ``config.spec`` issues. Whatever it cannot recover is left
visible (``?`` in a location) so the bench shows the loss rather than hiding it.
"""

from __future__ import annotations

import re
import typing
from typing import Any

import msgspec
import msgspec.inspect as mi

from trialrun.config.messages import _errors
from trialrun.config.yamlload import LoadedYaml, PathElement

UNKNOWN_KEY = "?"
"""Stands for a mapping key msgspec does not name (``$.mcp_servers[...]``, ``at `key` in``)."""

_SENTENCE = re.compile(r"^(?P<what>.*?)(?: - at (?:`key` in )?`(?P<path>[^`]*)`)?$", re.DOTALL)
_STEP = re.compile(r"\.([^.\[]+)|\[(\d+|\.\.\.)\]")
_KINDS = {
    "int": "int_type",
    "float": "float_type",
    "str": "string_type",
    "bool": "bool_type",
    "array": "list_type",
    "object": "dict_type",
}
_BOUNDS = {">=": ("greater_than_equal", "ge"), ">": ("greater_than", "gt")}
_BOUNDS |= {"<=": ("less_than_equal", "le"), "<": ("less_than", "lt")}


def parse_path(text: str) -> tuple[PathElement, ...]:
    """``$.mcp_servers[...].command[0]`` -> ``("mcp_servers", "?", "command", 0)``."""
    loc: list[PathElement] = []
    for name, index in _STEP.findall(text[1:]):
        if name:
            loc.append(name)
        else:
            loc.append(UNKNOWN_KEY if index == "..." else int(index))
    return tuple(loc)


def value_at(data: Any, loc: tuple[PathElement, ...]) -> Any:
    for element in loc:
        try:
            data = data[element]
        except (KeyError, IndexError, TypeError):
            return UNKNOWN_KEY
    return data


def detail(exc: msgspec.ValidationError, data: Any, record: type[Any]) -> dict[str, Any]:
    """The one problem msgspec reports, in the shape ``config.messages`` words."""
    match = _SENTENCE.match(str(exc))
    assert match is not None  # the pattern matches any text
    what = match["what"]
    at_key = " - at `key` in " in str(exc)
    loc = parse_path(match["path"] or "$")
    if at_key:  # a mapping key is wrong, but msgspec does not say which one
        loc = (*loc, UNKNOWN_KEY, "[key]")
    found = value_at(data, loc)
    if m := re.fullmatch(r"Object contains unknown field `(.+)`", what):
        return _detail("extra_forbidden", (*loc, m[1]), None)
    if m := re.fullmatch(r"Object missing required field `(.+)`", what):
        return _detail("missing", (*loc, m[1]), found)
    if what.startswith("Invalid enum value"):
        expected = " or ".join(f"'{v}'" for v in _literal_values(record, loc))
        return _detail("literal_error", loc, found, expected=expected)
    if m := re.fullmatch(r"Expected `(\w+)` (>=|>|<=|<) (\S+)", what):
        kind, bound = _BOUNDS[m[2]]
        return _detail(kind, loc, found, **{bound: float(m[3])})
    if m := re.fullmatch(r"Expected `array` of length >= (\d+)", what):
        return _detail("too_short", loc, found, min_length=int(m[1]))
    if m := re.fullmatch(r"Expected `str` matching regex '(.*)'", what):
        return _detail("string_pattern_mismatch", loc, found, pattern=m[1])
    if m := re.fullmatch(r"Expected `(\w+)[^`]*`(?:, got `\w+`)?", what):
        return _detail(_KINDS.get(m[1], "type_error"), loc, found)
    if what == "Number out of range":
        return _detail("float_type", loc, found)
    return {"type": "value_error", "loc": loc, "input": found, "msg": what}


def _detail(kind: str, loc: tuple[PathElement, ...], found: Any, **ctx: Any) -> dict[str, Any]:
    return {"type": kind, "loc": loc, "input": found, "ctx": ctx or None}


def _node_at(record: type[Any], loc: tuple[PathElement, ...]) -> tuple[Any, Any, str | None]:
    """(the msgspec type found at ``loc``, the Struct class holding it, its field name)."""
    node: Any = mi.type_info(record)
    owner: Any = record
    name: str | None = None
    for element in (e for e in loc if e != "[key]"):
        node = _unwrap(node)
        if isinstance(node, mi.StructType) and isinstance(element, str):
            field = next((f for f in node.fields if f.encode_name == element), None)
            if field is None:
                return None, None, None
            owner, name, node = node.cls, field.name, field.type
        elif isinstance(node, mi.ListType):
            node = node.item_type
        elif isinstance(node, mi.DictType):
            node = node.key_type if loc[-1] == "[key]" else node.value_type
        else:
            return None, None, None
    return _unwrap(node), owner, name


def _unwrap(node: Any) -> Any:
    while isinstance(node, mi.UnionType | mi.Metadata):
        if isinstance(node, mi.Metadata):
            node = node.type
        else:
            node = next(t for t in node.types if not isinstance(t, mi.NoneType))
    return node


def _literal_values(record: type[Any], loc: tuple[PathElement, ...]) -> list[str]:
    """The allowed strings in declaration order (``msgspec.inspect`` sorts them)."""
    node, owner, name = _node_at(record, loc)
    if not isinstance(node, mi.LiteralType) or name is None:
        return []
    hints = typing.get_type_hints(owner, include_extras=True)
    found: list[str] = []

    def collect(hint: Any) -> None:
        if typing.get_origin(hint) is typing.Literal:
            found.extend(typing.get_args(hint))
        else:
            for argument in typing.get_args(hint):
                collect(argument)

    collect(hints[name])
    return found if loc[-1] != "[key]" else [v for v in found if v in node.values]


def accepted_keys(record: type[Any], loc: tuple[PathElement, ...]) -> list[str]:
    node, _, _ = _node_at(record, loc)
    return [f.encode_name for f in node.fields] if isinstance(node, mi.StructType) else []


def messages(data: Any, doc: LoadedYaml, record: type[Any], what: str) -> list[str]:
    """What the loader would print if msgspec validated ``doc`` (``[]`` when it accepts it)."""
    try:
        msgspec.convert(data, record)
    except msgspec.ValidationError as exc:
        found = detail(exc, data, record)
        keys_at = lambda loc: accepted_keys(record, tuple(loc))  # noqa: E731
        return [str(e) for e in _errors([found], doc, keys_at, what)]
    return []
