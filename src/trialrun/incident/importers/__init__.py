"""Read a production trace export into a redacted ``Incident``, whatever its format.

``import_export`` detects the format from the content (never the file name), so a renamed
export still imports; the importers, built-in or installed by another package, are found
through the ``trialrun.incident_importers`` entry points (``importers.api``). The file is a
JSON document or JSON lines. Redaction happens here, before any caller can write anything, and
whoever read the export: ``trialrun.base.redact`` for secrets, ``trialrun.incident.personal``
for payment card numbers and e-mail addresses, then each ``redact_paths`` entry
(``calls.*.args.card_number``, ``input.customer.email``; ``*`` matches every list item or object
member, a number an item, as ``trialrun.base.jsonpath`` walks every dotted path) replaced by
``[REDACTED]``. A ``redact_paths`` entry that names nothing in the incident is an error with the
closest path that exists: a typo must not leave the field it meant in the shared file.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from trialrun.base.fsutil import read_problem
from trialrun.base.jsonpath import places
from trialrun.base.linesplit import jsonl_lines
from trialrun.base.nesting import unreadable_json
from trialrun.base.quoting import excerpt
from trialrun.base.redact import REDACTED, redact
from trialrun.base.suggest import did_you_mean
from trialrun.config.paths import display_path
from trialrun.errors import ConfigError
from trialrun.incident.importers.api import BUILTIN_IMPORTERS, default_registry
from trialrun.incident.model import Incident
from trialrun.incident.personal import redact_personal

__all__ = ["apply_redact_paths", "import_export", "read_records"]


def import_export(path: str | Path, *, redact_paths: Iterable[str] = ()) -> Incident:
    """The normalized, redacted incident in the export at ``path``; ``ConfigError`` if unusable."""
    shown = display_path(path)
    given = list(redact_paths)
    patterns = [_parse_redact_path(p) for p in given]
    records = read_records(path)
    registry = default_registry()
    incident = registry.recognise(records, shown)
    if incident is None:
        plugins = [name for name in registry.names() if name not in BUILTIN_IMPORTERS]
        also = f", or a format of an installed importer ({', '.join(plugins)})" if plugins else ""
        raise ConfigError(
            "unrecognized export format: expected trialrun/RunLedger run.jsonl, OTLP/JSON "
            "(resourceSpans), an OpenAI Agents SDK span export, LangSmith runs or a Langfuse "
            f"trace/observations export{also}",
            file=shown,
        )
    # Only the name: the directory the export sat in is not part of what the user shares.
    incident.source_file = Path(path).name
    document = redact_personal(redact(incident.to_json()))
    unmatched = [
        wanted
        for wanted, segments in zip(given, patterns, strict=True)
        if not places(document, segments)
    ]
    if unmatched:
        raise ConfigError(_matches_nothing(unmatched[0], document), file=shown)
    return Incident.from_json(apply_redact_paths(document, patterns))


_PATHS_MAX = 10_000
"""Paths gathered for a did-you-mean: enough for any real incident, bounded for a huge one."""


def _matches_nothing(path: str, document: Any) -> str:
    existing = sorted(_existing_paths(document))
    hint = did_you_mean(path, existing)
    if not hint:
        tops = ", ".join(sorted(document)) if isinstance(document, dict) else ""
        hint = f" (the incident's top-level fields: {tops})" if tops else ""
    return (
        f"--redact-path {excerpt(path)!r} matches nothing in the incident, so it would redact "
        f"nothing{hint}"
    )


def _existing_paths(document: Any) -> set[str]:
    """Every dotted path in ``document`` as ``--redact-path`` takes them (list items as ``*``)."""
    found: set[str] = set()
    pending: list[tuple[str, Any]] = [("", document)]
    while pending and len(found) < _PATHS_MAX:
        prefix, node = pending.pop()
        if isinstance(node, dict):
            children = [(str(key), value) for key, value in node.items()]
        elif isinstance(node, list):
            children = [("*", item) for item in node]
        else:
            continue
        for name, child in children:
            path = f"{prefix}.{name}" if prefix else name
            found.add(path)
            pending.append((path, child))
    return found


def read_records(path: str | Path) -> list[Any]:
    """One JSON document as ``[document]``, or JSON lines as one record per non-blank line."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        shown = display_path(path)
        raise ConfigError(f"cannot read export: {read_problem(exc)}", file=shown) from None
    try:
        return [json.loads(text)]
    except (ValueError, RecursionError):
        pass
    records: list[Any] = []
    for number, line in enumerate(jsonl_lines(text), start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"expected a JSON document or JSON lines, found invalid JSON ({exc.msg}, "
                f"column {exc.colno})",
                file=display_path(path),
                line=number,
            ) from exc
        except (ValueError, RecursionError) as exc:
            raise ConfigError(
                "expected a JSON document or JSON lines, found JSON that cannot be read "
                f"({unreadable_json(exc)})",
                file=display_path(path),
                line=number,
            ) from None
    if not records:
        raise ConfigError("export is empty", file=display_path(path))
    return records


def apply_redact_paths(document: Any, paths: Iterable[str | list[str]]) -> Any:
    """A copy of ``document`` with every value at each dotted path set to ``[REDACTED]``.

    A path that matches nothing is not an error: a field is often present in some calls only.
    Null values stay null, as in ``redact``: they show that nothing was there.
    """
    result = json.loads(json.dumps(document))
    for path in paths:
        segments = _parse_redact_path(path) if isinstance(path, str) else path
        for container, key in places(result, segments):
            if container[key] is not None:
                container[key] = REDACTED
    return result


def _parse_redact_path(path: str) -> list[str]:
    segments = path.split(".")
    if not path or any(not s for s in segments):
        raise ConfigError(
            f"--redact-path {path!r}: expected dotted names such as calls.*.args.card_number "
            "(no empty segment)"
        )
    return segments
