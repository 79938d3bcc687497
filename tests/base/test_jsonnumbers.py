"""jsonnumbers: JSON from outside holds finite numbers only, whoever reads it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from strategies import json_values
from trialrun.base.jsonnumbers import (
    FINITE_JSON,
    finite_float,
    loads_finite,
    refuse_constant,
)


@given(json_values)
def test_json_is_read_as_json_loads_reads_it(value: Any) -> None:
    text = json.dumps(value)
    assert FINITE_JSON.decode(text) == json.loads(text)


@pytest.mark.parametrize("text", ["NaN", "[1, Infinity]", '{"x": -Infinity}'])
def test_python_words_for_numbers_are_not_json(text: str) -> None:
    with pytest.raises(ValueError, match=r"(NaN|-?Infinity) is not valid JSON"):
        FINITE_JSON.decode(text)
    with pytest.raises(ValueError, match="is not valid JSON"):
        json.loads(text, parse_constant=refuse_constant, parse_float=finite_float)


@pytest.mark.parametrize("number", ["1e400", "-1e400", "1.5e309"])
def test_numbers_beyond_a_double_are_refused(number: str) -> None:
    with pytest.raises(ValueError, match="beyond the range of a JSON number"):
        FINITE_JSON.decode(f'{{"n": {number}}}')


def _outcome(read: Any, text: str) -> tuple[str, Any]:
    try:
        return "value", read(text)
    except json.JSONDecodeError as error:
        return "JSONDecodeError", (error.msg, error.pos)
    except (ValueError, RecursionError) as error:
        return type(error).__name__, str(error)


_texts = st.one_of(
    json_values.map(json.dumps),
    st.text(max_size=12),
    st.sampled_from(["\ufeff{}", " [1] ", "NaN", "1e400", '{"a": 1} x', "", "[", "\ufeff"]),
)


@given(_texts)
def test_loads_finite_reads_and_refuses_what_json_loads_does_with_the_same_options(
    text: str,
) -> None:
    def stdlib(value: str) -> Any:
        return json.loads(value, parse_constant=refuse_constant, parse_float=finite_float)

    assert _outcome(loads_finite, text) == _outcome(stdlib, text)
