"""``config.spec`` against pydantic's strict mode, which validated suites until it cost too much.

The suite and case records were pydantic models; their replacement must accept and refuse exactly
what they did, with the same error types at the same locations (``config.messages`` words both).
The oracle below is the pydantic definition those records had, kept here as the reference.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    StringConstraints,
    ValidationError,
)

from trialrun.config import models
from trialrun.config.spec import Record, SpecError, accepted_keys, parse, record_at


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


_Count = StrictInt | None


class Budgets(_Strict):
    max_wall_ms: _Count = Field(default=None, ge=0)
    max_tool_calls: _Count = Field(default=None, ge=0)
    max_tool_errors: _Count = Field(default=None, ge=0)
    max_tokens_out: _Count = Field(default=None, ge=0)
    max_cost_usd: StrictFloat | None = Field(default=None, ge=0)


class Regression(_Strict):
    min_pass_rate: StrictFloat | None = Field(
        default=None, ge=0, le=1, validation_alias=AliasChoices("min_pass_rate", "min_success_rate")
    )
    max_avg_wall_ms_delta_pct: StrictFloat | None = None
    max_p95_wall_ms_delta_pct: StrictFloat | None = Field(
        default=None,
        validation_alias=AliasChoices("max_p95_wall_ms_delta_pct", "max_p95_wall_ms_increase_pct"),
    )


class ReplaceText(_Strict):
    pattern: StrictStr
    replacement: StrictStr = ""
    flags: StrictStr = ""


class Normalization(_Strict):
    strip_keys: list[StrictStr] = Field(default_factory=list)
    strip_paths: list[StrictStr] = Field(default_factory=list)
    replace_paths: dict[str, Any] = Field(default_factory=dict)
    replace_text: list[ReplaceText] = Field(default_factory=list)


class McpServer(_Strict):
    command: list[StrictStr] = Field(min_length=1)
    env: dict[str, StrictStr] = Field(default_factory=dict)
    transport: Literal["stdio", "http"] = "stdio"


class ModelGateway(_Strict):
    upstreams: dict[Literal["openai", "anthropic", "azure", "gemini", "bedrock"], StrictStr] = (
        Field(default_factory=dict)
    )
    normalization: Normalization | None = None
    prices: StrictStr | None = None
    lenient: StrictBool = False


ServerName = Annotated[str, StringConstraints(strict=True, pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]*$")]


class SuiteConfig(_Strict):
    suite_name: StrictStr
    agent_command: list[StrictStr] = Field(min_length=1)
    mode: Literal["replay", "record", "live"]
    cases_path: StrictStr
    tool_registry: list[StrictStr]
    tool_module: StrictStr | None = None
    assertions: list[dict[str, Any]] = Field(default_factory=list)
    budgets: Budgets | None = None
    regression: Regression | None = None
    normalization: Normalization | None = None
    baseline_path: StrictStr | None = None
    output_dir: StrictStr | None = None
    idle_timeout_ms: StrictInt = Field(default=30_000, gt=0)
    max_message_bytes: StrictInt = Field(default=64 * 1024 * 1024, gt=0)
    tool_timeout_ms: StrictInt = Field(default=30_000, gt=0)
    kill_grace_ms: StrictInt = Field(default=2_000, ge=0)
    agent_channel: Literal["stdio", "fd"] = "stdio"
    prestart: StrictBool | None = None
    share_cpu: StrictBool | None = None
    mcp_servers: dict[ServerName, McpServer] = Field(default_factory=dict)
    model_gateway: ModelGateway | None = None


class CaseConfig(_Strict):
    id: StrictStr
    description: StrictStr | None = None
    input: dict[str, Any]
    cassette: StrictStr
    assertions: list[dict[str, Any]] | None = None
    budgets: Budgets | None = None
    normalization: Normalization | None = None


PAIRS: list[tuple[type[BaseModel], type[Record]]] = [
    (SuiteConfig, models.SuiteConfig),
    (CaseConfig, models.CaseConfig),
    (Budgets, models.Budgets),
    (Regression, models.Regression),
    (Normalization, models.Normalization),
    (McpServer, models.McpServer),
    (ModelGateway, models.ModelGateway),
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-3, max_value=3),
    st.integers(),
    st.just(10**400),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["", "a", "stdio", "http", "fd", "replay", "openai", "a b", "x\n", "-x"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.one_of(st.text(max_size=3), st.integers(0, 2)), inner, max_size=3),
    ),
    max_leaves=6,
)


def _plausible(record: type[Record], depth: int = 0) -> st.SearchStrategy[dict[Any, Any]]:
    """Mappings using the record's own keys (and aliases), a stray one, and nested records."""
    keys = [*accepted_keys(record), "unknown_key"]

    def value_for(name: str) -> st.SearchStrategy[Any]:
        nested = None
        if name in keys[:-1]:  # a record itself, or in a list or a map of them
            found = (record_at(record, at) for at in ([name], [name, 0], [name, "k"]))
            nested = next((r for r in found if r is not None), None)
        options = [values]
        if nested is not None and depth < 2:
            sub = _plausible(nested, depth + 1)
            options += [sub, st.lists(sub, max_size=2), st.dictionaries(st.text(max_size=3), sub)]
        if name in ("command", "agent_command", "tool_registry", "strip_keys", "strip_paths"):
            options.append(st.lists(st.text(max_size=3), max_size=2))
        if name in ("upstreams", "mcp_servers", "env", "input", "replace_paths"):
            options.append(
                st.dictionaries(
                    st.sampled_from(["openai", "anthropic", "s1", "a b", "x"]), values, max_size=2
                )
            )
        return st.one_of(*options)

    return st.lists(st.sampled_from(keys), unique=True).flatmap(
        lambda chosen: st.fixed_dictionaries({k: value_for(k) for k in chosen})
    )


