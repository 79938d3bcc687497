"""CONTRIBUTING.md's recipes and the pre-commit configuration, run as a newcomer would use them.

Each code example marked ``<!-- example: NAME -->`` in CONTRIBUTING.md is taken from the page
as written and exercised here: the assertion type is loaded through the registry and a suite,
the importer reads an export and says no to every other format, the row rule decides rows.
"""

from __future__ import annotations

import functools
import importlib
import json
import re
import shlex
import sys
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from paths import DATA_DIR, REPO_ROOT
from trialrun.base import assertion_api
from trialrun.base.assertion_api import (
    AssertionParamError,
    AssertionRegistry,
    CheckSubject,
    CompileContext,
)
from trialrun.base.results import ToolCall
from trialrun.compare import rows
from trialrun.compare.judge import JudgeDecision
from trialrun.compare.rows import ArmResult, Row
from trialrun.config import load_suite
from trialrun.errors import ConfigError
from trialrun.incident.importers import read_records
from trialrun.incident.importers.api import BUILTIN_IMPORTERS, ImporterRegistry
from trialrun.incident.model import is_inconclusive

ROOT = REPO_ROOT
INCIDENTS = DATA_DIR / "incidents"
EXAMPLE = re.compile(r"^<!-- example: ([\w-]+) -->\n```(\w+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def examples() -> dict[str, tuple[str, str]]:
    """name -> (language, code) of every marked example in CONTRIBUTING.md."""
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    found: dict[str, tuple[str, str]] = {}
    for name, language, code in EXAMPLE.findall(text):
        assert name not in found, f"CONTRIBUTING.md marks two examples {name!r}"
        found[name] = (language, code)
    return found


def example(name: str, language: str) -> str:
    every = examples()
    assert name in every, f"CONTRIBUTING.md has no example {name!r}: {sorted(every)}"
    assert every[name][0] == language
    return every[name][1]


@pytest.fixture
def example_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Writes an example as an importable module, as a contributor would add the file."""
    made: list[str] = []

    def make(module_name: str, code: str) -> ModuleType:
        (tmp_path / f"{module_name}.py").write_text(code, encoding="utf-8")
        made.append(module_name)
        return importlib.import_module(module_name)

    monkeypatch.syspath_prepend(str(tmp_path))
    yield make
    for module_name in made:
        sys.modules.pop(module_name, None)


def ctx(root: Path) -> CompileContext:
    return CompileContext(resolve_path=lambda raw: root / raw)


def calls(*names: str) -> list[ToolCall]:
    return [ToolCall(call_id=f"c{i}", name=name, args={}, ok=True) for i, name in enumerate(names)]


# -- add an assertion type ----------------------------------------------------------------------


def test_the_assertion_example_checks_its_limit_and_refuses_bad_parameters(
    example_module: Callable[[str, str], ModuleType], tmp_path: Path
) -> None:
    module = example_module("recipe_max_calls", example("assertion-type", "python"))
    compiled = module.MAX_CALLS.compile({"tool": "search", "max": 1}, ctx(tmp_path))
    assert compiled.check(CheckSubject(output={}, tool_calls=calls("search", "fetch"))) == []
    [failure] = compiled.check(CheckSubject(output={}, tool_calls=calls("search", "search")))
    assert (failure.type, failure.message) == (
        "max_calls",
        "search was called 2 times, at most 1 allowed",
    )
    with pytest.raises(AssertionParamError, match="missing parameter 'max'"):
        module.MAX_CALLS.compile({"tool": "search"}, ctx(tmp_path))
    with pytest.raises(AssertionParamError, match="did you mean 'max'"):
        module.MAX_CALLS.compile({"tool": "search", "mx": 1}, ctx(tmp_path))
    with pytest.raises(AssertionParamError, match=r"parameter 'max' .* must be a count"):
        module.MAX_CALLS.compile({"tool": "search", "max": True}, ctx(tmp_path))


def test_the_assertion_example_loads_through_its_entry_point_into_a_suite(
    example_module: Callable[[str, str], ModuleType],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    example_module("recipe_max_calls", example("assertion-type", "python"))
    declared = tomllib.loads(example("assertion-entry-point", "toml"))
    group = declared["project"]["entry-points"][assertion_api.ENTRY_POINT_GROUP]
    assert group == {"max_calls": "trialrun.checks.builtin:MAX_CALLS"}
    # Registered as BUILTIN_TYPES would hold it, pointing at the example's module.
    builtins = {**assertion_api.BUILTIN_TYPES, "max_calls": "recipe_max_calls:MAX_CALLS"}
    monkeypatch.setattr(assertion_api, "_DEFAULT_REGISTRY", AssertionRegistry(builtins=builtins))

    suite_dir = tmp_path / "suite"
    (suite_dir / "cases").mkdir(parents=True)
    suite = {
        "suite_name": "recipe",
        "agent_command": ["python", "agent.py"],
        "mode": "replay",
        "cases_path": "cases",
        "tool_registry": ["search"],
        "assertions": [{"type": "max_calls", "tool": "search", "max": 2}],
    }
    (suite_dir / "suite.yaml").write_text(yaml.safe_dump(suite), encoding="utf-8")
    case = {"id": "t1", "input": {}, "cassette": "t1.jsonl"}
    (suite_dir / "cases" / "t1.yaml").write_text(yaml.safe_dump(case), encoding="utf-8")

    [loaded_case] = load_suite(suite_dir).cases
    [assertion] = loaded_case.assertions
    assert assertion.type == "max_calls"
    many = CheckSubject(output={}, tool_calls=calls("search", "search", "search"))
    assert [failure.type for failure in assertion.check(many)] == ["max_calls"]


# -- add an incident importer -------------------------------------------------------------------

ACME_EXPORT = {
    "acme_trace": 1,
    "input": {"request": "refund order ord_1042"},
    "steps": [
        {"tool": "lookup_order", "args": {"order_id": "ord_1042"}, "ok": True, "result": {}},
        {"tool": "issue_refund", "args": {"amount": 129.0}, "ok": False, "error": "timeout"},
        {"tool": "send_email"},
    ],
    "output": {"refund_ids": []},
}


def test_the_importer_example_reads_its_format(
    example_module: Callable[[str, str], ModuleType], tmp_path: Path
) -> None:
    importer = example_module("recipe_acme_trace", example("incident-importer", "python"))
    export = tmp_path / "acme.json"
    export.write_text(json.dumps(ACME_EXPORT), encoding="utf-8")
    records = read_records(export)
    assert importer.detect(records)
    incident = importer.to_incident(records, "acme.json")
    assert incident.source_format == "acme-trace"
    assert [(c.index, c.name, c.ok, c.error) for c in incident.calls] == [
        (0, "lookup_order", True, None),
        (1, "issue_refund", False, "timeout"),
        (2, "send_email", None, None),
    ]
    assert incident.input == ACME_EXPORT["input"]
    assert incident.final_output == {"refund_ids": []}
    # The third step kept neither arguments nor a result: the import says so.
    assert incident.missing == ["calls[2].args (send_email)", "calls[2].result (send_email)"]
    assert is_inconclusive(incident)

    with pytest.raises(ConfigError, match="expected 'steps' to be a list") as refused:
        importer.to_incident([{"acme_trace": 1, "steps": {}}], "acme.json")
    assert refused.value.file == "acme.json"


def test_the_importer_example_says_no_to_every_other_format(
    example_module: Callable[[str, str], ModuleType],
) -> None:
    importer = example_module("recipe_acme_trace", example("incident-importer", "python"))
    others = sorted(path for path in INCIDENTS.iterdir() if path.suffix in (".json", ".jsonl"))
    assert others
    for path in others:
        assert not importer.detect(read_records(path)), path.name


KEYS = st.sampled_from(["acme_trace", "steps", "type", "case_id", "resourceSpans"]) | st.text()
RECORD = st.dictionaries(KEYS, st.integers(), max_size=3) | st.integers() | st.text()


@functools.cache
def example_detect() -> Callable[[list[Any]], bool]:
    """The importer example's ``detect``, compiled once: each generated input only calls it."""
    namespace: dict[str, Any] = {"__name__": "recipe_acme_trace_detect"}
    exec(compile(example("incident-importer", "python"), "CONTRIBUTING.md", "exec"), namespace)
    detect: Callable[[list[Any]], bool] = namespace["detect"]
    return detect


@given(st.lists(RECORD, max_size=3))
def test_the_importer_example_detects_only_one_acme_document(records: list[Any]) -> None:
    one_acme = len(records) == 1 and isinstance(records[0], dict) and "acme_trace" in records[0]
    assert example_detect()(records) == one_acme


def test_the_importer_entry_point_names_the_module_in_the_importers_package() -> None:
    declared = tomllib.loads(example("incident-entry-point", "toml"))
    group = declared["project"]["entry-points"]["trialrun.incident_importers"]
    assert group == {"acme-trace": "trialrun.incident.importers.acme_trace:IMPORTER"}


def test_the_importer_example_is_found_through_its_entry_point(
    example_module: Callable[[str, str], ModuleType], tmp_path: Path
) -> None:
    module = example_module("recipe_acme_trace", example("incident-importer", "python"))

    class EntryPoint:
        name, value = "acme-trace", "recipe_acme_trace:IMPORTER"

        def load(self) -> Any:
            return module.IMPORTER

    registry = ImporterRegistry(discover=lambda: [EntryPoint()], builtins=BUILTIN_IMPORTERS)
    assert registry.names()[-1] == "acme-trace"
    export = tmp_path / "acme.json"
    export.write_text(json.dumps(ACME_EXPORT), encoding="utf-8")
    incident = registry.recognise(read_records(export), "acme.json")
    assert incident is not None and incident.source_format == "acme-trace"


# -- add a compare row rule ---------------------------------------------------------------------


def rule() -> Callable[..., Row | None]:
    """The example rule, defined among rows.py's names as the recipe adds it there."""
    namespace = dict(vars(rows))
    exec(compile(example("compare-row-rule", "python"), "CONTRIBUTING.md", "exec"), namespace)
    made: Callable[..., Row | None] = namespace["_no_checks"]
    return made


def arm(name: str, passed: int, total: int) -> ArmResult:
    return ArmResult(arm=name, checks_passed=passed, checks_total=total)


def never_called() -> JudgeDecision:
    raise AssertionError("the rule asked the judge")


def test_the_row_rule_example_decides_a_case_without_checks_or_rubric() -> None:
    no_checks = rule()
    row = no_checks(arm("candidate", 0, 0), arm("baseline", 0, 0), None)
    assert row is not None
    assert (row.outcome, row.decided_by, row.scored) == ("tie", "no-checks", True)
    assert row.reason == "the case has no checks and no judge rubric"


@pytest.mark.parametrize(
    ("candidate", "opponent", "judge"),
    [
        (arm("candidate", 1, 1), arm("baseline", 0, 0), None),
        (arm("candidate", 0, 0), arm("baseline", 0, 2), None),
        (arm("candidate", 0, 0), arm("baseline", 0, 0), never_called),
    ],
)
def test_the_row_rule_example_leaves_every_other_row_to_the_next_rules(
    candidate: ArmResult, opponent: ArmResult, judge: Callable[[], JudgeDecision] | None
) -> None:
    assert rule()(candidate, opponent, judge) is None


# -- pre-commit ---------------------------------------------------------------------------------


def test_pre_commit_runs_the_makefile_checks_with_the_venv_tools_offline() -> None:
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text(encoding="utf-8"))
    assert [repo["repo"] for repo in config["repos"]] == ["local"]
    hooks = {
        hook["id"]: hook
        for hook in config["repos"][0]["hooks"]
        if hook.get("stages") != ["commit-msg"]
    }
    assert set(hooks) == {"ruff-check", "ruff-format", "mypy"}
    for hook in hooks.values():
        assert hook["language"] == "system"
        assert shlex.split(hook["entry"])[0].startswith(".venv/bin/")
    assert shlex.split(hooks["ruff-check"]["entry"]) == [
        ".venv/bin/ruff",
        "check",
        "--force-exclude",
    ]
    assert shlex.split(hooks["ruff-format"]["entry"]) == [
        ".venv/bin/ruff",
        "format",
        "--force-exclude",
    ]
    assert shlex.split(hooks["mypy"]["entry"]) == [".venv/bin/mypy", "--strict", "src"]
    assert hooks["mypy"]["pass_filenames"] is False
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "$(BIN)/mypy --strict src" in makefile
    assert "$(BIN)/ruff check src tests bench" in makefile
    dev = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"
    ]["dev"]
    assert any(requirement.startswith("pre-commit") for requirement in dev)


