"""Whether a Python value from a user's code can go where JSON goes (the agent, the artifacts).

Values an agent or a file sends are JSON already, parsed with limits (``nesting``). A value a
user's Python returns (a live tool's result, an assertion plugin's details) can be anything:
a datetime, NaN, a set, a dict that contains itself, an integer of 5,000 digits. Each of those
ended the whole run in a traceback somewhere after (encoding run.jsonl, walking the trace), so
it is refused where it comes in, with where it is.
"""

from __future__ import annotations

import math
import sys
from typing import Any

from trialrun.base.nesting import MAX_NESTING
from trialrun.base.quoting import shortened

__all__ = ["json_problem"]


def json_problem(value: Any, path: str = "$", depth: int = 1) -> str | None:
    """Why ``value`` cannot go where JSON goes (with where in it), or None if it can.

    Beyond what JSON cannot hold, the same limits as for an agent's data: objects and arrays
    nested at most ``MAX_NESTING`` deep (a value that contains itself never ends), and integers
    Python can write out (a tool returning ``10**5000`` stopped the whole run at run.jsonl).
    """
    if value is None or isinstance(value, str | bool):
        return None
    if isinstance(value, int):
        return _int_problem(value, path)
    if isinstance(value, float):
        return (
            None if math.isfinite(value) else f"{value} at {_at(path)} (JSON has no NaN/Infinity)"
        )
    if isinstance(value, list | tuple | dict) and depth > MAX_NESTING:
        return (
            f"objects and arrays nested more than {MAX_NESTING} levels deep at {_at(path)} "
            "(or a value that contains itself)"
        )
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            problem = json_problem(item, f"{path}[{index}]", depth + 1)
            if problem is not None:
                return problem
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                key_text = shortened(repr(key), 200)
                return f"{type(key).__name__} key {key_text} at {_at(path)} (JSON keys are strings)"
            problem = json_problem(item, f"{path}.{key}", depth + 1)
            if problem is not None:
                return problem
        return None
    return f"{type(value).__name__} at {_at(path)}"


def _at(path: str) -> str:
    """Where in the value, as a message quotes it (keys are the user's, of any length)."""
    return shortened(path, 200)


def _int_problem(value: int, path: str) -> str | None:
    if value.bit_length() < 2_000:  # ~600 digits: under the least limit Python allows (640)
        return None
    try:
        str(value)
    except ValueError:
        limit = sys.get_int_max_str_digits()
        return f"an integer of more than {limit} digits at {_at(path)} (Python cannot write it out)"
    return None
