"""What the running interpreter's json says of bad text: its words and places differ by version
(Python 3.13 names a trailing comma's own line, 3.11 the line after it)."""

from __future__ import annotations

import json


def json_error(text: str) -> json.JSONDecodeError:
    """What this interpreter's json says of ``text``."""
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        return exc
    raise AssertionError(f"valid JSON: {text!r}")
