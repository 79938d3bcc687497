"""Counts in words: ``1 error``, ``2 errors``, ``0 cases`` (one rule for every printed count)."""

from __future__ import annotations

__all__ = ["counted", "inflected"]


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``count`` followed by ``noun``, in the plural unless ``count`` is exactly one.

    ``plural`` is for nouns that do not take a plain ``s`` (``analysis`` -> ``analyses``).
    """
    return f"{count} {inflected(count, noun, plural)}"


def inflected(count: int, noun: str, plural: str | None = None) -> str:
    """``noun`` or its plural, as ``count`` asks, without the count: ``missing field: a``,
    ``missing fields: a, b``; a verb too (``inflected(n, "has", "have")``)."""
    if count == 1:
        return noun
    return plural if plural is not None else f"{noun}s"
