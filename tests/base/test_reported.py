"""The bounds of an agent's own numbers (``trialrun.base.reported``), for any value met."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trialrun.base.canonjson import dumps as canonical_json
from trialrun.base.reported import (
    MAX_COST_USD,
    MAX_COUNT,
    MAX_DURATION_MS,
    as_cost_usd,
    as_count,
    as_ms,
)

# What JSON decoding can hand a reader: any number Python reads (huge integers, infinities),
# and the other JSON types.
anything = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(10**400), max_value=10**400)
    | st.floats()
    | st.text(max_size=3)
    | st.lists(st.integers(), max_size=2)
    | st.dictionaries(st.text(max_size=2), st.integers(), max_size=2)
)


@given(anything)
def test_a_count_is_an_integer_within_its_bounds_or_none(value: Any) -> None:
    count = as_count(value)
    is_number = isinstance(value, int | float) and not isinstance(value, bool)
    finite = is_number and not (isinstance(value, float) and not math.isfinite(value))
    exact = finite and Fraction(value).denominator == 1
    if exact and 0 <= value <= MAX_COUNT:
        assert type(count) is int and count == value
    else:
        assert count is None


@pytest.mark.parametrize(("read", "limit"), [(as_cost_usd, MAX_COST_USD), (as_ms, MAX_DURATION_MS)])
@given(value=anything)
def test_an_amount_is_a_finite_float_within_its_bounds_or_none(
    read: Any, limit: float, value: Any
) -> None:
    amount = read(value)
    is_number = isinstance(value, int | float) and not isinstance(value, bool)
    if is_number and not (isinstance(value, float) and math.isnan(value)) and 0 <= value <= limit:
        assert type(amount) is float and amount == value
        assert math.copysign(1.0, amount) == 1.0  # -0.0 reads as 0
    else:
        assert amount is None


@given(st.lists(st.floats() | st.integers(), max_size=50))
def test_sums_of_accepted_reports_stay_json(values: list[Any]) -> None:
    # Each report is bounded so that a run's totals stay finite: canonical JSON refuses infinity.
    costs = [cost for value in values if (cost := as_cost_usd(value)) is not None]
    assert math.isfinite(sum(costs) * 1000)
    canonical_json({"costUsd": sum(costs), "totalTokens": sum(as_count(v) or 0 for v in values)})


def test_the_bounds_themselves_are_accepted_and_the_next_values_are_not() -> None:
    assert as_count(MAX_COUNT) == MAX_COUNT and as_count(MAX_COUNT + 1) is None
    assert as_count(3.0) == 3 and as_count(-1) is None and as_count(True) is None
    assert as_cost_usd(MAX_COST_USD) == MAX_COST_USD
    assert as_cost_usd(math.nextafter(MAX_COST_USD, math.inf)) is None
    assert as_ms(MAX_DURATION_MS) == MAX_DURATION_MS and as_ms(10**400) is None
