"""Did-you-mean suggestions for names a user typed (keys, assertion types, case ids, tools)."""

from __future__ import annotations

from collections.abc import Iterable


def closest(word: str, choices: Iterable[str]) -> str | None:
    """The choice most similar to ``word``, or None when nothing is close enough to help."""
    # A case-only difference ("Mode" for "mode") is the likeliest typo, so it wins outright.
    candidates = [c for c in choices if isinstance(c, str) and c != word]
    folded = word.casefold()
    for choice in candidates:
        if choice.casefold() == folded:
            return choice
    import difflib  # only for a name that is wrong: loading a good suite never needs it

    matches = difflib.get_close_matches(word, candidates, n=1, cutoff=0.6)
    return matches[0] if matches else None


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """``" (did you mean 'x'?)"`` for the closest choice, or ``""`` when there is none."""
    match = closest(word, choices)
    return f" (did you mean '{match}'?)" if match is not None else ""
