from hypothesis import given
from hypothesis import strategies as st

from trialrun.base.words import counted


def test_one_is_singular_and_the_rest_plural() -> None:
    assert counted(1, "error") == "1 error"
    assert counted(0, "error") == "0 errors"
    assert counted(2, "case") == "2 cases"
    assert counted(1, "analysis", "analyses") == "1 analysis"
    assert counted(3, "analysis", "analyses") == "3 analyses"


@given(st.integers(min_value=-5, max_value=10_000))
def test_the_count_is_printed_as_given(count: int) -> None:
    text = counted(count, "call")
    assert text.startswith(f"{count} call")
    assert text.endswith("s") is (count != 1)
