"""The verify plan: which suite to gate, how often to repeat it, and which breakages it must catch.

A plan is YAML validated like a suite file (every problem reported as ``file:line: message``).
Beyond the schema, the plan is checked against the suite it names: expected cases must exist,
and a patch must name a file inside the suite directory that contains the text it replaces. A
plan that passes loading can only fail at run time because the suite's behaviour did.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from trialrun.base.assertion_api import assertion_type_names
from trialrun.base.fsutil import read_problem
from trialrun.base.quoting import excerpt
from trialrun.base.results import CHECK_ERROR_TYPES, FAILURE_KINDS
from trialrun.base.suggest import closest, did_you_mean
from trialrun.config import Suite, load_suite
from trialrun.config.messages import spec_errors
from trialrun.config.models import Budgets
from trialrun.config.paths import display_path, nul_problem
from trialrun.config.spec import (
    Bool,
    Float,
    Int,
    ListOf,
    MapOf,
    Nested,
    Optional,
    Record,
    SpecError,
    Str,
    keyed,
    parse,
)
from trialrun.config.yamlload import LoadedYaml, PathElement, load_yaml_file
from trialrun.errors import ConfigError, ConfigErrors

_NON_EMPTY = Str(min_length=1)
_CHANGES = ("env", "agent_command", "patch")
"""A regression makes exactly one of these changes."""


class ExpectedFailure(Record):
    case: str = keyed(Str())
    failure: str = keyed(_NON_EMPTY)
    """A failure kind (``cassette_mismatch``) or check type (``call_order``, ``budget:...``)."""


class FilePatch(Record):
    file: str = keyed(_NON_EMPTY)
    replace: str = keyed(_NON_EMPTY)
    with_: str = keyed(Str(), spelled="with")


class Breakage(Record):
    name: str = keyed(_NON_EMPTY)
    env: dict[str, str] | None = keyed(Optional(MapOf(Str())), default=None)
    agent_command: list[str] | None = keyed(Optional(ListOf(Str(), min_length=1)), default=None)
    patch: FilePatch | None = keyed(Optional(Nested(FilePatch)), default=None)
    expect: list[ExpectedFailure] = keyed(ListOf(Nested(ExpectedFailure), min_length=1))


class Limits(Record):
    max_seconds: float = keyed(Float(gt=0))


class PlanConfig(Record):
    suite: str = keyed(_NON_EMPTY)
    repeat: int = keyed(Int(ge=1), default=1)
    regressions: list[Breakage] = keyed(ListOf(Nested(Breakage)), default_factory=list)
    recovery: bool = keyed(Bool(), default=False)
    limits: Limits | None = keyed(Optional(Nested(Limits)), default=None)


@dataclass(frozen=True)
class VerifyPlan:
    config: PlanConfig
    plan_file: Path
    """Absolute."""
    suite: Suite
    agent_commands: dict[str, list[str]]
    """Regression name -> its agent command, parts naming files next to the plan made absolute."""


def load_plan(path: str | Path) -> VerifyPlan:
    """Load and validate the plan at ``path`` and the suite it names; raises ConfigErrors."""
    plan_file = Path(path).absolute()
    doc = load_yaml_file(plan_file, display=display_path(plan_file))
    changes = _change_problems(doc)
    try:
        config = parse(PlanConfig, doc.data)
    except SpecError as exc:
        errors = [*spec_errors(exc, doc, PlanConfig, "plan"), *changes]
        raise ConfigErrors(sorted(errors, key=lambda e: e.line or 0)) from None
    if changes:
        raise ConfigErrors(changes)
    suite_path = plan_file.parent / config.suite
    if not suite_path.exists():
        # Said at the plan's line: the suite's own loader cannot know which file named it.
        raise doc.error(
            f"'suite': {config.suite} not found (expected a suite folder or file, relative to "
            "this plan)",
            ["suite"],
            "suite",
        )
    suite = load_suite(suite_path)
    errors = [
        *_duplicate_names(doc, config),
        *_against_suite(doc, config, suite),
        *_unknown_failures(doc, config),
    ]
    if errors:
        raise ConfigErrors(errors)
    commands = {
        step.name: [_absolute_if_present(part, plan_file.parent) for part in step.agent_command]
        for step in config.regressions
        if step.agent_command is not None
    }
    return VerifyPlan(config, plan_file, suite, commands)


def _change_problems(doc: LoadedYaml) -> list[ConfigError]:
    """Each regression that does not make exactly one change, whatever else is wrong with it."""
    regressions = doc.data.get("regressions")
    errors: list[ConfigError] = []
    for index, step in enumerate(regressions if isinstance(regressions, list) else []):
        if not isinstance(step, dict):
            continue
        given = [change for change in _CHANGES if step.get(change) is not None]
        if len(given) != 1:
            name = step.get("name")
            which = f"regression '{excerpt(name)}'" if isinstance(name, str) else "a regression"
            message = (
                f"{which} needs exactly one of {', '.join(_CHANGES)} "
                f"(found: {', '.join(given) if given else 'none'})"
            )
            errors.append(doc.error(message, ["regressions", index], "regressions"))
    return errors


def _duplicate_names(doc: LoadedYaml, config: PlanConfig) -> list[ConfigError]:
    seen: set[str] = set()
    errors: list[ConfigError] = []
    for index, step in enumerate(config.regressions):
        if step.name in seen:
            where: list[PathElement] = ["regressions", index, "name"]
            errors.append(
                doc.error(f"duplicate regression name '{excerpt(step.name)}'", where, "name")
            )
        seen.add(step.name)
    return errors


def _against_suite(doc: LoadedYaml, config: PlanConfig, suite: Suite) -> list[ConfigError]:
    case_ids = [case.config.id for case in suite.cases]
    errors: list[ConfigError] = []
    for index, step in enumerate(config.regressions):
        for number, expected in enumerate(step.expect):
            if expected.case not in case_ids:
                errors.append(
                    doc.error(
                        _unknown_case(expected.case, case_ids),
                        ["regressions", index, "expect", number, "case"],
                        "case",
                    )
                )
        if step.patch is not None:
            problem = _patch_problem(step.patch, suite.suite_dir)
            if problem is not None:
                errors.append(doc.error(problem, ["regressions", index, "patch"], "patch"))
    return errors


def _unknown_failures(doc: LoadedYaml, config: PlanConfig) -> list[ConfigError]:
    """Expectations naming no failure kind or check type: such a regression could never be met."""
    known = [
        *FAILURE_KINDS,
        *assertion_type_names(),
        *CHECK_ERROR_TYPES,
        *(f"budget:{field.name}" for field in dataclasses.fields(Budgets)),
    ]
    errors: list[ConfigError] = []
    for index, step in enumerate(config.regressions):
        for number, expected in enumerate(step.expect):
            if expected.failure in known:
                continue
            message = (
                f"expected failure '{excerpt(expected.failure)}' is not a failure kind or check "
                f"type{did_you_mean(expected.failure, known)}"
            )
            where: list[PathElement] = ["regressions", index, "expect", number, "failure"]
            errors.append(doc.error(message, where, "failure"))
    return errors


def _unknown_case(case_id: str, case_ids: Sequence[str]) -> str:
    suggestion = closest(case_id, case_ids)
    hint = f" (did you mean '{suggestion}'?)" if suggestion else ""
    return f"expected case '{excerpt(case_id)}' is not in the suite{hint}"


def _patch_problem(patch: FilePatch, suite_dir: Path) -> str | None:
    if (problem := nul_problem(patch.file, "patch file")) is not None:
        return problem
    target = (suite_dir / patch.file).resolve()
    if not target.is_relative_to(suite_dir.resolve()):
        return f"patch file '{patch.file}' is outside the suite directory {suite_dir}"
    try:
        text = target.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return f"patch file '{patch.file}' cannot be read: {read_problem(exc)}"
    if patch.replace not in text:
        return f"patch text {excerpt(patch.replace)!r} does not occur in '{patch.file}'"
    return None


def _absolute_if_present(part: str, base: Path) -> str:
    candidate = base / part
    return (
        str(candidate.absolute()) if candidate.exists() and not Path(part).is_absolute() else part
    )
