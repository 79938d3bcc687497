"""``config.spec``: the one validator of every file trialrun reads (docs/internals.md).

Properties over generated documents for every record (suite, case, compare, session, triggers,
plan): only ``SpecError`` escapes, an accepted document round-trips, every issue points at a
place that exists in the document (its line is found from it), and every message names a line.
Then the spec features the compare and plan records need, one by one.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from trialrun.commands import verify_plan
from trialrun.compare import config as compare_config
from trialrun.config import models
from trialrun.config.messages import spec_errors
from trialrun.config.spec import (
    Float,
    Int,
    ListOf,
    Record,
    SpecError,
    Str,
    accepted_keys,
    parse,
    record_at,
    record_schema,
)
from trialrun.config.yamlload import parse_json

RECORDS: list[type[Record]] = [
    models.SuiteConfig,
    models.CaseConfig,
    models.Regression,
    compare_config.CompareConfig,
    compare_config.CaseConfig,
    compare_config.SessionConfig,
    compare_config.TriggersConfig,
    verify_plan.PlanConfig,
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-3, max_value=3),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["", "a", "stdio", "text", "explicit", "a b", "x\n", "-x", "{task}"]),
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
        options = [values, st.lists(st.text(max_size=3), max_size=2)]
        if nested is not None and depth < 2:
            sub = _plausible(nested, depth + 1)
            options += [sub, st.lists(sub, max_size=2), st.dictionaries(st.text(max_size=3), sub)]
        return st.one_of(*options)

    return st.lists(st.sampled_from(keys), unique=True).flatmap(
        lambda chosen: st.fixed_dictionaries({k: value_for(k) for k in chosen})
    )


def _as_written(value: Any) -> Any:
    """A record back as the file data that builds it, keys spelled as files write them."""
    if isinstance(value, Record):
        return {
            field.metadata["key"].spelled or field.name: _as_written(getattr(value, field.name))
            for field in dataclasses.fields(value)
            if "key" in field.metadata
        }
    if isinstance(value, list):
        return [_as_written(item) for item in value]
    if isinstance(value, dict):
        return {k: _as_written(v) for k, v in value.items()}
    return value


def _at(data: Any, loc: tuple[Any, ...]) -> Any:
    for element in loc:
        if element == "[key]":
            continue
        assert isinstance(data, dict | list), f"{loc} walks into a scalar"
        assert element in data if isinstance(data, dict) else 0 <= element < len(data), loc
        data = data[element]
    return data


def _keys_stay_apart(value: Any) -> bool:
    """Whether every mapping in ``value`` keeps its keys apart once JSON makes them strings."""
    if isinstance(value, dict):
        return len({str(k) for k in value}) == len(value) and all(
            _keys_stay_apart(v) for v in value.values()
        )
    if isinstance(value, list):
        return all(_keys_stay_apart(v) for v in value)
    return True


def _check(record: type[Record], data: dict[Any, Any]) -> None:
    try:
        built = parse(record, data)
    except SpecError as exc:
        assert exc.issues
        for issue in exc.issues:
            loc = tuple(issue["loc"])
            if issue["type"] == "missing":
                parent = _at(data, loc[:-1])
                assert loc[-1] not in parent and loc[-1] in accepted_keys(
                    record_at(record, loc[:-1]) or record
                )
            elif loc and loc[-1] == "[key]":
                assert issue["input"] == loc[-2] and loc[-2] in _at(data, loc[:-2])
            else:
                found = _at(data, loc)
                assert found is issue["input"] or found == issue["input"]
        unknown = [k for k in data if k not in accepted_keys(record)]
        refused = {
            i["loc"][0] for i in exc.issues if i["type"] in ("extra_forbidden", "invalid_key")
        }
        assert refused >= set(unknown)
        return
    assert set(data) <= set(accepted_keys(record))
    assert parse(record, _as_written(built)) == built


@pytest.mark.parametrize("record", RECORDS, ids=[f"{r.__module__}.{r.__name__}" for r in RECORDS])
@settings(max_examples=150)
@given(data=st.data())
def test_records_refuse_at_real_places_and_accept_what_they_build(
    record: type[Record], data: st.DataObject
) -> None:
    _check(record, data.draw(_plausible(record)))


@pytest.mark.parametrize("record", RECORDS, ids=[f"{r.__module__}.{r.__name__}" for r in RECORDS])
@settings(max_examples=60)
@given(data=st.data())
def test_every_message_names_a_line_of_the_file(record: type[Record], data: st.DataObject) -> None:
    raw = data.draw(_plausible(record))
    # {"2": ..., 2: ...} is a fine mapping but one JSON key twice, which the reader refuses.
    assume(_keys_stay_apart(raw))
    text = json.dumps(raw, indent=1)  # JSON is the simplest file whose lines are known
    doc = parse_json(text, file="f.json")
    try:
        parse(record, doc.data)
    except SpecError as exc:
        errors = spec_errors(exc, doc, record, "file")
        assert all(1 <= (e.line or 0) <= text.count("\n") + 1 for e in errors)
        assert all(str(e).startswith(f"f.json:{e.line}: ") for e in errors)
        # Only assertion entries are left to their compiler; everything else gets a message.
        assertion_issues = [i for i in exc.issues if i["loc"][:1] == ("assertions",)]
        assert len(errors) + len(assertion_issues) >= len(exc.issues) - len(
            [i for i in exc.issues if i["type"] == "missing"]
        )


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"min_pass_rate": 1, "min_success_rate": 0.2}, "extra_forbidden"),
        ({"min_success_rate": 0.5, "max_p95_wall_ms_increase_pct": 3}, None),
        ({"min_pass_rate": float("nan")}, "less_than_equal"),
        ({"min_pass_rate": True}, "float_type"),
        ({"max_avg_wall_ms_delta_pct": 10**400}, "float_type"),
    ],
)
def test_aliases_and_edge_numbers(raw: dict[str, Any], expected: str | None) -> None:
    try:
        built = parse(models.Regression, raw)
    except SpecError as exc:
        assert [i["type"] for i in exc.issues] == [expected]
    else:
        assert expected is None
        assert built.min_pass_rate == 0.5 and built.max_p95_wall_ms_delta_pct == 3.0


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


def _issues(spec: Any, value: Any) -> list[tuple[str, Any]]:
    found: list[dict[str, Any]] = []
    spec.check(value, ("k",), found)
    return [(i["type"], i["ctx"]) for i in found]


def test_min_length_and_numbers_as_text() -> None:
    assert _issues(Str(min_length=1), "") == [("string_too_short", {"min_length": 1})]
    assert Str(numbers=(int,)).check(3, (), []) == "3"
    assert _issues(Str(numbers=(int,)), 1.5) == [("string_type", None)]
    assert _issues(Str(numbers=(int,)), True) == [("string_type", None)]
    assert Str(numbers=(int, float)).check(1.5, (), []) == "1.5"


def test_bounds_on_both_sides() -> None:
    assert _issues(Int(ge=1, le=120), 121) == [("less_than_equal", {"le": 120})]
    assert _issues(Int(ge=1, le=120), 0) == [("greater_than_equal", {"ge": 1})]
    assert _issues(Float(gt=0), 0) == [("greater_than", {"gt": 0})]
    assert Float(gt=0).check(2, (), []) == 2.0
    assert math.isclose(Float(gt=0).check(0.001, (), []), 0.001)


def test_a_lone_item_reads_as_a_list_of_one_where_allowed() -> None:
    single = ListOf(Str(), single=True)
    assert single.check("git", (), []) == ["git"]
    assert _issues(single, 5) == [("list_type", None)]
    assert _issues(single, {"a": 1}) == [("list_type", None)]
    assert _issues(ListOf(Str()), "git") == [("list_type", None)]


def test_a_key_spelled_unlike_its_field() -> None:
    patch = parse(verify_plan.FilePatch, {"file": "a", "replace": "b", "with": ""})
    assert patch.with_ == ""
    with pytest.raises(SpecError) as caught:
        parse(verify_plan.FilePatch, {"file": "a", "replace": "b", "with_": "c"})
    assert [(i["type"], i["loc"]) for i in caught.value.issues] == [
        ("missing", ("with",)),
        ("extra_forbidden", ("with_",)),
    ]
    assert record_schema(verify_plan.FilePatch, {})["required"] == ["file", "replace", "with"]


def test_fields_without_a_key_are_not_read_from_files() -> None:
    assert "timeout_written" not in accepted_keys(compare_config.CaseConfig)
    with pytest.raises(SpecError):
        parse(compare_config.CaseConfig, {"task": "t", "timeout_written": True})