def _message_hooks() -> dict[str, re.Pattern[bytes]]:
    """The commit-msg hooks' patterns, compiled as pre-commit's pygrep does with --multiline."""
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text(encoding="utf-8"))
    assert "commit-msg" in config["default_install_hook_types"]
    found = {}
    for hook in config["repos"][0]["hooks"]:
        if hook.get("stages") == ["commit-msg"]:
            assert (hook["language"], hook["args"]) == ("pygrep", ["--multiline"])
            found[hook["id"]] = re.compile(hook["entry"].encode(), re.MULTILINE | re.DOTALL)
    assert set(found) == {"commit-subject-length", "commit-body"}
    return found


@pytest.mark.parametrize(
    ("message", "refused_by"),
    [
        ("Redact a tail before cutting it\n\nCutting first kept half a key.\n", set()),
        ("x" * 72 + "\n\nWhy.\n", set()),
        ("x" * 73 + "\n\nWhy.\n", {"commit-subject-length"}),
        ("Fix the thing\n", {"commit-body"}),
        ("Fix the thing", {"commit-body"}),
        ("Fix the thing\n\n# Please enter the commit message\n#\n", {"commit-body"}),
        ("x" * 80 + "\n", {"commit-subject-length", "commit-body"}),
        ("Merge branch 'topic'\n", set()),
        ("Fix the thing\n\nBecause.\n# Please enter the commit message\n", set()),
    ],
)
def test_commit_messages_are_held_to_the_contributing_form(
    message: str, refused_by: set[str]
) -> None:
    refused = {
        name for name, pattern in _message_hooks().items() if pattern.search(message.encode())
    }
    assert refused == refused_by
