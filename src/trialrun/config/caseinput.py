"""A case's input is sent to the agent as JSON: where a YAML value stops being JSON data.

YAML gives dates, non-string keys and infinities that JSON has no word for; the loader reports
the first of them, at its line, before any agent starts.
"""

from __future__ import annotations

import math
from datetime import date
from typing import Any

from trialrun.base.jsonpath import dotted
from trialrun.config.messages import describe_value
from trialrun.config.yamlload import PathElement


def first_non_json(
    value: Any, at: tuple[PathElement, ...]
) -> tuple[tuple[PathElement, ...], str] | None:
    """Where the case input stops being JSON (the agent receives it as JSON), if anywhere."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return at, f"keys in '{dotted(at)}' must be strings, found {describe_value(key)}"
            found = first_non_json(item, (*at, key))
            if found is not None:
                return found
        return None
    if isinstance(value, list):
        for index, item in enumerate(value):
            found = first_non_json(item, (*at, index))
            if found is not None:
                return found
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return at, f"'{dotted(at)}' is {value}, which JSON cannot carry"
    if value is None or isinstance(value, str | int | float):
        return None
    hint = "; quote it to keep it as text" if isinstance(value, date) else ""
    return at, f"'{dotted(at)}' must be JSON data, found {describe_value(value)}{hint}"
