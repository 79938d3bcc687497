"""Strict typed records for trialrun's own files, validated with every problem reported at once.

Each record is a frozen dataclass whose ``keyed`` fields carry a ``Spec`` (what a key accepts).
``parse`` checks raw YAML data against a record and either builds it or raises ``SpecError`` with
every issue found (``type``, ``loc``, ``input``, ``ctx``), which ``config.messages`` words as
``file:line`` messages. Suites, cases, compare files and verify plans all use it (issue 29).

Why not pydantic: every ``trialrun run`` loads a suite, and importing pydantic plus building the
models was a large share of a small run's own start-up, all of it before the first agent starts,
for a few dozen flat records (bench/one_validator_bench.py: half the CPU time of loading a
compare subject). The semantics are pydantic's strict mode: no coercion except an integer where
a number is expected (and, where a spec says so, a number where text is meant), unknown keys
refused, RunLedger's spellings as aliases.
Why not msgspec either: it stops at a document's first problem and names no mapping key in its
error text (docs/internals.md, "Why not msgspec"; bench/validator_bench.py).
"""

from __future__ import annotations

import abc
import dataclasses
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, dataclass_transform

from trialrun.base.words import counted

Loc = tuple[str | int, ...]
Issue = dict[str, Any]
"""``{"type": ..., "loc": ..., "input": ..., "ctx": ...}`` like a pydantic error detail."""

_R = TypeVar("_R", bound="Record")
_INVALID: Any = object()


class SpecError(ValueError):
    """Raw data that does not fit a record; ``issues`` lists every problem."""

    def __init__(self, issues: list[Issue]) -> None:
        super().__init__(f"{counted(len(issues), 'validation issue')}: {issues[:3]}")
        self.issues = issues


class Spec(abc.ABC):
    """What one value accepts.

    Specs are plain classes, not dataclasses: every run imports them, and a dataclass's methods
    are generated and compiled when the module is imported.
    """

    __slots__ = ()

    @abc.abstractmethod
    def check(self, value: Any, loc: Loc, issues: list[Issue]) -> Any:
        """The value to store, or ``_INVALID`` after appending the problems to ``issues``."""

    @abc.abstractmethod
    def json_schema(self, defs: dict[str, Any]) -> dict[str, Any]:
        """This spec as JSON Schema; records it refers to are added to ``defs``."""


def _issue(issues: list[Issue], kind: str, loc: Loc, value: Any, **ctx: Any) -> Any:
    issues.append({"type": kind, "loc": loc, "input": value, "ctx": ctx or None})
    return _INVALID


class Str(Spec):
    """A string; with ``pattern``, one that the regular expression matches entirely.

    ``numbers``: the number types also accepted, and stored as their text (a trigger prompt
    ``42``, a version ``3``): YAML reads them as numbers where the user meant text.
    """

    __slots__ = ("min_length", "numbers", "pattern")

    def __init__(
        self,
        pattern: str | None = None,
        *,
        min_length: int = 0,
        numbers: tuple[type[int | float], ...] = (),
    ) -> None:
        self.pattern = pattern
        self.min_length = min_length
        self.numbers = numbers

    def check(self, value: Any, loc: Loc, issues: list[Issue]) -> Any:
        if isinstance(value, self.numbers) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str):
            return _issue(issues, "string_type", loc, value)
        if len(value) < self.min_length:
            return _issue(issues, "string_too_short", loc, value, min_length=self.min_length)
        if self.pattern is not None and re.fullmatch(self.pattern, value) is None:
            return _issue(issues, "string_pattern_mismatch", loc, value, pattern=self.pattern)
        return value

    def json_schema(self, defs: dict[str, Any]) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "string"}
        if self.min_length:
            schema["minLength"] = self.min_length
        if self.pattern is not None:
            schema["pattern"] = f"^{self.pattern}$"
        if self.numbers:
            return {"anyOf": [schema, {"type": "number"}]}
        return schema


