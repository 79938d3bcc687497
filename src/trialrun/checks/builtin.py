"""The built-in assertion types, registered through the ``trialrun.assertions`` entry points.

The five RunLedger types keep its exact failure messages (reports and CI logs are compared
against them); ``tool_args`` is ours. Unlike RunLedger, parameters are checked when the suite
loads: an unknown, missing or mistyped parameter, an unreadable schema file or an invalid JSON
Schema stops the load with a message naming the parameter, instead of failing (or crashing)
at run time.

Each failure carries ``expected`` / ``observed`` texts for the console's failure block and a
``details`` object for run.jsonl, both in RunLedger's shapes.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from copy import deepcopy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trialrun.base.assertion_api import (
    AssertionParamError,
    AssertionType,
    CheckSubject,
    CompileContext,
    CompiledAssertion,
    Param,
    check_params,
    is_object,
    is_string,
    is_string_list,
)
from trialrun.base.nesting import unreadable_json
from trialrun.base.quoting import shortened
from trialrun.base.results import CheckFailure
from trialrun.base.words import counted, inflected

NONE = "<none>"


def _names(items: Sequence[str]) -> str:
    return ", ".join(items) if items else NONE


def _arrows(items: Sequence[str]) -> str:
    return " -> ".join(items) if items else NONE


def _call_names(subject: CheckSubject) -> list[str]:
    return [call.name for call in subject.tool_calls]


# -- JSON Schema support (shared by json_schema and tool_args) ----------------------------------


@dataclass(frozen=True)
class _SchemaError:
    """One validation error, in RunLedger's terms."""

    path: str
    error: str
    missing: list[str]

    @property
    def summary(self) -> str:
        if self.missing:
            fields = inflected(len(self.missing), "field")
            return f"missing required {fields}: {', '.join(self.missing)}"
        return self.error

    def details(self) -> dict[str, Any]:
        found: dict[str, Any] = {"path": self.path, "error": self.error}
        if self.missing:
            found["missing"] = list(self.missing)
        return found


class UnusableSchema(Exception):
    """A schema that passed its compile-time check still cannot validate (an unresolvable $ref)."""


class _Schema:
    """A JSON Schema checked once at compile time, validating with Draft 2020-12."""

    def __init__(self, schema: Any, *, source: str, key: str) -> None:
        # jsonschema is one of the heaviest imports of a run: only suites that use it pay.
        from jsonschema import Draft202012Validator
        from jsonschema.exceptions import SchemaError

        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as exc:
            where = "/".join(str(part) for part in exc.path) or "<root>"
            raise AssertionParamError(
                f"{source} is not a valid JSON Schema (Draft 2020-12): {exc.message} "
                f"(at {where} in the schema)",
                key=key,
            ) from None
        self.source = source
        self._validator = Draft202012Validator(schema)
        unresolved = _unresolvable_ref(schema)
        if unresolved is not None:
            # jsonschema only follows a $ref while validating: found here, it is a load error
            # instead of every case failing with json_schema_error.
            raise AssertionParamError(
                f"{source} has a $ref that cannot be resolved: {unresolved}", key=key
            )

    def first_error(self, instance: Any) -> _SchemaError | None:
        """The error with the smallest instance path (RunLedger's choice), or None if valid."""
        found, _ = self.errors(instance, limit=1)
        return found[0] if found else None

    def errors(self, instance: Any, *, limit: int) -> tuple[list[_SchemaError], int]:
        """Up to ``limit`` errors ordered by instance path, and how many there are in all.

        The missing properties at one place are one error (RunLedger's ``missing required
        field(s): a, b``), not one per property as jsonschema yields them.
        """
        from referencing.exceptions import Unresolvable

        try:
            raw = list(self._validator.iter_errors(instance))
        except Unresolvable as exc:
            # Only known when a $ref is followed; the schema itself passed check_schema.
            message = f"{self.source} has a $ref that cannot be resolved: {exc}"
            raise UnusableSchema(message) from None
        # Ranking ints before strings keeps the peer's order and never compares int with str;
        # the sort is stable, so errors at one place keep jsonschema's order.
        raw.sort(key=lambda e: [(isinstance(p, str), p) for p in e.path])
        kept: list[Any] = []
        required_at: set[tuple[Any, ...]] = set()
        for error in raw:
            if error.validator == "required":
                where = tuple(error.path)
                if where in required_at:
                    continue
                required_at.add(where)
            kept.append(error)
        return [_schema_error(error) for error in kept[:limit]], len(kept)


