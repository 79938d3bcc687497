"""Counts in words: ``1 error``, ``2 errors``, ``0 cases`` (one rule for every printed count)."""

from __future__ import annotations

__all__ = ["counted"]


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``count`` followed by ``noun``, in the plural unless ``count`` is exactly one.

    ``plural`` is for nouns that do not take a plain ``s`` (``analysis`` -> ``analyses``).
    """
    word = noun if count == 1 else (plural if plural is not None else f"{noun}s")
    return f"{count} {word}"