class Int(Spec):
    """An integer (not a boolean), optionally bounded."""

    __slots__ = ("ge", "gt", "le")

    def __init__(
        self, *, ge: int | None = None, gt: int | None = None, le: int | None = None
    ) -> None:
        self.ge = ge
        self.gt = gt
        self.le = le

    def check(self, value: Any, loc: Loc, issues: list[Issue]) -> Any:
        if not isinstance(value, int) or isinstance(value, bool):
            return _issue(issues, "int_type", loc, value)
        return _bounded(value, loc, issues, ge=self.ge, gt=self.gt, le=self.le)

    def json_schema(self, defs: dict[str, Any]) -> dict[str, Any]:
        return {"type": "integer", **_bounds_schema(ge=self.ge, gt=self.gt, le=self.le)}


class Float(Spec):
    """A number; an integer is accepted and stored as a float. ``finite``: not YAML's .inf."""

    __slots__ = ("finite", "ge", "gt", "le")

    def __init__(
        self,
        *,
        ge: float | None = None,
        gt: float | None = None,
        le: float | None = None,
        finite: bool = False,
    ) -> None:
        self.ge = ge
        self.gt = gt
        self.le = le
        self.finite = finite

    def check(self, value: Any, loc: Loc, issues: list[Issue]) -> Any:
        if not isinstance(value, int | float) or isinstance(value, bool):
            return _issue(issues, "float_type", loc, value)
        try:
            number = float(value)
        except OverflowError:  # an integer beyond any double: not a number we can use
            return _issue(issues, "float_type", loc, value)
        if self.finite and not math.isfinite(number):
            return _issue(issues, "finite_number", loc, value)
        return _bounded(number, loc, issues, ge=self.ge, gt=self.gt, le=self.le)

    def json_schema(self, defs: dict[str, Any]) -> dict[str, Any]:
        return {"type": "number", **_bounds_schema(ge=self.ge, gt=self.gt, le=self.le)}


def _bounded(
    value: float,
    loc: Loc,
    issues: list[Issue],
    *,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
) -> Any:
    # pydantic's order, which only NaN (failing every bound) can tell apart.
    if le is not None and not value <= le:
        return _issue(issues, "less_than_equal", loc, value, le=le)
    if ge is not None and not value >= ge:
        return _issue(issues, "greater_than_equal", loc, value, ge=ge)
    if gt is not None and not value > gt:
        return _issue(issues, "greater_than", loc, value, gt=gt)
    return value


def _bounds_schema(**bounds: float | None) -> dict[str, Any]:
    names = {"ge": "minimum", "gt": "exclusiveMinimum", "le": "maximum"}
    return {names[k]: v for k, v in bounds.items() if v is not None}


class Bool(Spec):
    __slots__ = ()

    def check(self, value: Any, loc: Loc, issues: list[Issue]) -> Any:
        if not isinstance(value, bool):
            return _issue(issues, "bool_type", loc, value)
        return value

    def json_schema(self, defs: dict[str, Any]) -> dict[str, Any]:
        return {"type": "boolean"}


class AnyValue(Spec):
    __slots__ = ()

    def check(self, value: Any, loc: Loc, issues: list[Issue]) -> Any:
        return value

    def json_schema(self, defs: dict[str, Any]) -> dict[str, Any]:
        return {}


class OneOf(Spec):
    """One of a few fixed strings."""

    __slots__ = ("values",)

    def __init__(self, *values: str) -> None:
        self.values = values

    def check(self, value: Any, loc: Loc, issues: list[Issue]) -> Any:
        if isinstance(value, str) and value in self.values:
            return value
        quoted = [f"'{v}'" for v in self.values]
        expected = " or ".join(quoted) if len(quoted) <= 2 else ", ".join(quoted[:-1])
        if len(quoted) > 2:
            expected += f" or {quoted[-1]}"
        return _issue(issues, "literal_error", loc, value, expected=expected)

    def json_schema(self, defs: dict[str, Any]) -> dict[str, Any]:
        return {"enum": list(self.values), "type": "string"}


