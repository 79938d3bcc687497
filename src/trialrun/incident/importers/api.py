"""The incident-importer contract and registry: how a trace export finds the code that reads it.

An importer is any object with a ``name`` (the format's name, written as ``source_format`` in
incident.json), ``detect(records)`` (do these records look like my format?) and
``to_incident(records, source_file)`` (the ``Incident`` they hold). ``records`` is what
``read_records`` made of the file: ``[document]`` for one JSON document, else one item per JSON
line. ``Importer`` builds one from two functions; ``RawCall`` and ``build_incident`` order,
number and check the calls, as every built-in does. The incident a plugin returns is redacted
afterwards like any other, so an importer never writes anything itself.

Importers are found through the entry-point group ``trialrun.incident_importers``, where
pyproject.toml declares the built-in ones too. The built-ins are tried first, in
``BUILTIN_IMPORTERS`` order (most specific first: a run.jsonl event also has a ``type``, like a
Langfuse observation), and loaded from that table without listing entry points; a built-in name
is reserved. The installed plugins are listed, and each loaded, only when no built-in recognised
the file, then tried in name order. A plugin that cannot be loaded, is not an importer, or
fails while reading is an ``IncidentImporterError`` naming its entry point: one ``error:`` line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, cast

from trialrun.base.foreign import FOREIGN_FAILURES, failure_text
from trialrun.base.plugins import EntryPointLike, Registry, installed_entry_points
from trialrun.errors import ConfigError
from trialrun.incident.importers._common import RawCall, build_incident
from trialrun.incident.model import Incident

__all__ = [
    "BUILTIN_IMPORTERS",
    "ENTRY_POINT_GROUP",
    "Importer",
    "ImporterRegistry",
    "IncidentImporter",
    "IncidentImporterError",
    "RawCall",
    "build_incident",
    "default_registry",
    "discover_entry_points",
]

ENTRY_POINT_GROUP = "trialrun.incident_importers"

BUILTIN_IMPORTERS: Mapping[str, str] = {
    "otlp": "trialrun.incident.importers.otlp:IMPORTER",
    "openai-agents": "trialrun.incident.importers.openai_agents:IMPORTER",
    "langsmith": "trialrun.incident.importers.langsmith:IMPORTER",
    "run-jsonl": "trialrun.incident.importers.run_jsonl:IMPORTER",
    "langfuse": "trialrun.incident.importers.langfuse:IMPORTER",
}
"""The built-in importers in the order they are tried, exactly as pyproject.toml declares them
in ``trialrun.incident_importers`` (a test holds the two equal)."""


class IncidentImporter(Protocol):
    """One trace export format."""

    @property
    def name(self) -> str: ...

    def detect(self, records: list[Any]) -> bool: ...

    def to_incident(self, records: list[Any], source_file: str) -> Incident: ...


@dataclass(frozen=True)
class Importer:
    """An importer made of two functions, as each built-in module declares its ``IMPORTER``."""

    name: str
    detect: Callable[[list[Any]], bool]
    to_incident: Callable[[list[Any], str], Incident]


class IncidentImporterError(ConfigError):
    """An importer from an entry point cannot be loaded, is not one, or failed while reading."""


def discover_entry_points() -> list[EntryPointLike]:
    """Every entry point of the ``trialrun.incident_importers`` group that is installed."""
    return installed_entry_points(ENTRY_POINT_GROUP)


class ImporterRegistry(Registry[IncidentImporter]):
    """Importers in the order they are tried: built-ins, then installed plugins by name."""

    def __init__(
        self,
        discover: Callable[[], Iterable[EntryPointLike]] = discover_entry_points,
        builtins: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(
            "incident importer",
            ENTRY_POINT_GROUP,
            IncidentImporterError,
            _require_importer,
            builtins=builtins,
            discover=discover,
        )

    def recognise(self, records: list[Any], source_file: str) -> Incident | None:
        """The incident of the first importer that detects ``records``; None if none does."""
        for name in self.in_order():
            found = self.get_with_origin(name)
            if found is not None and _detects(*found, records):
                return _convert(*found, records, source_file)
        return None


def _require_importer(candidate: object, where: str) -> IncidentImporter:
    own_name = getattr(candidate, "name", None)
    if not isinstance(own_name, str) or not all(
        callable(getattr(candidate, method, None)) for method in ("detect", "to_incident")
    ):
        raise IncidentImporterError(
            f"{where} is not an incident importer: expected an object with a string 'name' and "
            f"detect(records) and to_incident(records, source_file) methods, found "
            f"{type(candidate).__name__}"
        )
    return cast(IncidentImporter, candidate)


def _detects(importer: IncidentImporter, where: str, records: list[Any]) -> bool:
    try:
        return bool(importer.detect(records))
    except FOREIGN_FAILURES as exc:
        raise IncidentImporterError(
            f"incident importer '{importer.name}' from {where} failed while "
            f"detecting the format: {failure_text(exc)}"
        ) from exc


def _convert(
    importer: IncidentImporter, where: str, records: list[Any], source_file: str
) -> Incident:
    try:
        incident = importer.to_incident(records, source_file)
    except ConfigError:
        raise  # the importer's own words about the export, at its file
    except FOREIGN_FAILURES as exc:
        raise IncidentImporterError(
            f"incident importer '{importer.name}' from {where} failed while "
            f"reading the export: {failure_text(exc)}",
            file=source_file,
        ) from exc
    if not isinstance(incident, Incident):
        raise IncidentImporterError(
            f"incident importer '{importer.name}' from {where} returned "
            f"{type(incident).__name__}, expected an Incident",
            file=source_file,
        )
    return incident


_DEFAULT_REGISTRY = ImporterRegistry(builtins=BUILTIN_IMPORTERS)


def default_registry() -> ImporterRegistry:
    """The process-wide registry ``import_export`` uses."""
    return _DEFAULT_REGISTRY
