"""JSON Schemas of suite and case files, generated from the records in ``config.models``.

The files ship in ``trialrun/schemas/`` so editors can complete and check suites; a test keeps
them equal to what the records export. Regenerate with ``python -m trialrun.config.schema_export``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trialrun.base.fsutil import atomic_write_text
from trialrun.config.models import CaseConfig, SuiteConfig
from trialrun.config.spec import Record, record_schema

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
SCHEMA_DIR = Path(__file__).resolve().parent.parent / "schemas"
_RECORDS: dict[str, tuple[type[Record], str]] = {
    "suite.schema.json": (SuiteConfig, "trialrun suite file (suite.yaml)"),
    "case.schema.json": (CaseConfig, "trialrun case file (cases/*.yaml)"),
}


def export_schemas() -> dict[str, str]:
    """File name -> JSON text (sorted keys, two-space indent, final newline) for each record."""
    exported: dict[str, str] = {}
    for file_name, (record, title) in _RECORDS.items():
        defs: dict[str, Any] = {}
        schema: dict[str, Any] = {
            "$schema": SCHEMA_DIALECT,
            **record_schema(record, defs),
            "title": title,
        }
        if defs:
            schema["$defs"] = defs
        exported[file_name] = json.dumps(schema, indent=2, sort_keys=True) + "\n"
    return exported


def write_schemas(directory: Path = SCHEMA_DIR) -> list[Path]:
    """Write every exported schema into ``directory``; returns the files written."""
    directory.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for file_name, text in export_schemas().items():
        target = directory / file_name
        atomic_write_text(target, text)
        written.append(target)
    return written


if __name__ == "__main__":
    for path in write_schemas():
        print(path)