class ListOf(Spec):
    """A list; with ``single``, a lone valid item too, read as a list of that one item."""

    __slots__ = ("item", "min_length", "single")

    def __init__(self, item: Spec, *, min_length: int = 0, single: bool = False) -> None:
        self.item = item
        self.min_length = min_length
        self.single = single

    def check(self, value: Any, loc: Loc, issues: list[Issue]) -> Any:
        if self.single and not isinstance(value, list):
            # A lone value that is no valid item is reported as "not a list", the usual form.
            item = self.item.check(value, loc, [])
            return _issue(issues, "list_type", loc, value) if item is _INVALID else [item]
        if not isinstance(value, list):
            return _issue(issues, "list_type", loc, value)
        items = [self.item.check(entry, (*loc, i), issues) for i, entry in enumerate(value)]
        if len(value) < self.min_length:
            return _issue(
                issues,
                "too_short",
                loc,
                value,
                field_type="List",
                min_length=self.min_length,
                actual_length=len(value),
            )
        return _INVALID if any(item is _INVALID for item in items) else items

    def json_schema(self, defs: dict[str, Any]) -> dict[str, Any]:
        item = self.item.json_schema(defs)
        schema: dict[str, Any] = {"type": "array", "items": item}
        if self.min_length:
            schema["minItems"] = self.min_length
        return {"anyOf": [schema, item]} if self.single else schema


class MapOf(Spec):
    """A mapping whose keys satisfy ``key`` (strings by default) and values ``value``."""

    __slots__ = ("key", "value")

    def __init__(self, value: Spec, *, key: Spec | None = None) -> None:
        self.value = value
        self.key = key or Str()

    def check(self, value: Any, loc: Loc, issues: list[Issue]) -> Any:
        if not isinstance(value, dict):
            return _issue(issues, "dict_type", loc, value)
        checked: dict[Any, Any] = {}
        valid = True
        for key, item in value.items():
            checked_key = self.key.check(key, (*loc, key, "[key]"), issues)
            checked_item = self.value.check(item, (*loc, key), issues)
            valid = valid and checked_key is not _INVALID and checked_item is not _INVALID
            checked[key] = checked_item
        return checked if valid else _INVALID

    def json_schema(self, defs: dict[str, Any]) -> dict[str, Any]:
        schema: dict[str, Any] = {
            "type": "object",
            "additionalProperties": self.value.json_schema(defs),
        }
        key_schema = self.key.json_schema(defs)
        if key_schema != {"type": "string"}:
            schema["propertyNames"] = key_schema
        return schema


class Optional(Spec):
    """``inner`` or null."""

    __slots__ = ("inner",)

    def __init__(self, inner: Spec) -> None:
        self.inner = inner

    def check(self, value: Any, loc: Loc, issues: list[Issue]) -> Any:
        return None if value is None else self.inner.check(value, loc, issues)

    def json_schema(self, defs: dict[str, Any]) -> dict[str, Any]:
        return {"anyOf": [self.inner.json_schema(defs), {"type": "null"}]}


class Nested(Spec):
    """A mapping that is itself a record."""

    __slots__ = ("record",)

    def __init__(self, record: type[Record]) -> None:
        self.record = record

    def check(self, value: Any, loc: Loc, issues: list[Issue]) -> Any:
        if not isinstance(value, dict):
            return _issue(issues, "model_type", loc, value, class_name=self.record.__name__)
        return _parse_into(self.record, value, loc, issues)

    def json_schema(self, defs: dict[str, Any]) -> dict[str, Any]:
        name = self.record.__name__
        if name not in defs:
            defs[name] = {}  # placeholder first: a record may refer to itself
            defs[name] = record_schema(self.record, defs)
        return {"$ref": f"#/$defs/{name}"}


_HOST_PORT = re.compile(r"(?:\[([0-9A-Fa-f:.]+)\]|([A-Za-z0-9._-]+)):([0-9]{1,5})")


def split_host_port(text: str) -> tuple[str, int] | None:
    """``host:port`` (``[v6]:port`` for an IPv6 address) as its two parts; None if it is not."""
    match = _HOST_PORT.fullmatch(text)
    if match is None:
        return None
    port = int(match.group(3))
    if not 1 <= port <= 65535:
        return None
    return match.group(1) or match.group(2), port


