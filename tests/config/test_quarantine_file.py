"""quarantine.yaml: entries read with their lines, every problem reported at its line."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trialrun.config.quarantine import (
    QuarantineEntry,
    _date,
    excused_ids,
    expired_warnings,
    find_quarantine_file,
    load_quarantine,
)
from trialrun.errors import ConfigError, ConfigErrors

IDS = ["refund_flow", "greet", "lookup_order"]


def load(tmp_path: Path, text: str) -> tuple[QuarantineEntry, ...]:
    path = tmp_path / "quarantine.yaml"
    path.write_text(text, encoding="utf-8")
    return load_quarantine(path, IDS, display="quarantine.yaml")


def problems(tmp_path: Path, text: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, text)
    error = caught.value
    found = error.errors if isinstance(error, ConfigErrors) else [error]
    return [str(single) for single in found]


def test_entries_keep_their_case_owner_reason_date_and_line(tmp_path: Path) -> None:
    entries = load(
        tmp_path,
        "# known flaky\n"
        "- case: greet\n  reason: upstream flakes\n  owner: ana\n  expires: 2026-12-31\n"
        '- case: refund_flow\n  reason: "#142"\n  owner: bo\n  expires: "2027-01-15"\n',
    )
    assert entries == (
        QuarantineEntry(
            "greet", "upstream flakes", "ana", dt.date(2026, 12, 31), "quarantine.yaml", 2
        ),
        QuarantineEntry("refund_flow", "#142", "bo", dt.date(2027, 1, 15), "quarantine.yaml", 6),
    )


def test_an_entry_holds_through_its_expiry_day_and_gates_from_the_next(tmp_path: Path) -> None:
    (entry,) = load(tmp_path, "- {case: greet, reason: r, owner: o, expires: 2026-12-31}\n")
    assert not entry.expired(dt.date(2026, 12, 30))
    assert not entry.expired(dt.date(2026, 12, 31))
    assert entry.expired(dt.date(2027, 1, 1))
    assert entry.block(dt.date(2027, 1, 1)) == {
        "reason": "r",
        "owner": "o",
        "expires": "2026-12-31",
        "expired": True,
    }


@pytest.mark.parametrize("text", ["", "# all fixed\n", "\n  \n"])
def test_an_empty_file_quarantines_nothing(tmp_path: Path, text: str) -> None:
    assert load(tmp_path, text) == ()


def test_every_problem_is_reported_at_its_line(tmp_path: Path) -> None:
    text = (
        "- case: refund_flw\n  reason: r\n  owner: ana\n  expires: 2026-12-31\n"  # 1
        "- case: greet\n  reason: r\n  expires: 2026-12-31\n"  # 5
        "- case: lookup_order\n  reason: r\n  owner: bo\n  expires: 31/12/2026\n"  # 8
        "- case: lookup_order\n  reason: r\n  owner: bo\n  expires: 2026-12-31\n"  # 12
        "- case: greet\n  reason: r\n  owner: ''\n  expires: 2026-12-31\n  until: x\n"  # 16
    )
    assert problems(tmp_path, text) == [
        "quarantine.yaml:1: unknown case id 'refund_flw': no case of the suite has it "
        "(did you mean 'refund_flow'?)",
        "quarantine.yaml:5: missing required key 'owner' in entry for case 'greet'",
        "quarantine.yaml:11: entry for case 'lookup_order': 'expires' must be a date written "
        "YYYY-MM-DD, found string '31/12/2026'",
        "quarantine.yaml:12: case 'lookup_order' is listed twice (first at line 8); keep one entry",
        "quarantine.yaml:18: entry for case 'greet': 'owner' must not be empty",
        "quarantine.yaml:20: unknown key 'until' in entry for case 'greet'",
    ]


@pytest.mark.parametrize(
    ("expires", "found"),
    [
        ("2026-12-31T10:00:00", "a YAML datetime"),
        ("20261231", "integer 20261231"),
        ('"2026-1-5"', "string '2026-1-5'"),
        ("null", "null"),
    ],
)
def test_expires_must_be_a_day(tmp_path: Path, expires: str, found: str) -> None:
    (message,) = problems(
        tmp_path, f"- case: greet\n  reason: r\n  owner: o\n  expires: {expires}\n"
    )
    assert message.startswith("quarantine.yaml:4: entry for case 'greet': 'expires' must be a date")
    assert found in message


def test_a_mapping_is_not_a_list_of_entries(tmp_path: Path) -> None:
    assert problems(tmp_path, "case: greet\n") == [
        "quarantine.yaml:1: expected a list of entries {case, reason, owner, expires}, "
        "found a mapping"
    ]


def test_the_file_is_found_under_either_spelling(tmp_path: Path) -> None:
    assert find_quarantine_file(tmp_path) is None
    (tmp_path / "quarantine.yml").write_text("")
    assert find_quarantine_file(tmp_path) == tmp_path / "quarantine.yml"


def test_only_entries_that_hold_excuse_a_case_and_expired_ones_are_named() -> None:
    docs = [
        {"id": "a", "status": "fail", "quarantine": {"expired": False, "expires": "2026-12-31"}},
        {
            "id": "b",
            "status": "fail",
            "quarantine": {"expired": True, "expires": "2026-01-01", "owner": "bo"},
        },
        {"id": "c", "status": "fail"},
    ]
    assert excused_ids(docs) == {"a"}
    (warning,) = expired_warnings(docs)
    assert "case 'b' expired on 2026-01-01 (owner bo): it gates again" in warning


@given(st.text(max_size=12))
def test_a_date_is_exactly_the_ten_character_iso_day(text: str) -> None:
    parsed = _date(text)
    try:
        expected: dt.date | None = dt.date.fromisoformat(text) if len(text) == 10 else None
    except ValueError:
        expected = None
    assert parsed == expected
    if parsed is not None:
        assert parsed.isoformat() == text


@given(st.dates())
def test_every_day_round_trips_as_text_and_as_a_yaml_date(day: dt.date) -> None:
    assert _date(day) == day
    assert _date(day.isoformat()) == day
    assert _date(dt.datetime(day.year, day.month, day.day)) is None
