"""JSON whose bytes a hash or a signature covers: read one way only, or refused.

A digest vouches for bytes, but a program acts on its parse of them. Python's parser keeps the
last of two equal keys in an object (JavaScript's too), reads ``NaN`` and ``Infinity`` (which
no other JSON reader does) and turns ``1e400`` into infinity. Each of those lets two readers, or
one reader and the person who checked the digest, see different data under one valid digest:
``{"ok": false, "ok": true}`` hashes as its bytes and reads as ``true``. Files that are hashed
or signed are therefore read with ``SIGNED_JSON`` (``loads_signed``), which refuses all of
them, and a byte-order mark as well, with a ``ValueError`` that names the problem.
"""

from __future__ import annotations

import json
from typing import Any, Final

from trialrun.base.jsonnumbers import finite_float, refuse_constant

__all__ = ["SIGNED_JSON", "DuplicateKeyError", "loads_signed", "unique_keys"]


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


SIGNED_JSON: Final = json.JSONDecoder(
    object_pairs_hook=unique_keys, parse_constant=refuse_constant, parse_float=finite_float
)
"""The decoder for hashed or signed JSON, built once: no duplicate key, NaN or infinity."""


def loads_signed(text: str) -> Any:
    """``text`` parsed by ``SIGNED_JSON``; a byte-order mark is refused like the rest.

    ``json.loads`` refuses a BOM in ``str`` input and ``read_text("utf-8")`` keeps one, yet a
    reader that opens the file with ``utf-8-sig`` would skip it: one file, two verdicts.
    """
    if text.startswith("\ufeff"):
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (a byte-order mark)", text, 0)
    return SIGNED_JSON.decode(text)