class HostPort(Spec):
    """``host:port`` with a port from 1 to 65535."""

    __slots__ = ()

    def check(self, value: Any, loc: Loc, issues: list[Issue]) -> Any:
        if isinstance(value, str) and split_host_port(value) is not None:
            return value
        _issue(issues, "host_port", loc, value)
        return _INVALID

    def json_schema(self, defs: dict[str, Any]) -> dict[str, Any]:
        return {"type": "string", "pattern": f"^{_HOST_PORT.pattern}$"}


class WordOrRecord(Spec):
    """One of a few fixed strings, or a mapping that is ``record`` (``network: sealed`` or
    ``network: {allow: [...]}``)."""

    __slots__ = ("record", "words")

    def __init__(self, words: OneOf, record: type[Record]) -> None:
        self.words = words
        self.record = Nested(record)

    def check(self, value: Any, loc: Loc, issues: list[Issue]) -> Any:
        if isinstance(value, dict):
            return self.record.check(value, loc, issues)
        return self.words.check(value, loc, issues)

    def json_schema(self, defs: dict[str, Any]) -> dict[str, Any]:
        return {"anyOf": [self.words.json_schema(defs), self.record.json_schema(defs)]}


class Key:
    """A record field's spec and the other spellings it is accepted under (RunLedger's).

    ``deprecated``: why the key no longer does anything. It is still accepted, so that files
    written for an older trialrun keep loading, and ``deprecated_keys`` lets the loader warn.
    ``spelled``: the key as files write it, when that cannot be the field's name (``with``).
    """

    __slots__ = ("aliases", "deprecated", "spec", "spelled")

    def __init__(
        self,
        spec: Spec,
        aliases: tuple[str, ...] = (),
        deprecated: str | None = None,
        spelled: str | None = None,
    ) -> None:
        self.spec = spec
        self.aliases = aliases
        self.deprecated = deprecated
        self.spelled = spelled


def keyed(
    spec: Spec,
    *aliases: str,
    default: Any = dataclasses.MISSING,
    default_factory: Any = dataclasses.MISSING,
    deprecated: str | None = None,
    spelled: str | None = None,
) -> Any:
    """A record field that files set: ``budget: int | None = keyed(Int(ge=0), default=None)``."""
    return dataclasses.field(
        default=default,
        default_factory=default_factory,
        metadata={"key": Key(spec, aliases, deprecated, spelled)},
    )


@dataclass_transform(
    kw_only_default=True, frozen_default=True, field_specifiers=(keyed, dataclasses.field)
)
@dataclass(frozen=True, kw_only=True)
class Record:
    """Base of the typed records: each subclass is a frozen, keyword-only dataclass whose fields
    are ``keyed`` fields (a plain ``dataclasses.field`` is the program's; no file sets it)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        dataclass(frozen=True, kw_only=True)(cls)

    def to_dict(self, *, exclude_none: bool = False) -> dict[str, Any]:
        """The record as plain data (nested records too), e.g. for summary.json."""
        data = dataclasses.asdict(self)
        return {k: v for k, v in data.items() if v is not None} if exclude_none else data


class _Field:
    """One record field as parsing, key lookup and schema export see it (worked out once)."""

    __slots__ = ("default", "deprecated", "name", "required", "spec", "spellings")

    def __init__(self, field: dataclasses.Field[Any]) -> None:
        key_of_field: Key = field.metadata["key"]
        self.name = field.name
        self.spellings = (key_of_field.spelled or field.name, *key_of_field.aliases)
        """The key as files write it first (the field name), then RunLedger's spellings of it."""
        self.spec = key_of_field.spec
        self.deprecated = key_of_field.deprecated
        self.default = field.default
        """``dataclasses.MISSING`` when the field has no plain default."""
        self.required = (
            field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
        )


_FIELDS: dict[type[Record], tuple[_Field, ...]] = {}


def _fields(record: type[Record]) -> tuple[_Field, ...]:
    found = _FIELDS.get(record)
    if found is None:
        # A field without a key is the program's, never read from a file.
        fields = [f for f in dataclasses.fields(record) if "key" in f.metadata]
        found = _FIELDS[record] = tuple(_Field(f) for f in fields)
    return found


