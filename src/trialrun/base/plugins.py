"""Plugins found through entry-point groups, kept by one ``Registry`` for every kind of extension.

trialrun has three kinds of plugin: assertion types (``trialrun.assertions``,
``base.assertion_api``), incident importers (``trialrun.incident_importers``,
``incident.importers.api``) and model-gateway providers (``trialrun.gateway_providers``,
``gateway.providers``). Their built-ins are declared in the same groups in pyproject.toml,
exactly as a third party declares its own, and are also named in a table of their registry so
that they load without listing entry points: listing reads the metadata of every installed
distribution, which a run that only uses built-ins should not pay for. A built-in name is
therefore reserved: an installed entry point of the same name is never used.

Loading is the same for all: one candidate per name (the same target seen twice is one), the
target imported only when first needed, a class instantiated, its shape checked, its ``name``
held equal to the entry point's, and every failure of the plugin's own code (``sys.exit()``
included) turned into the registry's error, which names the entry point and its group and
reads as one ``error:`` line, never a traceback.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Generic, Protocol, TypeVar

from trialrun.base.foreign import FOREIGN_FAILURES, failure_text
from trialrun.errors import ConfigError

__all__ = [
    "BuiltinEntryPoint",
    "EntryPointLike",
    "Registry",
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


_Plugin = TypeVar("_Plugin")


class Registry(Generic[_Plugin]):
    """The plugins of one kind by name: registered in code, built in, then installed.

    ``require(candidate, where)`` returns the candidate as a plugin of this kind or raises
    ``error`` saying what was expected; ``where`` names the entry point (or the call) it came
    from. Names keep their order of precedence: built-ins in table order, installed plugins by
    name, then those registered in code under a name of their own.
    """

    def __init__(
        self,
        kind: str,
        group: str,
        error: type[ConfigError],
        require: Callable[[object, str], _Plugin],
        *,
        builtins: Mapping[str, str] | None = None,
        discover: Callable[[], Iterable[EntryPointLike]] | None = None,
    ) -> None:
        self.kind = kind
        self.group = group
        self._error = error
        self._require = require
        self._builtins: Mapping[str, str] = builtins or {}
        self._discover = discover or (lambda: installed_entry_points(group))
        self._lock = threading.RLock()
        self._installed: dict[str, list[EntryPointLike]] | None = None
        self._registered: dict[str, _Plugin] = {}
        self._loaded: dict[str, tuple[_Plugin, str]] = {}

    def register(self, plugin: _Plugin, *, replace: bool = False) -> None:
        """Add ``plugin`` under its own name; a name already taken is refused unless ``replace``."""
        name = getattr(plugin, "name", None)
        self._require(plugin, f"register({plugin!r})")
        assert isinstance(name, str)  # require() has checked the name
        with self._lock:
            taken = name in self._registered or name in self._builtins
            if not replace and (taken or name in self._installed_map()):
                raise ValueError(
                    f"{self.kind} '{name}' is already registered; pass replace=True to override it"
                )
            self._registered[name] = plugin
            self._loaded.pop(name, None)

    def get(self, name: str) -> _Plugin | None:
        """The plugin called ``name``, or None if nothing provides it (``error`` if it fails to
        load)."""
        found = self.get_with_origin(name)
        return None if found is None else found[0]

    def get_with_origin(self, name: str) -> tuple[_Plugin, str] | None:
        """The plugin called ``name`` and where it came from, for messages about its failures."""
        with self._lock:
            if name in self._registered:
                return self._registered[name], f"the {self.kind} registered as '{name}'"
            if name not in self._loaded:
                candidates = self._candidates(name)
                if not candidates:
                    return None
                self._loaded[name] = self._load(name, candidates)
            return self._loaded[name]

    def names(self) -> list[str]:
        """Every name, in order of precedence (installed plugins are listed, not imported)."""
        return list(self.in_order())

    def in_order(self) -> Iterator[str]:
        """The names one at a time: entry points are listed only once the built-ins are passed."""
        yield from self._builtins
        with self._lock:
            installed = sorted(n for n in self._installed_map() if n not in self._builtins)
            registered = [n for n in self._registered if n not in self._builtins]
        yield from installed
        yield from (n for n in registered if n not in installed)

    def _candidates(self, name: str) -> Sequence[EntryPointLike]:
        builtin = self._builtins.get(name)
        if builtin is not None:
            return [BuiltinEntryPoint(name, builtin)]
        return self._installed_map().get(name, [])

    def _installed_map(self) -> dict[str, list[EntryPointLike]]:
        if self._installed is None:
            self._installed = distinct_by_name(self._discover())
        return self._installed

    def _load(self, name: str, candidates: Sequence[EntryPointLike]) -> tuple[_Plugin, str]:
        loaded = load_plugin(self.kind, self.group, candidates, self._error)
        where = entry_point_text(candidates[0], self.group)
        plugin = self._require(loaded, where)
        own_name = getattr(plugin, "name", None)
        if own_name != name:
            article = "an" if self.kind[0] in "aeiou" else "a"
            raise self._error(
                f"{where} provides {article} {self.kind} named {own_name!r}; the entry point "
                f"name and the {self.kind}'s name must match"
            )
        return plugin, where
