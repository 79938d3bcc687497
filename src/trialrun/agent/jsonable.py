"""Turning what a tool returned (or was called with) into JSON data the runner can record.

Tools return pydantic models, dataclasses, enums, dates, tuples. The channel carries JSON, and
the agent is then handed back exactly that JSON in record and in replay alike, so the conversion
must be deterministic. pydantic's ``to_jsonable_python`` does it when pydantic is importable (it
is a dependency of trialrun, but an agent may vendor the SDK); otherwise a conservative walk keeps
JSON types, turns containers into lists and objects, and anything else into ``str()``.

NaN and infinity are left alone here: the channel refuses them when encoding, and the session
reports that as the tool's error, as the runner does for a live tool.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from typing import Any

_MAX_DEPTH = 200


class NotJsonError(ValueError):
    """A value that cannot be turned into JSON data (say, bytes that are not UTF-8)."""


def to_json_data(value: Any) -> Any:
    """``value`` as JSON data: dicts with string keys, lists, str, int, float, bool, None."""
    try:
        from pydantic_core import to_jsonable_python
    except ImportError:
        return plain_json_data(value)
    try:
        return to_jsonable_python(value, fallback=str)
    except Exception as exc:  # pydantic_core raises several kinds; all mean "not convertible"
        raise NotJsonError(f"{type(exc).__name__}: {exc}") from None


def plain_json_data(value: Any) -> Any:
    """The conversion used without pydantic: JSON types kept, the rest walked or ``str()``."""
    return _fallback(value, 0)


def _fallback(value: Any, depth: int) -> Any:
    if depth > _MAX_DEPTH:
        raise NotJsonError("value is nested too deeply")
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, enum.Enum):
        return _fallback(value.value, depth + 1)
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise NotJsonError(f"bytes that are not UTF-8: {exc}") from None
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {_key(k): _fallback(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_fallback(v, depth + 1) for v in value]
    return str(value)


def _key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, enum.Enum):
        return str(key.value)
    return str(key)
