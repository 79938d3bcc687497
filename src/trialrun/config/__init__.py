"""Suite and case files: loading, validation with file:line errors, and their models.

``load_suite``, ``Suite`` and ``Case`` are imported on first use, so that importing
``trialrun.config.models`` (as the checks do) does not pull in the loader and, through it, the
assertion registry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trialrun.config.loader import Case, Suite, load_suite

__all__ = ["Case", "Suite", "load_suite"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from trialrun.config import loader

        return getattr(loader, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
