"""Hypothesis strategies the tests share."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

# JSON from outside, as an agent sends it: st.text() includes lone surrogates.
json_values: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),  # st.text() includes lone surrogates
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
