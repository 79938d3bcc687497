"""The file-format pages name every key their formats accept, and the docs site lists every page.

The keys come from the code (the suite and case JSON Schemas that ship, the compare records, the
registered check kinds), so a key added without its line on the page fails here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from paths import PACKAGE_DIR, REPO_ROOT
from trialrun.compare.checkspec import CHECK_KINDS
from trialrun.compare.config import CaseConfig, SessionConfig, SubCaseConfig, TriggersConfig
from trialrun.config.spec import Nested

DOCS = REPO_ROOT / "docs"


def property_names(schema: Any) -> Iterator[str]:
    """Every key a JSON Schema names under ``properties``, at any depth (``$defs`` included)."""
    if isinstance(schema, dict):
        for name, value in schema.items():
            if name == "properties" and isinstance(value, dict):
                yield from value
            yield from property_names(value)
    elif isinstance(schema, list):
        for item in schema:
            yield from property_names(item)


def test_the_schema_walk_finds_nested_keys_and_only_keys() -> None:
    schema = {
        "properties": {"a": {"$ref": "#/$defs/B"}, "c": {"type": "string"}},
        "$defs": {"B": {"properties": {"d": {}}, "required": ["d"]}},
    }
    assert sorted(property_names(schema)) == ["a", "c", "d"]


def code_names(page: str) -> set[str]:
    return set(re.findall(r"`([a-z_][a-z0-9_]*)`", (DOCS / page).read_text(encoding="utf-8")))


@pytest.mark.parametrize("schema_file", ["suite.schema.json", "case.schema.json"])
def test_the_suite_format_page_names_every_key_of_the_schemas(schema_file: str) -> None:
    schema = json.loads((PACKAGE_DIR / "schemas" / schema_file).read_text(encoding="utf-8"))
    keys = set(property_names(schema))
    assert {"suite_name", "id"} & keys and len(keys) >= 15
    missing = sorted(keys - code_names("suite-format.md"))
    assert not missing, f"docs/suite-format.md never names {missing} ({schema_file})"


def test_the_compare_cases_page_names_every_check_kind_and_case_key() -> None:
    defs: dict[str, Any] = {}
    records = (CaseConfig, SessionConfig, SubCaseConfig, TriggersConfig)
    schemas = [Nested(record).json_schema(defs) for record in records]
    keys = set(property_names([schemas, defs]))
    assert {"task", "checks", "should_trigger"} <= keys
    named = code_names("compare-cases.md")
    missing = sorted((keys | set(CHECK_KINDS)) - named)
    assert not missing, f"docs/compare-cases.md never names {missing}"
    table = (DOCS / "compare-cases.md").read_text(encoding="utf-8").split("## Checks", 1)[1]
    rows = re.findall(r"^\| `([a-z_]+)` \|", table.split("\n## ", 1)[0], re.MULTILINE)
    assert rows == list(CHECK_KINDS), "the checks table lists the kinds in the order they run"


def nav_pages(node: Any) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for value in node.values():
            yield from nav_pages(value)
    elif isinstance(node, list):
        for item in node:
            yield from nav_pages(item)


def test_the_site_nav_lists_every_page_once() -> None:
    config = yaml.safe_load((REPO_ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    listed = list(nav_pages(config["nav"]))
    assert len(listed) == len(set(listed)), "a page is listed twice in mkdocs.yml's nav"
    pages = sorted(str(path.relative_to(DOCS)) for path in DOCS.rglob("*.md"))
    assert sorted(listed) == pages


def test_make_test_builds_the_docs_strictly() -> None:
    makefile = (REPO_ROOT / "Makefile").read_text(encoding="utf-8")
    test_target = re.search(r"^test: (.*)$", makefile, re.MULTILINE)
    assert test_target is not None and "docs" in test_target.group(1).split()
    docs_recipe = makefile.split("\ndocs: ", 1)[1].split("\n\n", 1)[0]
    assert "mkdocs build --strict" in docs_recipe
    # mkdocs counts warnings only when it shows them: --quiet would make strict pass anything.
    assert "--quiet" not in docs_recipe and " -q" not in docs_recipe
    config = yaml.safe_load((REPO_ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    assert config["strict"] is True
    assert set(config["validation"].values()) == {"warn"}, "strict fails on each of them"


def test_mkdocs_is_pinned_in_the_dev_extras() -> None:
    pyproject = (REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r'^    "mkdocs==[\d.]+",$', pyproject, re.MULTILINE)
