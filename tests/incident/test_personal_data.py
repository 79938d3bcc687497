"""Card numbers and e-mail addresses: found by shape and checksum, replaced where they stand."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trialrun.incident.personal import is_card_number, redact_personal, redact_personal_text

CARDS = [
    "4111111111111111",  # Visa test card
    "4111 1111 1111 1111",
    "5555-5555-5555-4444",  # Mastercard
    "378282246310005",  # Amex, 15 digits
    "6011111111111117",  # Discover
    "2223003122003222",  # Mastercard 2-series
]


@pytest.mark.parametrize("card", CARDS)
def test_luhn_valid_card_numbers_are_redacted_in_place(card: str) -> None:
    assert is_card_number(card)
    assert redact_personal_text(f"paid with {card}.") == "paid with [REDACTED]."


def test_a_number_after_a_card_number_stays() -> None:
    # The digit groups are taken greedily; the card is the longest Luhn-valid start.
    assert redact_personal_text("4111 1111 1111 1111 2 items") == "[REDACTED] 2 items"


@pytest.mark.parametrize(
    "kept",
    [
        "4111111111111112",  # fails the Luhn check
        "1733356800000",  # an epoch in milliseconds
        "ord_4111111111111111",  # part of an identifier
        "411111111111",  # 12 digits: too short
        "41111111111111111111",  # 20 digits: too long
        "4111  1111 1111 1111",  # two spaces: not one grouped number
        "3.4111111111111111",  # inside a decimal
    ],
)
def test_numbers_that_are_not_card_numbers_stay(kept: str) -> None:
    assert redact_personal_text(kept) == kept


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        ("dana.reyes@example.com", "[REDACTED]"),
        ("mail Dana <dana+refunds@mail.example.co.uk> today", "mail Dana <[REDACTED]> today"),
        ("a@b.io, c_d@e-f.org", "[REDACTED], [REDACTED]"),
        ("no at sign here", "no at sign here"),
        ("user@localhost", "user@localhost"),  # no domain a message could reach
        ("@handle and x@", "@handle and x@"),
    ],
)
def test_email_addresses_are_redacted_in_place(text: str, redacted: str) -> None:
    assert redact_personal_text(text) == redacted


def test_only_strings_are_scanned_and_the_input_is_not_changed() -> None:
    document = {"to": ["a@b.io", 4111111111111111], "amount": 12.5, "card": None}
    assert redact_personal(document) == {
        "to": ["[REDACTED]", 4111111111111111],
        "amount": 12.5,
        "card": None,
    }
    assert document["to"] == ["a@b.io", 4111111111111111]


def _luhn_completed(body: str) -> str:
    for last in "0123456789":
        if is_card_number(body + last):
            return body + last
    raise AssertionError("one check digit always completes a number")


@given(
    prefix=st.text(alphabet=st.characters(blacklist_categories=["Nd"]), max_size=20),
    body=st.from_regex(r"[2-6][0-9]{11,17}", fullmatch=True),
    suffix=st.text(max_size=20).map(lambda t: " " + t),
)
def test_any_luhn_valid_number_standing_alone_is_redacted(
    prefix: str, body: str, suffix: str
) -> None:
    card = _luhn_completed(body)
    text = f"{prefix} {card}{suffix}"
    assert card not in redact_personal_text(text)


@given(st.text(max_size=200))
def test_redaction_is_idempotent(text: str) -> None:
    once = redact_personal_text(text)
    assert redact_personal_text(once) == once
