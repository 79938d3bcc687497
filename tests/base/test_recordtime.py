"""``recorded_at``: written to the second in UTC, read back to the same moment."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from trialrun.base.recordtime import parse_recorded_at, recorded_at


def test_a_known_moment_is_written_in_utc() -> None:
    assert recorded_at(0) == "1970-01-01T00:00:00Z"
    assert recorded_at(1796202403.9) == "2026-12-02T09:06:43Z"


@given(st.integers(min_value=0, max_value=253402300799))
def test_what_is_written_reads_back_to_the_same_second(seconds: int) -> None:
    assert parse_recorded_at(recorded_at(seconds)) == datetime.fromtimestamp(seconds, UTC)


@given(st.text())
def test_any_text_reads_as_a_moment_or_none_never_raises(text: str) -> None:
    moment = parse_recorded_at(text)
    assert moment is None or moment.tzinfo is not None


def test_offsets_count_and_a_time_without_a_zone_has_no_known_age() -> None:
    assert parse_recorded_at("2026-01-01T02:00:00+02:00") == datetime(2026, 1, 1, tzinfo=UTC)
    assert parse_recorded_at("2026-01-01T00:00:00") is None
    assert parse_recorded_at(None) is None
    assert parse_recorded_at(20260101) is None
