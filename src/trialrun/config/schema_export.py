"""JSON Schemas of suite and case files, generated from the pydantic models.

The files ship in ``trialrun/schemas/`` so editors can complete and check suites; a test keeps
them equal to what the models export. Regenerate with ``python -m trialrun.config.schema_export``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, BaseModel

from trialrun.config.models import Budgets, CaseConfig, Normalization, Regression, SuiteConfig

# Every model that can appear in a suite or case file (aliases are added per model below).
_ALL_MODELS: tuple[type[BaseModel], ...] = (
    SuiteConfig,
    CaseConfig,
    Budgets,
    Regression,
    Normalization,
)

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
SCHEMA_DIR = Path(__file__).resolve().parent.parent / "schemas"
_MODELS: dict[str, tuple[type[BaseModel], str]] = {
    "suite.schema.json": (SuiteConfig, "trialrun suite file (suite.yaml)"),
    "case.schema.json": (CaseConfig, "trialrun case file (cases/*.yaml)"),
}


def export_schemas() -> dict[str, str]:
    """File name -> JSON text (sorted keys, two-space indent, final newline) for each model."""
    exported: dict[str, str] = {}
    for file_name, (model, title) in _MODELS.items():
        schema: dict[str, Any] = {
            "$schema": SCHEMA_DIALECT,
            **model.model_json_schema(mode="validation"),
            "title": title,
        }
        _add_alias_properties(schema, model)
        for nested in _ALL_MODELS:
            definition = schema.get("$defs", {}).get(nested.__name__)
            if definition is not None:
                _add_alias_properties(definition, nested)
        exported[file_name] = json.dumps(schema, indent=2, sort_keys=True) + "\n"
    return exported


def _add_alias_properties(schema: dict[str, Any], model: type[BaseModel]) -> None:
    """pydantic exports only a field's name; RunLedger's spellings must validate in editors too.

    Without this, ``additionalProperties: false`` would flag ``min_success_rate`` in a suite that
    trialrun loads fine.
    """
    properties: dict[str, Any] = schema.get("properties", {})
    for name, field in model.model_fields.items():
        alias = field.validation_alias
        if not isinstance(alias, AliasChoices) or name not in properties:
            continue
        for choice in alias.choices:
            if isinstance(choice, str) and choice != name:
                properties[choice] = {
                    **properties[name],
                    "description": f"Alias of '{name}' (RunLedger spelling).",
                    "title": choice,
                }


def write_schemas(directory: Path = SCHEMA_DIR) -> list[Path]:
    """Write every exported schema into ``directory``; returns the files written."""
    directory.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for file_name, text in export_schemas().items():
        target = directory / file_name
        target.write_text(text, encoding="utf-8", newline="\n")
        written.append(target)
    return written


if __name__ == "__main__":
    for path in write_schemas():
        print(path)