def _schema_error(error: Any) -> _SchemaError:
    path = "/".join(str(part) for part in error.path) or "<root>"
    missing: list[str] = []
    if (
        error.validator == "required"
        and isinstance(error.validator_value, list)
        and isinstance(error.instance, dict)
    ):
        missing = [name for name in error.validator_value if name not in error.instance]
    return _SchemaError(
        path=shortened(path, _QUOTED_CHARS),
        error=shortened(error.message, _QUOTED_CHARS),
        missing=missing,
    )


_QUOTED_CHARS = 1000
"""jsonschema quotes the failing value whole: an output of a megabyte would be a megabyte of
console, junit.xml and summary.json for one failure."""


def _unresolvable_ref(schema: Any) -> str | None:
    """The first ``$ref`` of ``schema`` that leads nowhere, if any.

    Refs are resolved against the root; a schema that declares ``$id`` below its root changes
    the base of the refs under it, so such schemas are left to validation time.
    """
    from referencing import Registry
    from referencing.exceptions import Unresolvable
    from referencing.jsonschema import DRAFT202012

    refs: list[str] = []
    if not _collect_refs(schema, refs, root=True):
        return None
    resource = DRAFT202012.create_resource(schema)
    resolver = (
        Registry()
        .with_resource(resource.id() or "", resource)
        .resolver(base_uri=resource.id() or "")
    )
    for ref in refs:
        try:
            resolver.lookup(ref)
        except Unresolvable as exc:
            return str(exc)
    return None


def _collect_refs(node: Any, refs: list[str], *, root: bool = False) -> bool:
    """Gather string ``$ref`` values; False when a nested ``$id`` makes root resolution wrong."""
    if isinstance(node, dict):
        if not root and isinstance(node.get("$id"), str):
            return False
        ref = node.get("$ref")
        if isinstance(ref, str):
            refs.append(ref)
        return all(_collect_refs(value, refs) for value in node.values())
    if isinstance(node, list):
        return all(_collect_refs(item, refs) for item in node)
    return True


def _load_schema_file(path: Path, *, key: str) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise AssertionParamError(f"cannot read schema file {path}: {reason}", key=key) from None
    except UnicodeDecodeError as exc:
        raise AssertionParamError(f"schema file {path} is not UTF-8: {exc}", key=key) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise AssertionParamError(
            f"schema file {path} is not valid JSON: {exc.msg} at line {exc.lineno} "
            f"column {exc.colno}",
            key=key,
        ) from None
    except (ValueError, RecursionError) as exc:
        raise AssertionParamError(
            f"schema file {path} is not valid JSON: {unreadable_json(exc)}", key=key
        ) from None


# -- json_schema --------------------------------------------------------------------------------


@dataclass(frozen=True)
class JsonSchemaAssertion:
    schema: _Schema
    type: str = "json_schema"

    def check(self, subject: CheckSubject) -> list[CheckFailure]:
        try:
            found, total = self.schema.errors(subject.output, limit=MAX_SCHEMA_VIOLATIONS)
        except UnusableSchema as exc:
            return [CheckFailure(type="json_schema_error", message=str(exc))]
        failures = [self._failure(error) for error in found]
        if total > len(found):
            more = total - len(found)
            failures.append(
                CheckFailure(
                    type=self.type,
                    message=f"Schema validation failed at {counted(more, 'more place')}, "
                    "not listed "
                    f"(the first {len(found)} are)",
                    expected="output valid against schema",
                    observed=counted(more, "more violation"),
                    details={"not_listed": more},
                )
            )
        return failures

    def _failure(self, found: _SchemaError) -> CheckFailure:
        if found.missing:
            fields = inflected(len(found.missing), "field")
            expected = f"required {fields} at {found.path}: {', '.join(found.missing)}"
            observed = f"missing: {', '.join(found.missing)}"
        else:
            expected, observed = f"output valid against schema at {found.path}", found.error
        return CheckFailure(
            type=self.type,
            message=f"Schema validation failed at {found.path}: {found.summary}",
            expected=expected,
            observed=observed,
            details=found.details(),
        )