def accepted_keys(record: type[Record]) -> list[str]:
    """Every spelling the record accepts: field names, then their aliases."""
    return [spelling for field in _fields(record) for spelling in field.spellings]


def deprecated_keys(record: type[Record], data: Mapping[Any, Any]) -> list[tuple[str, str]]:
    """The deprecated keys ``data`` sets at its top level, each with why it has no effect."""
    return [
        (spelling, field.deprecated)
        for field in _fields(record)
        if field.deprecated is not None
        for spelling in field.spellings
        if spelling in data
    ]


def record_at(record: type[Record] | Spec, loc: Sequence[str | int]) -> type[Record] | None:
    """The record found at ``loc`` inside ``record`` (through lists, maps and optionals)."""
    spec: Spec = record if isinstance(record, Spec) else Nested(record)
    for element in loc:
        while isinstance(spec, Optional | WordOrRecord):
            spec = spec.inner if isinstance(spec, Optional) else spec.record
        if isinstance(spec, ListOf) and isinstance(element, int):
            spec = spec.item
        elif isinstance(spec, MapOf):
            spec = spec.value
        elif isinstance(spec, Nested) and isinstance(element, str):
            named = _field_named(spec.record, element)
            if named is None:
                return None
            spec = named.spec
        else:
            return None
    while isinstance(spec, Optional | WordOrRecord):
        spec = spec.inner if isinstance(spec, Optional) else spec.record
    return spec.record if isinstance(spec, Nested) else None


def _field_named(record: type[Record], name: str) -> _Field | None:
    return next((field for field in _fields(record) if name in field.spellings), None)


def parse(record: type[_R], data: Any) -> _R:
    """Build ``record`` from raw data, or raise ``SpecError`` listing every problem."""
    issues: list[Issue] = []
    if not isinstance(data, dict):
        _issue(issues, "model_type", (), data, class_name=record.__name__)
        raise SpecError(issues)
    built = _parse_into(record, data, (), issues)
    if issues:
        raise SpecError(issues)
    assert isinstance(built, record)
    return built


def parse_value(spec: Spec, data: Any) -> Any:
    """``data`` checked against ``spec`` (a file whose top level is a list or a map of records),
    or ``SpecError`` listing every problem."""
    issues: list[Issue] = []
    checked = spec.check(data, (), issues)
    if issues:
        raise SpecError(issues)
    return checked


def _parse_into(
    record: type[Record], data: Mapping[Any, Any], loc: Loc, issues: list[Issue]
) -> Any:
    values: dict[str, Any] = {}
    used: set[Any] = set()
    valid = True
    for field in _fields(record):
        # The first spelling present wins; any other one present is an unknown key below.
        spelling = next((s for s in field.spellings if s in data), None)
        if spelling is None:
            if field.required:
                _issue(issues, "missing", (*loc, field.spellings[0]), dict(data))
                valid = False
            continue
        used.add(spelling)
        checked = field.spec.check(data[spelling], (*loc, spelling), issues)
        if checked is _INVALID:
            valid = False
        else:
            values[field.name] = checked
    for unknown in data:
        if unknown not in used:
            kind = "extra_forbidden" if isinstance(unknown, str) else "invalid_key"
            _issue(issues, kind, (*loc, unknown), data[unknown])
            valid = False
    return record(**values) if valid else _INVALID


def record_schema(record: type[Record], defs: dict[str, Any]) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of ``record``; nested records go into ``defs``."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    for field in _fields(record):
        name = field.spellings[0]
        schema = field.spec.json_schema(defs)
        if field.default is not dataclasses.MISSING:
            schema = {**schema, "default": field.default}
        elif field.required:
            required.append(name)
        if field.deprecated is not None:
            schema = {
                **schema,
                "deprecated": True,
                "description": f"Deprecated: {field.deprecated}",
            }
        properties[name] = schema
        for alias in field.spellings[1:]:
            properties[alias] = {
                **schema,
                "description": f"Alias of '{name}' (RunLedger spelling).",
            }
    schema = {
        "additionalProperties": False,
        "properties": properties,
        "title": record.__name__,
        "type": "object",
    }
    if required:
        schema["required"] = required
    return schema
