"""The assertion registry: entry points (built-ins and plugins), laziness, broken plugins."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fake_entry_point import FakeEntryPoint
from trialrun.base import assertion_api as registry
from trialrun.base.assertion_api import (
    AssertionParamError,
    AssertionPluginError,
    AssertionRegistry,
    CheckSubject,
    CompileContext,
    Param,
    check_params,
    describe_value,
    is_string,
    is_string_list,
)
from trialrun.base.results import AgentRun, CheckFailure
from trialrun.checks import builtin
from trialrun.checks.verdict import judge_case
from trialrun.config.models import Budgets, CaseConfig, Normalization

BUILTIN_NAMES = ["call_order", "json_schema", "must_call", "must_not_call", "required_fields",
                 "tool_args"]  # fmt: skip


# -- a third-party assertion type, written only against the public extension API ---------------


@dataclass(frozen=True)
class OutputEquals:
    expected: Any
    type: str = "output_equals"

    def check(self, subject: CheckSubject) -> list[CheckFailure]:
        if subject.output == self.expected:
            return []
        return [CheckFailure(type=self.type, message=f"output differs: {subject.output!r}")]


class OutputEqualsType:
    name = "output_equals"

    def compile(self, params: Mapping[str, Any], ctx: CompileContext) -> OutputEquals:
        check_params(
            self.name, params, [Param("value", "a mapping", lambda v: isinstance(v, dict))]
        )
        return OutputEquals(params["value"])


def ctx() -> CompileContext:
    return CompileContext(resolve_path=Path)


# -- built-ins through the real, installed entry points -----------------------------------------


def test_builtins_are_found_through_the_installed_entry_points() -> None:
    names = registry.discover_entry_points()
    assert sorted(ep.name for ep in names) == BUILTIN_NAMES
    fresh = AssertionRegistry()
    assert fresh.names() == BUILTIN_NAMES
    assert fresh.get("json_schema") is builtin.JSON_SCHEMA
    assert fresh.get("tool_args") is builtin.TOOL_ARGS


def test_the_builtin_table_is_what_pyproject_declares() -> None:
    declared = {ep.name: ep.value for ep in registry.discover_entry_points()}
    assert dict(registry.BUILTIN_TYPES) == declared


def test_builtins_load_without_listing_the_entry_points() -> None:
    # Listing reads every installed distribution's metadata: a suite of built-in types must not.
    listed = 0

    def discover() -> list[FakeEntryPoint]:
        nonlocal listed
        listed += 1
        return [FakeEntryPoint("output_equals", "acme:T", OutputEqualsType())]

    reg = AssertionRegistry(discover, builtins=registry.BUILTIN_TYPES)
    for name in BUILTIN_NAMES:
        assert reg.get(name) is getattr(builtin, name.upper())
    assert listed == 0
    assert isinstance(reg.get("output_equals"), OutputEqualsType)  # not built in: listed
    assert reg.get("contains") is None
    assert listed == 1
    assert reg.names() == sorted([*BUILTIN_NAMES, "output_equals"])


def test_a_builtin_name_is_reserved_for_the_builtin() -> None:
    rival = FakeEntryPoint("must_call", "rival:MUST_CALL", OutputEqualsType())
    reg = AssertionRegistry(lambda: [rival], builtins=registry.BUILTIN_TYPES)
    assert reg.get("must_call") is builtin.MUST_CALL
    assert rival.loads == 0
    with pytest.raises(ValueError, match="'must_call' is already registered"):
        AssertionRegistry(list, builtins=registry.BUILTIN_TYPES).register(builtin.MUST_CALL)


def test_a_builtin_that_fails_to_load_names_its_entry_point() -> None:
    reg = AssertionRegistry(list, builtins={"must_call": "trialrun.checks.builtin:NOT_THERE"})
    with pytest.raises(AssertionPluginError) as info:
        reg.get("must_call")
    assert str(info.value) == (
        "cannot load assertion type 'must_call' from entry point "
        "'must_call = trialrun.checks.builtin:NOT_THERE' (group trialrun.assertions): "
        "AttributeError: module 'trialrun.checks.builtin' has no attribute 'NOT_THERE'"
    )


class _Unspeakable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no words")


class _RaisesWhenMade:
    def __init__(self) -> None:
        raise _Unspeakable


def test_a_plugin_failing_with_an_exception_that_cannot_say_what_is_named_by_its_type() -> None:
    broken = FakeEntryPoint("odd", "acme:ODD", error=_Unspeakable())
    with pytest.raises(AssertionPluginError) as info:
        AssertionRegistry(lambda: [broken]).get("odd")
    assert str(info.value) == (
        "cannot load assertion type 'odd' from entry point 'odd = acme:ODD' "
        "(group trialrun.assertions): _Unspeakable"
    )
    made = FakeEntryPoint("odd", "acme:Odd", _RaisesWhenMade)
    with pytest.raises(AssertionPluginError) as info:
        AssertionRegistry(lambda: [made]).get("odd")
    assert str(info.value) == (
        "cannot instantiate assertion type 'odd' from entry point 'odd = acme:Odd' "
        "(group trialrun.assertions): _Unspeakable"
    )


def test_module_level_functions_use_the_default_registry() -> None:
    assert set(BUILTIN_NAMES) <= set(registry.assertion_type_names())
    assert registry.get_assertion_type("must_call") is builtin.MUST_CALL
    assert registry.get_assertion_type("contains") is None


# -- plugins ------------------------------------------------------------------------------------


def test_a_plugin_type_works_end_to_end(monkeypatch: pytest.MonkeyPatch) -> None:
    plugin = FakeEntryPoint("output_equals", "acme_checks:OUTPUT_EQUALS", OutputEqualsType())
    monkeypatch.setattr(
        importlib.metadata,
        "entry_points",
        lambda group: [plugin] if group == registry.ENTRY_POINT_GROUP else [],
    )
    monkeypatch.setattr(registry, "_DEFAULT_REGISTRY", AssertionRegistry())

    assert registry.assertion_type_names() == ["output_equals"]
    kind = registry.get_assertion_type("output_equals")
    assert kind is not None
    compiled = kind.compile({"value": {"answer": 42}}, ctx())

    @dataclass(frozen=True)
    class Case:
        config: CaseConfig
        cassette_path: Path
        assertions: list[Any]
        budgets: Budgets
        normalization: Normalization

    case = Case(
        config=CaseConfig(id="t1", input={}, cassette="c.jsonl"),
        cassette_path=Path("c.jsonl"),
        assertions=[compiled],
        budgets=Budgets(),
        normalization=Normalization(),
    )
    assert judge_case(case, AgentRun(case_id="t1", output={"answer": 42})).status == "pass"
    failed = judge_case(case, AgentRun(case_id="t1", output={"answer": 41}))
    assert failed.status == "fail"
    assert failed.failure is not None
    assert failed.failure.message == "output differs: {'answer': 41}"

    with pytest.raises(AssertionParamError, match="did you mean 'value'") as info:
        kind.compile({"valeu": {}}, ctx())
    assert info.value.key == "valeu"


def test_entry_points_are_listed_once_and_loaded_only_when_used() -> None:
    calls = 0
    used = FakeEntryPoint("output_equals", "acme:A", OutputEqualsType())
    unused = FakeEntryPoint("other", "acme:B", error=ImportError("never imported"))

    def discover() -> list[FakeEntryPoint]:
        nonlocal calls
        calls += 1
        return [used, unused]

    reg = AssertionRegistry(discover)
    assert calls == 0  # nothing happens before the first lookup
    assert reg.names() == ["other", "output_equals"]
    assert reg.get("output_equals") is used.target
    assert reg.get("output_equals") is used.target
    assert reg.get("missing") is None
    assert (calls, used.loads, unused.loads) == (1, 1, 0)


def test_a_broken_plugin_fails_only_when_its_type_is_used() -> None:
    broken = FakeEntryPoint("fancy", "acme_broken:FANCY", error=ModuleNotFoundError("no acme_x"))
    good = FakeEntryPoint("output_equals", "acme:OK", OutputEqualsType())
    reg = AssertionRegistry(lambda: [broken, good])

    assert reg.get("output_equals") is good.target
    with pytest.raises(AssertionPluginError) as info:
        reg.get("fancy")
    message = str(info.value)
    assert "fancy = acme_broken:FANCY" in message
    assert "trialrun.assertions" in message
    assert "ModuleNotFoundError: no acme_x" in message
    assert reg.names() == ["fancy", "output_equals"]


def test_a_plugin_that_exits_while_loading_is_a_plugin_error() -> None:
    exits = FakeEntryPoint("fancy", "acme_exits:FANCY", error=SystemExit(2))
    with pytest.raises(AssertionPluginError, match="SystemExit: 2"):
        AssertionRegistry(lambda: [exits]).get("fancy")

    class ExitsWhenMade:
        name = "fancy"

        def __init__(self) -> None:
            raise SystemExit(5)

    made = FakeEntryPoint("fancy", "acme:ExitsWhenMade", ExitsWhenMade)
    with pytest.raises(AssertionPluginError, match=r"cannot instantiate .*SystemExit: 5"):
        AssertionRegistry(lambda: [made]).get("fancy")


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        (object(), "is not an assertion type"),
        (42, "found int"),
        (builtin.MUST_CALL, "provides an assertion type named 'must_call'"),
    ],
)
def test_an_entry_point_must_provide_a_matching_assertion_type(target: Any, expected: str) -> None:
    reg = AssertionRegistry(lambda: [FakeEntryPoint("mine", "acme:MINE", target)])
    with pytest.raises(AssertionPluginError, match=expected):
        reg.get("mine")


def test_an_entry_point_may_name_a_class() -> None:
    reg = AssertionRegistry(lambda: [FakeEntryPoint("output_equals", "acme:T", OutputEqualsType)])
    assert isinstance(reg.get("output_equals"), OutputEqualsType)


def test_two_packages_providing_the_same_name_is_an_error_unless_identical() -> None:
    one = FakeEntryPoint("output_equals", "acme:T", OutputEqualsType())
    same = FakeEntryPoint("output_equals", "acme:T", OutputEqualsType())
    assert AssertionRegistry(lambda: [one, same]).get("output_equals") is one.target

    other = FakeEntryPoint("output_equals", "rival:T", OutputEqualsType())
    with pytest.raises(AssertionPluginError, match=r"provided by 2 entry points.*acme:T, rival:T"):
        AssertionRegistry(lambda: [one, other]).get("output_equals")


# -- programmatic registration ------------------------------------------------------------------


def test_register_adds_a_type_and_refuses_to_shadow_one_silently() -> None:
    reg = AssertionRegistry(lambda: [FakeEntryPoint("must_call", "x:Y", builtin.MUST_CALL)])
    mine = OutputEqualsType()
    reg.register(mine)
    assert reg.get("output_equals") is mine
    assert reg.names() == ["must_call", "output_equals"]
    with pytest.raises(ValueError, match="already registered; pass replace=True"):
        reg.register(OutputEqualsType())
    with pytest.raises(ValueError, match="'must_call' is already registered"):
        reg.register(builtin.MUST_CALL)
    replacement = OutputEqualsType()
    reg.register(replacement, replace=True)
    assert reg.get("output_equals") is replacement


def test_register_refuses_something_that_is_not_an_assertion_type() -> None:
    with pytest.raises(AssertionPluginError, match="expected an object with a string 'name'"):
        AssertionRegistry(list).register(object())  # type: ignore[arg-type]


def test_module_level_register(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "_DEFAULT_REGISTRY", AssertionRegistry(list))
    registry.register(OutputEqualsType())
    assert registry.assertion_type_names() == ["output_equals"]


# -- parameter checking helpers -----------------------------------------------------------------

SPEC = [Param("tools", "a list of strings", is_string_list), Param("mode", "a string", is_string,
        required=False)]  # fmt: skip


def test_check_params_accepts_valid_params() -> None:
    check_params("demo", {"tools": ["a"]}, SPEC)
    check_params("demo", {"tools": [], "mode": "x"}, SPEC)


@pytest.mark.parametrize(
    ("params", "message", "key"),
    [
        ({"tool": ["a"]}, "unknown parameter 'tool' for demo (did you mean 'tools'?)", "tool"),
        ({"zzz": 1, "tools": []},
         "unknown parameter 'zzz' for demo (valid parameters: tools, mode)", "zzz"),
        ({}, "missing parameter 'tools' for demo (expected a list of strings)", "tools"),
        ({"tools": "a"}, "parameter 'tools' of demo must be a list of strings, found string 'a'",
         "tools"),
        ({"tools": [1]}, "parameter 'tools' of demo must be a list of strings, found list [1]",
         "tools"),
        ({"tools": [], "mode": None}, "parameter 'mode' of demo must be a string, found null",
         "mode"),
    ],
)  # fmt: skip
def test_check_params_refusals(params: dict[str, Any], message: str, key: str) -> None:
    with pytest.raises(AssertionParamError) as info:
        check_params("demo", params, SPEC)
    assert str(info.value) == message
    assert info.value.key == key


def test_describe_value_cuts_long_values() -> None:
    assert describe_value(True) == "boolean true"
    assert describe_value(None) == "null"
    assert describe_value(1.5) == "number 1.5"
    assert describe_value({"a": 1}) == "mapping {'a': 1}"
    long = describe_value("x" * 100)
    assert long.startswith("string 'xxx") and long.endswith("...") and len(long) == 67