MAX_SCHEMA_VIOLATIONS = 20
"""One failure per violation up to this many, then one saying how many more: an output that
breaks the schema everywhere must not flood the console and the reports."""


def _json_schema(params: Mapping[str, Any], ctx: CompileContext) -> JsonSchemaAssertion:
    path = ctx.resolve_path(params["schema_path"])
    schema = _load_schema_file(path, key="schema_path")
    return JsonSchemaAssertion(_Schema(schema, source=f"schema file {path}", key="schema_path"))


# -- required_fields ----------------------------------------------------------------------------


@dataclass(frozen=True)
class RequiredFieldsAssertion:
    fields: tuple[str, ...]
    type: str = "required_fields"

    def check(self, subject: CheckSubject) -> list[CheckFailure]:
        # Top-level keys only, and a null value counts as present (as in RunLedger).
        missing = [name for name in self.fields if name not in subject.output]
        if not missing:
            return []
        return [
            CheckFailure(
                type=self.type,
                message=f"Missing required fields: {', '.join(missing)}",
                expected=f"fields present: {_names(missing)}",
                observed=f"missing: {_names(missing)}",
                details={"missing": missing},
            )
        ]


# -- must_call / must_not_call ------------------------------------------------------------------


@dataclass(frozen=True)
class ToolPresenceAssertion:
    """``must_call``: every tool of ``tools`` is called; ``must_not_call``: none of them is."""

    tools: tuple[str, ...]
    type: str

    def check(self, subject: CheckSubject) -> list[CheckFailure]:
        calls = _call_names(subject)
        called = set(calls)
        forbid = self.type == "must_not_call"
        wrong = [tool for tool in self.tools if (tool in called) == forbid]
        if not wrong:
            return []
        if forbid:
            head, expected, key = "Forbidden tool calls observed", "no calls to", "forbidden"
        else:
            head, expected, key = "Missing required tool calls", "calls to", "missing"
        return [
            CheckFailure(
                type=self.type,
                message=f"{head}: {', '.join(wrong)}. Observed: {_names(calls)}",
                expected=f"{expected}: {_names(wrong)}",
                observed=_arrows(calls),
                details={key: wrong, "observed_calls": calls},
            )
        ]


# -- call_order ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class CallOrderAssertion:
    order: tuple[str, ...]
    type: str = "call_order"

    def check(self, subject: CheckSubject) -> list[CheckFailure]:
        calls = _call_names(subject)
        # Subsequence, matched greedily: gaps are allowed, a repeated name must repeat.
        position = 0
        for name in calls:
            if position < len(self.order) and name == self.order[position]:
                position += 1
        if position == len(self.order):
            return []
        order = list(self.order)
        return [
            CheckFailure(
                type=self.type,
                message=f"Tool call order not satisfied: {' -> '.join(order)}",
                expected=_arrows(order),
                observed=_arrows(calls),
                details={"expected_order": order, "observed_calls": calls},
            )
        ]


