"""How a replay miss words the first difference: where it is, and excerpts that show it."""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from trialrun.httprec.difference import describe, first_difference


def test_a_long_string_differing_late_shows_the_differing_characters() -> None:
    recorded = {"messages": [{"content": "x" * 150 + "OLD" + "y" * 100}]}
    requested = {"messages": [{"content": "x" * 150 + "NEW" + "y" * 100}]}
    found = first_difference(recorded, requested)
    assert found is not None and found[0] == "messages[0].content"
    text = describe(3, found, used=False)
    old = text.split("recorded ")[1].split(", requested ")[0]
    new = text.split(", requested ")[1]
    assert old != new
    assert "OLD" in old and "NEW" in new
    assert old.startswith("...") and old.endswith("...")
    # The excerpt is centred: as much context before the difference as after it.
    assert abs(old.index("OLD") - (len(old) - old.index("OLD"))) <= 6


def test_a_short_difference_is_shown_whole() -> None:
    text = describe(1, first_difference({"q": "alpha"}, {"q": "alps"}), used=False)
    assert text.endswith('first difference at q: recorded "alpha", requested "alps"')


def test_a_difference_near_the_start_of_a_long_string_shows_its_start() -> None:
    text = describe(1, first_difference("ab" + "z" * 200, "ac" + "z" * 200), used=False)
    assert 'recorded "abzz' in text and 'requested "aczz' in text


def test_reordered_tools_are_reported_by_name_not_description() -> None:
    tools = [
        {"description": "Search the docs", "name": "search_docs"},
        {"description": "Fetch a page", "name": "fetch"},
    ]
    found = first_difference({"tools": tools}, {"tools": tools[::-1]})
    assert found is not None
    assert found[:2] == ("tools[0].name", "search_docs")
    # OpenAI's shape nests the name in "function": the name still comes first.
    wrapped = [{"type": "function", "function": tool} for tool in tools]
    found = first_difference({"tools": wrapped}, {"tools": wrapped[::-1]})
    assert found is not None and found[0] == "tools[0].function.name"


@given(
    st.text(alphabet="abc", min_size=1, max_size=400),
    st.text(alphabet="abc", max_size=400),
    st.text(alphabet="abc", max_size=400),
)
@example("a" * 100, "b", "c")
@example("a" * 100, "", "c")
def test_two_different_strings_never_show_identical_excerpts(
    common: str, old_tail: str, new_tail: str
) -> None:
    old, new = common + old_tail, common + new_tail
    found = first_difference(old, new)
    if old == new:
        assert found is None
        return
    assert found is not None
    text = describe(1, found, used=False)
    shown_old = text.split("recorded ")[1].split(", requested ")[0]
    shown_new = text.split(", requested ")[1]
    assert shown_old != shown_new
    assert len(shown_old) <= 90 and len(shown_new) <= 90
