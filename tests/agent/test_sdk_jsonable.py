"""Tool values to JSON data: pydantic's conversion and the plain fallback agree on the basics."""

from __future__ import annotations

import dataclasses
import enum
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trialrun.agent.jsonable import NotJsonError, plain_json_data, to_json_data


class Size(enum.Enum):
    S = "s"
    M = 2


@dataclasses.dataclass
class Item:
    name: str
    size: Size
    tags: tuple[str, ...]


json_data = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=15,
)


@given(json_data)
def test_json_data_is_left_as_it_is(value: Any) -> None:
    assert to_json_data(value) == value
    assert plain_json_data(value) == value


@pytest.mark.parametrize("convert", [to_json_data, plain_json_data])
def test_common_python_values_become_json(convert: Any) -> None:
    value = {
        "item": Item("hat", Size.M, ("a", "b")),
        "set": frozenset({1}),
        "bytes": "é".encode(),
        Size.S: "enum key",
        3: "int key",
    }
    converted = convert(value)
    assert converted == {
        "item": {"name": "hat", "size": 2, "tags": ["a", "b"]},
        "set": [1],
        "bytes": "é",
        "s": "enum key",
        "3": "int key",
    }
    json.dumps(converted, allow_nan=False)


@pytest.mark.parametrize("convert", [to_json_data, plain_json_data])
def test_unknown_objects_become_their_str(convert: Any) -> None:
    class Thing:
        def __str__(self) -> str:
            return "a thing"

    assert convert([Thing()]) == ["a thing"]


@pytest.mark.parametrize("convert", [to_json_data, plain_json_data])
def test_bytes_that_are_not_utf8_are_refused(convert: Any) -> None:
    with pytest.raises(NotJsonError):
        convert({"b": b"\xff"})


def test_the_fallback_refuses_endless_nesting() -> None:
    deep: list[Any] = []
    for _ in range(300):
        deep = [deep]
    with pytest.raises(NotJsonError, match="nested too deeply"):
        plain_json_data(deep)