def _same(left: Any, right: Any) -> bool:
    if isinstance(left, float) and isinstance(right, float) and math.isnan(left):
        return math.isnan(right)
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(_same(left[k], right[k]) for k in left)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(
            _same(a, b) for a, b in zip(left, right, strict=True)
        )
    return type(left) is type(right) and left == right


def _compare(oracle: type[BaseModel], record: type[Record], data: Any) -> None:
    try:
        expected: Any = oracle.model_validate(data).model_dump()
        expected_issues = None
    except ValidationError as exc:
        expected_issues = sorted((e["type"], repr(e["loc"])) for e in exc.errors())
    try:
        found: Any = parse(record, data).to_dict()
        found_issues = None
    except SpecError as exc:
        found_issues = sorted((i["type"], repr(i["loc"])) for i in exc.issues)
    assert found_issues == expected_issues
    if expected_issues is None:
        assert _same(found, expected)


@pytest.mark.parametrize(("oracle", "record"), PAIRS, ids=[r.__name__ for _, r in PAIRS])
@settings(max_examples=150)
@given(data=st.data())
def test_records_validate_like_pydantic_strict_models(
    oracle: type[BaseModel], record: type[Record], data: st.DataObject
) -> None:
    _compare(oracle, record, data.draw(_plausible(record)))


@pytest.mark.parametrize(
    "raw",
    [
        {"min_pass_rate": 1, "min_success_rate": 0.2},
        {"min_success_rate": 0.5, "max_p95_wall_ms_increase_pct": 3},
        {"min_pass_rate": float("nan")},
        {"min_pass_rate": True},
        {"max_avg_wall_ms_delta_pct": 10**400},
    ],
)
def test_aliases_and_edge_numbers_like_pydantic(raw: dict[str, Any]) -> None:
    _compare(Regression, models.Regression, raw)


def test_top_level_must_be_a_mapping() -> None:
    with pytest.raises(SpecError) as caught:
        parse(models.CaseConfig, ["not", "a", "mapping"])
    assert [(i["type"], i["loc"]) for i in caught.value.issues] == [("model_type", ())]


def test_records_are_frozen_and_compare_by_value() -> None:
    budgets = parse(models.Budgets, {"max_wall_ms": 5})
    assert budgets == models.Budgets(max_wall_ms=5)
    with pytest.raises(AttributeError):
        budgets.max_wall_ms = 6  # type: ignore[misc]
    assert budgets.merged(models.Budgets(max_tool_calls=2)) == models.Budgets(
        max_wall_ms=5, max_tool_calls=2
    )
