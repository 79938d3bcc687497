"""Personal data an incident import redacts by default: payment card numbers and e-mail addresses.

Production traces hold what customers typed and what tools returned about them; an incident is
shared (attached to a bug, committed as a regression case), so these two kinds of personal data
go before anything is written, whichever importer read the export and whether or not the user
named their fields with ``--redact-path``. Only text is scanned, and only the matching part of
it is replaced: ``"refund to dana@example.com"`` becomes ``"refund to [REDACTED]"``.

A card number is 13 to 19 digits, optionally grouped by single spaces or hyphens, starting with
2 to 6 (the issuer ranges of the card networks) and passing the Luhn check; the prefix and the
check keep order ids, phone numbers and epoch timestamps, which are mostly not Luhn-valid or
start with 1, out of it.
"""

from __future__ import annotations

import re
from typing import Any

from trialrun.base.redact import REDACTED

__all__ = ["is_card_number", "redact_personal", "redact_personal_text"]

_CARD = re.compile(r"(?<![\w.-])[2-6](?:[ -]?\d){12,18}(?![\w-])")
_EMAIL = re.compile(
    r"(?<![\w.%+-])[A-Za-z0-9][A-Za-z0-9._%+-]{0,63}@"
    r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?)*"
    r"\.[A-Za-z]{2,24}(?![\w-])"
)


def is_card_number(text: str) -> bool:
    """Whether ``text`` (digits, maybe grouped by spaces or hyphens) is a Luhn-valid card number."""
    digits = [int(char) for char in text if char.isascii() and char.isdigit()]
    if not 13 <= len(digits) <= 19 or len(digits) != len(text.replace(" ", "").replace("-", "")):
        return False
    total = 0
    for position, digit in enumerate(reversed(digits)):
        if position % 2:
            digit *= 2
            digit -= 9 if digit > 9 else 0
        total += digit
    return total % 10 == 0


def redact_personal_text(text: str) -> str:
    """``text`` with each e-mail address and Luhn-valid card number replaced by [REDACTED]."""
    if "@" in text:
        text = _EMAIL.sub(REDACTED, text)
    return _CARD.sub(_card_or_kept, text)


def redact_personal(value: Any) -> Any:
    """A copy of JSON ``value`` with ``redact_personal_text`` applied to every string in it."""
    if isinstance(value, str):
        return redact_personal_text(value)
    if isinstance(value, dict):
        return {key: redact_personal(item) for key, item in value.items()}
    if isinstance(value, list):
        return [redact_personal(item) for item in value]
    return value


def _card_or_kept(found: re.Match[str]) -> str:
    """The card number the match starts with, redacted; the match as it was if none does.

    The pattern takes digit groups greedily, so ``4111 1111 1111 1111 2 items`` matches one
    group too many: the number is looked for in the match cut at each separator, longest first.
    """
    text = found.group()
    cuts = [len(text)] + [i for i in range(len(text) - 1, 0, -1) if text[i] in " -"]
    for cut in cuts:
        if is_card_number(text[:cut]):
            return REDACTED + text[cut:]
    return text
