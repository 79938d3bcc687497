"""The ``tool_module`` contract: each tool is called as ``tool(args)``, one positional dict.

RunLedger calls tools this way, so suites written for it work unchanged. A tool written in the
keyword style of most agent frameworks (``def lookup_order(order_id)``) gets the whole dict as
its first parameter and fails far from the cause (``unhashable type: 'dict'``). Two checks say
the fix instead: a function that cannot take one positional argument at all is refused when the
module loads, and a tool that raises while one of its parameters is named like a key of the
call's arguments has the fix appended to its error.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["call_problem", "keyword_hint", "wrapper_advice"]


def _signature(tool: Callable[..., Any]) -> inspect.Signature | None:
    try:
        return inspect.signature(tool)
    except (TypeError, ValueError):  # a builtin without one: nothing to check against
        return None


def call_problem(tool: Callable[..., Any]) -> str | None:
    """Why ``tool(args)`` cannot bind, in Python's words; None when it can (or cannot be told)."""
    signature = _signature(tool)
    if signature is None:
        return None
    try:
        signature.bind({})
    except TypeError as exc:
        return str(exc)
    return None


def wrapper_advice(name: str) -> str:
    """How to write the tool, or wrap a keyword-style function, for ``TOOLS``."""
    return (
        f"trialrun calls each tool as {name}(args), args being one dict of the call's arguments: "
        f"write def {name}(args) and read args['...'], or wrap a keyword-style function in TOOLS: "
        f"'{name}': lambda args: {name}(**args)"
    )


def keyword_hint(name: str, tool: Callable[..., Any], args: Mapping[str, Any]) -> str | None:
    """The fix for a tool that raised, when its parameters look like the call's keywords."""
    signature = _signature(tool)
    if signature is None:
        return None
    named = [
        parameter.name
        for parameter in signature.parameters.values()
        if parameter.kind is not inspect.Parameter.VAR_KEYWORD and parameter.name in args
    ]
    if not named:
        return None
    return f"its parameter '{named[0]}' is an argument's name; {wrapper_advice(name)}"