# -- tool_args ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolArgsAssertion:
    """Every call to ``tool`` has args valid against the schema.

    A tool that was never called passes: presence is what ``must_call`` is for. One failure per
    assertion: the first invalid call in trace order, plus the ids of the others.
    """

    tool: str
    schema: _Schema
    type: str = "tool_args"

    def check(self, subject: CheckSubject) -> list[CheckFailure]:
        invalid: list[tuple[int, str, _SchemaError]] = []
        for index, call in enumerate(subject.tool_calls, start=1):
            if call.name != self.tool:
                continue
            try:
                found = self.schema.first_error(call.args)
            except UnusableSchema as exc:
                return [CheckFailure(type="tool_args_error", message=str(exc))]
            if found is not None:
                invalid.append((index, call.call_id, found))
        if not invalid:
            return []
        index, call_id, found = invalid[0]
        others = [other_id for _, other_id, _ in invalid[1:]]
        more = (
            f" (and {counted(len(others), 'more invalid call')}: {', '.join(others)})"
            if others
            else ""
        )
        return [
            CheckFailure(
                type=self.type,
                message=f"Tool args invalid: {self.tool} call #{index} (call_id {call_id}) "
                f"at {found.path}: {found.summary}{more}",
                expected=f"{self.tool} args valid against {self.schema.source}",
                observed=f"call #{index} ({call_id}) at {found.path}: {found.summary}",
                details={
                    "tool": self.tool,
                    "call_index": index,
                    "call_id": call_id,
                    **found.details(),
                    "invalid_call_ids": [call_id, *others],
                },
            )
        ]


def _tool_args(params: Mapping[str, Any], ctx: CompileContext) -> ToolArgsAssertion:
    has_inline, has_path = "schema" in params, "schema_path" in params
    if has_inline == has_path:
        found = "both" if has_inline else "neither"
        raise AssertionParamError(
            f"tool_args needs exactly one of 'schema' (inline) or 'schema_path', found {found}",
            key="schema_path" if has_path else "schema",
        )
    tool = params["tool"]
    if has_inline:
        # A copy, so that later edits of the loaded config cannot reach into the validator.
        source, key, schema = f"the inline schema for {tool}", "schema", deepcopy(params["schema"])
    else:
        path = ctx.resolve_path(params["schema_path"])
        source, key = f"schema file {path}", "schema_path"
        schema = _load_schema_file(path, key=key)
    return ToolArgsAssertion(tool=tool, schema=_Schema(schema, source=source, key=key))


# -- the types ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class BuiltinType:
    """A built-in assertion type: its parameters are checked, then ``build`` compiles them."""

    name: str
    params: tuple[Param, ...]
    build: Callable[[Mapping[str, Any], CompileContext], CompiledAssertion]

    def compile(self, params: Mapping[str, Any], ctx: CompileContext) -> CompiledAssertion:
        check_params(self.name, params, self.params)
        return self.build(params, ctx)


SCHEMA_PATH = Param("schema_path", "a path to a JSON Schema file (a string)", is_string)
TOOL_NAMES = Param("tools", "a list of strings (tool names)", is_string_list)

# The entry points of pyproject.toml name these; the annotations make mypy check the protocol.
JSON_SCHEMA: AssertionType = BuiltinType("json_schema", (SCHEMA_PATH,), _json_schema)
REQUIRED_FIELDS: AssertionType = BuiltinType(
    "required_fields",
    (Param("fields", "a list of strings (top-level output keys)", is_string_list),),
    lambda params, _ctx: RequiredFieldsAssertion(tuple(params["fields"])),
)
MUST_CALL: AssertionType = BuiltinType(
    "must_call",
    (TOOL_NAMES,),
    lambda params, _ctx: ToolPresenceAssertion(tuple(params["tools"]), "must_call"),
)
MUST_NOT_CALL: AssertionType = BuiltinType(
    "must_not_call",
    (TOOL_NAMES,),
    lambda params, _ctx: ToolPresenceAssertion(tuple(params["tools"]), "must_not_call"),
)
CALL_ORDER: AssertionType = BuiltinType(
    "call_order",
    (Param("order", "a list of strings (tool names in call order)", is_string_list),),
    lambda params, _ctx: CallOrderAssertion(tuple(params["order"])),
)
TOOL_ARGS: AssertionType = BuiltinType(
    "tool_args",
    (
        Param("tool", "a tool name (a string)", is_string),
        Param("schema", "an inline JSON Schema (a mapping)", is_object, required=False),
        dataclasses.replace(SCHEMA_PATH, required=False),
    ),
    _tool_args,
)
