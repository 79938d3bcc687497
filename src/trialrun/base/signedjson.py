"""JSON whose bytes a hash or a signature vouches for: one reading only, or refused.

A digest vouches for bytes, but a program acts on its parse of them. Python's parser, like
JavaScript's, keeps the last of two equal keys in an object: ``{"ok": false, "ok": true}`` is
read as ``true`` here and as ``false`` by a reader that keeps the first, under one valid digest.
No writer of trialrun's emits a key twice, so a file that holds one was made by hand: it is
refused (``DuplicateKeyError``, a ``ValueError`` naming the key), with a byte-order mark, which
some readers skip and others refuse. Numbers are left as ``json.loads`` reads them; the receipt
verifier refuses NaN and infinity itself, as canonical JSON cannot hash them.
"""

from __future__ import annotations

import json
from typing import Any, Final

__all__ = ["UNIQUE_KEYS_JSON", "DuplicateKeyError", "loads_unique", "unique_keys"]


class DuplicateKeyError(ValueError):
    """An object of the JSON holds one key twice; ``key`` is that key."""

    def __init__(self, key: str) -> None:
        shown = json.dumps(key, ensure_ascii=True)
        if len(shown) > 80:
            shown = shown[:77] + "..."
        super().__init__(f"duplicate key {shown} in one object")
        self.key = key


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` that builds the object, refusing a key seen twice in it."""
    built = dict(pairs)
    if len(built) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKeyError(key)
            seen.add(key)
    return built


UNIQUE_KEYS_JSON: Final = json.JSONDecoder(object_pairs_hook=unique_keys)
"""``json.loads``'s decoder refusing a key twice in an object, built once."""


def loads_unique(text: str) -> Any:
    """``json.loads(text)``, refusing a key twice in an object (and a byte-order mark, as
    ``json.loads`` does: a reader that opens the file as ``utf-8-sig`` would skip it)."""
    if text.startswith("\ufeff"):
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    return UNIQUE_KEYS_JSON.decode(text)
