"""Module-level ``__getattr__`` that imports a package's public names on first use.

``trialrun`` and ``trialrun.receipt`` keep their heavy dependencies out of ``import`` this way:
each declares a table of name -> defining module and lets this helper load a name when asked.
"""

from __future__ import annotations

import importlib

# Not typing.TYPE_CHECKING: the CLI's start-up would import typing only for this flag, and
# mypy takes any name TYPE_CHECKING as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, MutableMapping
    from typing import Any


def lazy_getattr(
    namespace: MutableMapping[str, Any], exports: Mapping[str, str]
) -> Callable[[str], Any]:
    """A ``__getattr__`` for the module whose ``globals()`` is ``namespace``.

    A name of ``exports`` is imported from its module and stored in ``namespace``, so the next
    lookup is a plain attribute and ``__getattr__`` runs once per name.
    """
    package = namespace["__name__"]

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    return __getattr__
