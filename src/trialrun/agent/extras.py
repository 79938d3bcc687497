"""The optional framework extras the adapters need, named when one is missing."""

from __future__ import annotations


def missing_framework(package: str, extra: str, exc: ImportError) -> ImportError:
    """The ImportError an adapter raises when its framework is not installed: names the extra."""
    return ImportError(
        f"the trialrun adapter for {extra} needs the {package!r} package, which is not "
        f"importable ({exc}); install it with: pip install 'trialrun[{extra}]'"
    )
