"""Built-in assertions: RunLedger's exact messages, tool_args, and compile-time refusals."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from trialrun.base.assertion_api import (
    AssertionParamError,
    AssertionType,
    CheckSubject,
    CompileContext,
    CompiledAssertion,
)
from trialrun.base.results import CheckFailure, ToolCall
from trialrun.checks.builtin import (
    CALL_ORDER,
    JSON_SCHEMA,
    MAX_SCHEMA_VIOLATIONS,
    MUST_CALL,
    MUST_NOT_CALL,
    REQUIRED_FIELDS,
    TOOL_ARGS,
)

DEMO_SCHEMA = {
    "type": "object",
    "properties": {"category": {"type": "string"}, "reply": {"type": "string"}},
    "required": ["category", "reply"],
}


@pytest.fixture
def ctx(tmp_path: Path) -> CompileContext:
    def resolve_path(raw: str) -> Path:
        if raw.startswith(".."):
            raise AssertionParamError(f"path {raw!r} leaves the suite directory", key="schema_path")
        return tmp_path / raw

    return CompileContext(resolve_path=resolve_path)


def write_schema(tmp_path: Path, schema: Any, name: str = "schema.json") -> str:
    (tmp_path / name).write_text(json.dumps(schema), encoding="utf-8")
    return name


def calls(*names: str, args: dict[str, Any] | None = None) -> list[ToolCall]:
    return [
        ToolCall(call_id=f"c{i}", name=name, args=args or {}, ok=True)
        for i, name in enumerate(names, 1)
    ]


def run(
    assertion: CompiledAssertion, output: dict[str, Any], tool_calls: list[ToolCall] | None = None
) -> list[CheckFailure]:
    return assertion.check(CheckSubject(output=output, tool_calls=tool_calls or []))


def compile_(kind: AssertionType, ctx: CompileContext, **params: Any) -> CompiledAssertion:
    return kind.compile(params, ctx)


# -- json_schema --------------------------------------------------------------------------------


def test_json_schema_passes_valid_output(tmp_path: Path, ctx: CompileContext) -> None:
    check = compile_(JSON_SCHEMA, ctx, schema_path=write_schema(tmp_path, DEMO_SCHEMA))
    assert check.type == "json_schema"
    assert run(check, {"category": "account", "reply": "ok"}) == []


def test_json_schema_missing_required_fields(tmp_path: Path, ctx: CompileContext) -> None:
    check = compile_(JSON_SCHEMA, ctx, schema_path=write_schema(tmp_path, DEMO_SCHEMA))
    [failure] = run(check, {"other": 1})
    assert failure.type == "json_schema"
    assert failure.message == (
        "Schema validation failed at <root>: missing required fields: category, reply"
    )
    assert failure.expected == "required fields at <root>: category, reply"
    assert failure.observed == "missing: category, reply"
    assert failure.details == {
        "path": "<root>",
        "error": "'category' is a required property",
        "missing": ["category", "reply"],
    }


def test_json_schema_reports_every_violation_ordered_by_path(
    tmp_path: Path, ctx: CompileContext
) -> None:
    schema = {
        "type": "object",
        "properties": {
            "b": {"type": "string"},
            "a": {"type": "array", "items": {"type": "integer"}},
            "c": {"type": "object", "required": ["x", "y"]},
        },
        "required": ["a", "b", "c", "d", "e"],
    }
    check = compile_(JSON_SCHEMA, ctx, schema_path=write_schema(tmp_path, schema))
    failures = run(check, {"b": 5, "a": [1, "x", 2, "z"], "c": {"y": 0}})
    assert [f.message for f in failures] == [
        "Schema validation failed at <root>: missing required fields: d, e",
        "Schema validation failed at a/1: 'x' is not of type 'integer'",
        "Schema validation failed at a/3: 'z' is not of type 'integer'",
        "Schema validation failed at b: 5 is not of type 'string'",
        "Schema validation failed at c: missing required field: x",
    ]
    assert {f.type for f in failures} == {"json_schema"}
    assert failures[1].expected == "output valid against schema at a/1"
    assert failures[1].observed == "'x' is not of type 'integer'"


def test_json_schema_lists_a_bounded_number_of_violations(
    tmp_path: Path, ctx: CompileContext
) -> None:
    schema = {"type": "array", "items": {"type": "integer"}}
    check = compile_(JSON_SCHEMA, ctx, schema_path=write_schema(tmp_path, schema))
    limit = MAX_SCHEMA_VIOLATIONS
    failures = check.check(CheckSubject(output=["s"] * (limit + 7), tool_calls=[]))
    assert len(failures) == limit + 1
    assert failures[limit - 1].message.startswith(f"Schema validation failed at {limit - 1}: ")
    assert failures[-1].message == (
        f"Schema validation failed at 7 more places, not listed (the first {limit} are)"
    )
    assert failures[-1].details == {"not_listed": 7}
    exactly = check.check(CheckSubject(output=["s"] * limit, tool_calls=[]))
    assert len(exactly) == limit
    assert "not listed" not in exactly[-1].message


def test_json_schema_quotes_at_most_1000_characters_of_a_value(
    tmp_path: Path, ctx: CompileContext
) -> None:
    schema = {"properties": {"count": {"type": "integer"}}}
    check = compile_(JSON_SCHEMA, ctx, schema_path=write_schema(tmp_path, schema))
    [failure] = run(check, {"count": "y" * 1_000_000})
    assert failure.message == f"Schema validation failed at count: '{'y' * 996}..."
    assert failure.details is not None and len(failure.details["error"]) == 1000


def test_json_schema_ignores_format_and_schema_keyword(tmp_path: Path, ctx: CompileContext) -> None:
    schema = {"$schema": "http://json-schema.org/draft-04/schema#",
              "properties": {"when": {"format": "date"}}}  # fmt: skip
    check = compile_(JSON_SCHEMA, ctx, schema_path=write_schema(tmp_path, schema))
    assert run(check, {"when": "not a date"}) == []


def test_json_schema_with_the_peer_demo_schema(peer_fixtures: Path) -> None:
    schema_file = peer_fixtures / "upstream/examples/evals/demo/schema.json"
    check = JSON_SCHEMA.compile({"schema_path": "schema.json"},
                                CompileContext(resolve_path=lambda _raw: schema_file))  # fmt: skip
    assert run(check, {"category": "a", "reply": "b"}) == []
    [failure] = run(check, {"category": "a"})
    assert failure.message == "Schema validation failed at <root>: missing required field: reply"


@pytest.mark.parametrize(
    ("params", "message", "key"),
    [
        ({"schem_path": "s.json"},
         "^" + re.escape("unknown parameter 'schem_path' for json_schema (did you mean "
                         "'schema_path'?)") + "$",
         "schem_path"),
        ({}, "missing parameter 'schema_path' for json_schema", "schema_path"),
        ({"schema_path": 5}, "parameter 'schema_path' of json_schema must be a path",
         "schema_path"),
        ({"schema_path": "missing.json"}, "cannot read schema file .*missing.json: No such file",
         "schema_path"),
        ({"schema_path": "../outside.json"}, "leaves the suite directory", "schema_path"),
    ],
)  # fmt: skip
def test_json_schema_param_refusals(
    ctx: CompileContext, params: dict[str, Any], message: str, key: str
) -> None:
    with pytest.raises(AssertionParamError, match=message) as info:
        JSON_SCHEMA.compile(params, ctx)
    assert info.value.key == key


def test_json_schema_refuses_an_invalid_schema_at_compile_time(
    tmp_path: Path, ctx: CompileContext
) -> None:
    name = write_schema(tmp_path, {"type": 5})
    with pytest.raises(AssertionParamError) as info:
        JSON_SCHEMA.compile({"schema_path": name}, ctx)
    assert "is not a valid JSON Schema (Draft 2020-12): 5 is not valid under any of" in str(
        info.value
    )
    assert "(at type in the schema)" in str(info.value)
    assert info.value.key == "schema_path"


def test_json_schema_refuses_a_file_that_is_not_json(tmp_path: Path, ctx: CompileContext) -> None:
    (tmp_path / "bad.json").write_text('{"type": "object",\n  oops}', encoding="utf-8")
    with pytest.raises(AssertionParamError, match=r"is not valid JSON: .* at line 2 column 3"):
        JSON_SCHEMA.compile({"schema_path": "bad.json"}, ctx)
    (tmp_path / "latin.json").write_bytes(b'{"title": "caf\xe9"}')
    with pytest.raises(AssertionParamError, match="is not UTF-8"):
        JSON_SCHEMA.compile({"schema_path": "latin.json"}, ctx)


@pytest.mark.parametrize(
    "schema",
    [
        {"properties": {"a": {"$ref": "#/$defs/nowhere"}}},
        {"prefixItems": [{"$ref": "other.json"}]},
        {"$id": "https://x.test/s", "properties": {"a": {"$ref": "#/$defs/a"}}},
    ],
)
def test_json_schema_unresolvable_ref_is_a_load_error(
    tmp_path: Path, ctx: CompileContext, schema: dict[str, Any]
) -> None:
    path = write_schema(tmp_path, schema)
    with pytest.raises(AssertionParamError, match=r"has a \$ref that cannot be resolved"):
        JSON_SCHEMA.compile({"schema_path": path}, ctx)


def test_json_schema_refs_that_resolve_load(tmp_path: Path, ctx: CompileContext) -> None:
    for schema in (
        {"$defs": {"a": {"type": "object"}}, "$ref": "#/$defs/a"},
        {"$id": "https://x.test/s", "$defs": {"a": {"type": "object"}}, "$ref": "#/$defs/a"},
        {"properties": {"$ref": {"type": "string"}}},
    ):
        compile_(JSON_SCHEMA, ctx, schema_path=write_schema(tmp_path, schema))


def test_json_schema_unresolvable_ref_is_a_failure_not_a_crash(
    tmp_path: Path, ctx: CompileContext
) -> None:
    # A nested $id moves the base of the refs under it: such a ref is only judged when followed.
    schema = {
        "$defs": {"a": {"$id": "https://y.test/a", "$ref": "#/nowhere"}},
        "properties": {"a": {"$ref": "https://y.test/a"}},
    }
    check = compile_(JSON_SCHEMA, ctx, schema_path=write_schema(tmp_path, schema))
    [failure] = run(check, {"a": 1})
    assert failure.type == "json_schema_error"
    assert "has a $ref that cannot be resolved" in failure.message


# -- required_fields ----------------------------------------------------------------------------


def test_required_fields(ctx: CompileContext) -> None:
    check = compile_(REQUIRED_FIELDS, ctx, fields=["category", "reply", "meta"])
    assert run(check, {"category": 1, "reply": None, "meta": {}}) == []  # null counts as present
    [failure] = run(check, {"reply": "x", "nested": {"category": 1}})
    assert failure.type == "required_fields"
    assert failure.message == "Missing required fields: category, meta"
    assert failure.expected == "fields present: category, meta"
    assert failure.observed == "missing: category, meta"
    assert failure.details == {"missing": ["category", "meta"]}
    assert run(compile_(REQUIRED_FIELDS, ctx, fields=[]), {}) == []


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"fields": "category"}, "must be a list of strings .*, found string 'category'"),
        ({"fields": ["a", 1]}, "must be a list of strings .*, found list \\['a', 1\\]"),
        (
            {"field": ["a"]},
            "unknown parameter 'field' for required_fields \\(did you mean 'fields'",
        ),
        ({}, "missing parameter 'fields' for required_fields"),
    ],
)
def test_required_fields_param_refusals(
    ctx: CompileContext, params: dict[str, Any], message: str
) -> None:
    with pytest.raises(AssertionParamError, match=message):
        REQUIRED_FIELDS.compile(params, ctx)


# -- must_call / must_not_call ------------------------------------------------------------------


def test_must_call(ctx: CompileContext) -> None:
    check = compile_(MUST_CALL, ctx, tools=["lookup_order", "search_docs"])
    assert run(check, {}, calls("search_docs", "lookup_order")) == []
    [failure] = run(check, {}, calls("search_docs", "search_docs"))
    assert failure.type == "must_call"
    assert failure.message == (
        "Missing required tool calls: lookup_order. Observed: search_docs, search_docs"
    )
    assert failure.expected == "calls to: lookup_order"
    assert failure.observed == "search_docs -> search_docs"
    assert failure.details == {
        "missing": ["lookup_order"],
        "observed_calls": ["search_docs", "search_docs"],
    }


def test_must_call_with_no_calls_and_failed_calls(ctx: CompileContext) -> None:
    check = compile_(MUST_CALL, ctx, tools=["lookup_order"])
    [failure] = run(check, {})
    assert failure.message == "Missing required tool calls: lookup_order. Observed: <none>"
    assert failure.observed == "<none>"
    failed_call = [ToolCall(call_id="c1", name="lookup_order", args={}, ok=False, error="boom")]
    assert run(check, {}, failed_call) == []  # success is not required


def test_must_not_call(ctx: CompileContext) -> None:
    check = compile_(MUST_NOT_CALL, ctx, tools=["delete_account", "issue_refund"])
    assert run(check, {}, calls("search_docs")) == []
    assert run(check, {}) == []
    [failure] = run(check, {}, calls("search_docs", "issue_refund"))
    assert failure.type == "must_not_call"
    assert failure.message == (
        "Forbidden tool calls observed: issue_refund. Observed: search_docs, issue_refund"
    )
    assert failure.expected == "no calls to: issue_refund"
    assert failure.observed == "search_docs -> issue_refund"
    assert failure.details == {
        "forbidden": ["issue_refund"],
        "observed_calls": ["search_docs", "issue_refund"],
    }


@pytest.mark.parametrize("kind", [MUST_CALL, MUST_NOT_CALL])
def test_tool_list_param_refusals(ctx: CompileContext, kind: AssertionType) -> None:
    with pytest.raises(AssertionParamError, match=f"parameter 'tools' of {kind.name} must be"):
        kind.compile({"tools": "search_docs"}, ctx)
    with pytest.raises(AssertionParamError, match="did you mean 'tools'"):
        kind.compile({"tool": ["a"]}, ctx)


# -- call_order ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("order", "observed", "passes"),
    [
        (["a", "b"], ["a", "b"], True),
        (["a", "b"], ["x", "a", "y", "b", "z"], True),  # gaps are allowed
        (["a", "b"], ["b", "a"], False),
        (["a", "a"], ["a", "b"], False),  # a repeated name must repeat
        (["a", "a"], ["a", "b", "a"], True),
        ([], [], True),
        ([], ["a"], True),
        (["a"], [], False),
    ],
)
def test_call_order_is_a_greedy_subsequence(
    ctx: CompileContext, order: list[str], observed: list[str], passes: bool
) -> None:
    failures = run(compile_(CALL_ORDER, ctx, order=order), {}, calls(*observed))
    assert (failures == []) is passes


def test_call_order_failure_matches_the_peer_console_block(ctx: CompileContext) -> None:
    check = compile_(CALL_ORDER, ctx, order=["lookup_order", "issue_refund"])
    [failure] = run(check, {}, calls("issue_refund", "lookup_order"))
    assert failure.type == "call_order"
    assert failure.message == "Tool call order not satisfied: lookup_order -> issue_refund"
    assert failure.expected == "lookup_order -> issue_refund"
    assert failure.observed == "issue_refund -> lookup_order"
    assert failure.details == {
        "expected_order": ["lookup_order", "issue_refund"],
        "observed_calls": ["issue_refund", "lookup_order"],
    }
    [empty] = run(check, {})
    assert empty.observed == "<none>"


def test_call_order_param_refusals(ctx: CompileContext) -> None:
    with pytest.raises(AssertionParamError, match="missing parameter 'order' for call_order"):
        CALL_ORDER.compile({}, ctx)
    with pytest.raises(AssertionParamError, match="did you mean 'order'"):
        CALL_ORDER.compile({"ordre": ["a"]}, ctx)


# -- tool_args ----------------------------------------------------------------------------------

ORDER_ARGS = {
    "type": "object",
    "properties": {"order_id": {"type": "string"}, "limit": {"type": "integer"}},
    "required": ["order_id"],
}


def lookup(call_id: str, **args: Any) -> ToolCall:
    return ToolCall(call_id=call_id, name="lookup_order", args=args, ok=True)


def test_tool_args_inline_schema(ctx: CompileContext) -> None:
    check = compile_(TOOL_ARGS, ctx, tool="lookup_order", schema=ORDER_ARGS)
    assert check.type == "tool_args"
    other = ToolCall(call_id="s1", name="search_docs", args={"q": 5}, ok=True)
    assert run(check, {}, [other, lookup("c1", order_id="A1"), lookup("c2", order_id="B")]) == []

    [failure] = run(check, {}, [other, lookup("c1", order_id="A1"), lookup("c2", order_id=7)])
    assert failure.message == (
        "Tool args invalid: lookup_order call #3 (call_id c2) at order_id: "
        "7 is not of type 'string'"
    )
    assert failure.expected == "lookup_order args valid against the inline schema for lookup_order"
    assert failure.observed == "call #3 (c2) at order_id: 7 is not of type 'string'"
    assert failure.details is not None
    assert failure.details["call_id"] == "c2" and failure.details["call_index"] == 3


def test_tool_args_reports_missing_fields_and_counts_other_invalid_calls(
    ctx: CompileContext,
) -> None:
    check = compile_(TOOL_ARGS, ctx, tool="lookup_order", schema=ORDER_ARGS)
    [failure] = run(check, {}, [lookup("c1"), lookup("c2", order_id="x"), lookup("c3", limit="5")])
    assert failure.message == (
        "Tool args invalid: lookup_order call #1 (call_id c1) at <root>: missing required "
        "field: order_id (and 1 more invalid call: c3)"
    )
    assert failure.details is not None
    assert failure.details["invalid_call_ids"] == ["c1", "c3"]
    assert failure.details["missing"] == ["order_id"]


def test_tool_args_passes_when_the_tool_was_never_called(ctx: CompileContext) -> None:
    check = compile_(TOOL_ARGS, ctx, tool="lookup_order", schema=ORDER_ARGS)
    assert run(check, {}, calls("search_docs")) == []


def test_tool_args_schema_path(tmp_path: Path, ctx: CompileContext) -> None:
    name = write_schema(tmp_path, ORDER_ARGS, "args.json")
    check = compile_(TOOL_ARGS, ctx, tool="lookup_order", schema_path=name)
    [failure] = run(check, {}, [lookup("c1", order_id=1)])
    assert failure.expected is not None and failure.expected.endswith("args.json")


def test_tool_args_inline_schema_is_copied(ctx: CompileContext) -> None:
    schema: dict[str, Any] = {"type": "object", "required": ["a"]}
    check = compile_(TOOL_ARGS, ctx, tool="t", schema=schema)
    schema["required"].append("b")
    call = ToolCall(call_id="c1", name="t", args={"a": 1}, ok=True)
    assert run(check, {}, [call]) == []


@pytest.mark.parametrize(
    ("params", "message", "key"),
    [
        ({"tool": "t"},
         "needs exactly one of 'schema' \\(inline\\) or 'schema_path', found neither", "schema"),
        ({"tool": "t", "schema": {}, "schema_path": "a.json"}, "found both", "schema_path"),
        ({"schema": {}}, "missing parameter 'tool' for tool_args", "tool"),
        ({"tool": "t", "schema": "x"}, "parameter 'schema' of tool_args must be an inline JSON",
         "schema"),
        ({"tool": "t", "schema": {"type": 5}},
         "the inline schema for t is not a valid JSON Schema", "schema"),
        ({"tool": "t", "shema": {}}, "did you mean 'schema'", "shema"),
    ],
)  # fmt: skip
def test_tool_args_param_refusals(
    ctx: CompileContext, params: dict[str, Any], message: str, key: str
) -> None:
    with pytest.raises(AssertionParamError, match=message) as info:
        TOOL_ARGS.compile(params, ctx)
    assert info.value.key == key
