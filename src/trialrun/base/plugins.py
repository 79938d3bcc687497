"""Plugins found through entry-point groups, loaded one way for every kind of extension.

trialrun has two kinds of plugin, assertion types (``trialrun.assertions``,
``base.assertion_api``) and incident importers (``trialrun.incident_importers``,
``incident.importers.api``). Their built-ins are declared in the same groups in pyproject.toml,
exactly as a third party declares its own, and are also named in a table of their registry so
that they load without listing entry points: listing reads the metadata of every installed
distribution, which a run that only uses built-ins should not pay for.

Loading is the same for both: one candidate per name (the same target seen twice is one), the
target imported only when first needed, a class instantiated, and every failure of the
plugin's own code (``sys.exit()`` included) turned into the registry's error, which names the
entry point and its group and reads as one ``error:`` line, never a traceback.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from trialrun.base.foreign import FOREIGN_FAILURES, failure_text
from trialrun.errors import ConfigError

__all__ = [
    "BuiltinEntryPoint",
    "EntryPointLike",
    "distinct_by_name",
    "entry_point_text",
    "installed_entry_points",
    "load_plugin",
]


class EntryPointLike(Protocol):
    """The part of ``importlib.metadata.EntryPoint`` a registry uses (a seam for tests)."""

    @property
    def name(self) -> str: ...

    @property
    def value(self) -> str: ...

    def load(self) -> Any: ...


class BuiltinEntryPoint:
    """A built-in's ``module:attribute``, loaded as its entry point would be, without metadata."""

    # A plain class: defining a dataclass costs start-up time on every import of this module.
    __slots__ = ("name", "value")

    def __init__(self, name: str, value: str) -> None:
        self.name = name
        self.value = value

    def load(self) -> Any:
        import importlib

        module, _, attribute = self.value.partition(":")
        return getattr(importlib.import_module(module), attribute)


def installed_entry_points(group: str) -> list[EntryPointLike]:
    """Every entry point of ``group`` in the installed distributions."""
    import importlib.metadata  # costs milliseconds at start-up; only needed on first lookup

    return list(importlib.metadata.entry_points(group=group))


def distinct_by_name(found: Iterable[EntryPointLike]) -> dict[str, list[EntryPointLike]]:
    """Entry points by name; the same target seen twice counts once.

    The same distribution can be visible twice (e.g. an editable install on two path entries):
    identical targets are one provider, not a conflict.
    """
    by_name: dict[str, list[EntryPointLike]] = {}
    for entry_point in found:
        same_name = by_name.setdefault(entry_point.name, [])
        if all(other.value != entry_point.value for other in same_name):
            same_name.append(entry_point)
    return by_name


def entry_point_text(entry_point: EntryPointLike, group: str) -> str:
    return f"entry point '{entry_point.name} = {entry_point.value}' (group {group})"


def load_plugin(
    kind: str,
    group: str,
    candidates: Sequence[EntryPointLike],
    error: type[ConfigError],
) -> Any:
    """The object the one candidate names (a class is instantiated), or ``error`` saying why not.

    ``kind`` says what is loaded in the messages: ``assertion type``, ``incident importer``.
    """
    name = candidates[0].name
    if len(candidates) > 1:
        targets = ", ".join(candidate.value for candidate in candidates)
        raise error(
            f"{kind} '{name}' is provided by {len(candidates)} entry points in group "
            f"{group}: {targets}; uninstall one of the packages"
        )
    where = entry_point_text(candidates[0], group)
    try:
        loaded = candidates[0].load()
    except FOREIGN_FAILURES as exc:  # any import-time failure of third-party code
        raise error(f"cannot load {kind} '{name}' from {where}: {failure_text(exc)}") from exc
    # A class is accepted as well as an instance, so a plugin can point at either.
    if isinstance(loaded, type):
        try:
            loaded = loaded()
        except FOREIGN_FAILURES as exc:
            raise error(
                f"cannot instantiate {kind} '{name}' from {where}: {failure_text(exc)}"
            ) from exc
    return loaded
