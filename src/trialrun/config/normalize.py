"""Normalization: make volatile parts of outputs and tool results comparable across runs.

``normalize(value, rules)`` returns a new value (the input is never modified) after, in order:

1. ``strip_keys``: drop every mapping key with one of these names, at any depth;
2. ``strip_paths``: drop what a dot path names (``meta.seed``, ``items.*.rand``; ``*`` matches
   any key or index, a number matches a list index: ``trialrun.base.jsonpath``);
3. ``replace_paths``: set the value at a dot path, only where that path exists;
4. ``replace_text``: Python regex substitution on every string value (not on keys), with flags
   from ``i``, ``m``, ``s``.

These are RunLedger's semantics, except where RunLedger is not idempotent. Normalization runs
on replayed cassette data that was already normalized when it was recorded, so
``normalize(normalize(x)) == normalize(x)`` must hold for every value and every rule set:

* A strip path that ends at a list index (``items.0``) sets that element to ``null`` instead of
  removing it. Removing it would shift the list, and a second pass would remove the next one.
  (``items.*`` still empties the list, which is stable.)
* ``replace_text`` skips a match that lies entirely inside an occurrence of the rule's own
  replacement text (when the replacement is plain text, without backslashes): with
  ``A`` -> ``<a>`` (flag ``i``), ``<a>`` stays ``<a>`` instead of becoming ``<<a>>``.
* The whole chain of ``replace_text`` rules is then applied to each string repeatedly until a
  pass changes nothing, which makes the result a fixed point, so a later pass cannot change it.
  If no fixed point is reached within ``MAX_TEXT_PASSES`` passes (or the text keeps growing),
  the string is left exactly as it was given: any partly rewritten state would be rewritten
  again by the next pass, while the original string stays the original on every pass.

Idempotency then holds by construction: the structural steps are stable once applied, the
values they insert are the same on every pass, and every string ends at a fixed point of the
text rules or is returned unchanged.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from trialrun.base.jsonpath import places, split_path
from trialrun.errors import ConfigError

if TYPE_CHECKING:
    # Only for annotations: the config records are loaded by whoever built the rules.
    from trialrun.config.models import Normalization

MAX_TEXT_PASSES = 10
REGEX_FLAGS = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL}


def normalize(value: Any, rules: Normalization) -> Any:
    """A normalized copy of ``value``; ``value`` itself when there are no rules."""
    if rules.is_empty:
        return value
    # Both build a fresh tree, which the path steps below may then edit in place.
    if rules.strip_keys:
        result = _strip_keys(value, frozenset(rules.strip_keys))
    else:
        result = _copy_json(value)
    for raw_path in rules.strip_paths:
        path = split_path(raw_path)
        if path:
            _strip_path(result, path)
    for raw_path, replacement in rules.replace_paths.items():
        path = split_path(raw_path)
        if path:
            _replace_path(result, path, replacement)
    if rules.replace_text:
        key = tuple((r.pattern, r.flags, r.replacement) for r in rules.replace_text)
        result = _replace_text(result, compile_text_rules(key))
    return result


# -- structure ----------------------------------------------------------------------------------


def _copy_json(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _copy_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copy_json(item) for item in value]
    return value


def _strip_keys(value: Any, keys: frozenset[str]) -> Any:
    if isinstance(value, dict):
        return {k: _strip_keys(v, keys) for k, v in value.items() if k not in keys}
    if isinstance(value, list):
        return [_strip_keys(item, keys) for item in value]
    return value


def _strip_path(node: Any, path: Sequence[str]) -> None:
    for container, key in places(node, path):
        if isinstance(container, dict):
            del container[key]
        elif path[-1] == "*":
            container.clear()  # every item named: the list is emptied, which stays stable
        else:
            container[key] = None  # not removed: see the module docstring


def _replace_path(node: Any, path: Sequence[str], replacement: Any) -> None:
    for container, key in places(node, path):
        container[key] = _copy_json(replacement)  # a copy per place: no shared aliases


# -- text ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TextRule:
    """One compiled ``replace_text`` rule."""

    pattern: re.Pattern[str]
    replacement: str
    literal: bool
    """The replacement is plain text (no backslash escapes or group references)."""

    def apply(self, text: str) -> str:
        protected = self._occurrences(text)
        size = len(self.replacement)
        pieces: list[str] = []
        last = 0
        for match in self.pattern.finditer(text):
            start, end = match.span()
            if protected:
                # The occurrence starting last at or before `start` reaches furthest right.
                slot = bisect.bisect_right(protected, start) - 1
                if slot >= 0 and end <= protected[slot] + size:
                    continue
            pieces.append(text[last:start])
            pieces.append(self.replacement if self.literal else self._expand(match))
            last = end
        if not pieces:
            return text
        pieces.append(text[last:])
        return "".join(pieces)

    def _occurrences(self, text: str) -> list[int]:
        """Start offsets of every (overlapping) occurrence of a plain replacement text."""
        if not self.literal or not self.replacement:
            return []
        starts: list[int] = []
        found = text.find(self.replacement)
        while found >= 0:
            starts.append(found)
            found = text.find(self.replacement, found + 1)
        return starts

    def _expand(self, match: re.Match[str]) -> str:
        try:
            return match.expand(self.replacement)
        except (re.error, IndexError) as exc:
            raise ConfigError(
                f"replace_text replacement {self.replacement!r} for pattern "
                f"{self.pattern.pattern!r} is invalid: {exc}",
                key="replacement",
            ) from None


@functools.lru_cache(maxsize=256)
def compile_text_rules(rules: tuple[tuple[str, str, str], ...]) -> tuple[TextRule, ...]:
    """Compile ``(pattern, flags, replacement)`` triples once; ConfigError if one is invalid."""
    return tuple(
        _compile_rule(pattern, flags, replacement) for pattern, flags, replacement in rules
    )


def _compile_rule(pattern: str, flags: str, replacement: str) -> TextRule:
    unknown = sorted(set(flags) - set(REGEX_FLAGS))
    if unknown:
        raise ConfigError(
            f"replace_text flags may only combine i, m and s; found {flags!r} for pattern "
            f"{pattern!r}",
            key="flags",
        )
    bits = 0
    for flag in set(flags):
        bits |= REGEX_FLAGS[flag]
    try:
        compiled = re.compile(pattern, bits)
    except re.error as exc:
        raise ConfigError(
            f"replace_text pattern {pattern!r} is not a valid regular expression: {exc}",
            key="pattern",
        ) from None
    literal = "\\" not in replacement
    if not literal:
        _check_template(pattern, bits, replacement)
    return TextRule(compiled, replacement, literal=literal)


def _check_template(pattern: str, bits: int, replacement: str) -> None:
    """Refuse a bad group reference now rather than on the first match, mid-run."""
    try:
        # The empty alternative always matches and keeps the pattern's groups.
        probe = re.compile(f"(?:{pattern})|", bits).match("")
    except re.error:
        return  # e.g. inline global flags, which cannot be wrapped; checked on use instead
    if probe is None:
        return
    try:
        probe.expand(replacement)
    except (re.error, IndexError) as exc:
        raise ConfigError(
            f"replace_text replacement {replacement!r} for pattern {pattern!r} is invalid: {exc}",
            key="replacement",
        ) from None


def normalize_text(text: str, rules: Sequence[TextRule]) -> str:
    """Apply the rule chain until a pass changes nothing; see the module docstring."""
    current = text
    growth_limit = 16 * len(text) + 4096
    for _ in range(MAX_TEXT_PASSES):
        following = current
        for rule in rules:
            following = rule.apply(following)
        if following == current:
            return current
        if len(following) > growth_limit:
            break
        current = following
    return text


def _replace_text(value: Any, rules: Sequence[TextRule]) -> Any:
    if isinstance(value, str):
        return normalize_text(value, rules)
    if isinstance(value, dict):
        return {key: _replace_text(item, rules) for key, item in value.items()}
    if isinstance(value, list):
        return [_replace_text(item, rules) for item in value]
    return value
