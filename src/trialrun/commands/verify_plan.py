"""The verify plan: which suite to gate, how often to repeat it, and which breakages it must catch.

A plan is YAML validated like a suite file (every problem reported as ``file:line: message``).
Beyond the schema, the plan is checked against the suite it names: expected cases must exist,
and a patch must name a file inside the suite directory that contains the text it replaces. A
plan that passes loading can only fail at run time because the suite's behaviour did.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
    model_validator,
)

from trialrun.base.fsutil import read_problem
from trialrun.base.quoting import excerpt
from trialrun.base.suggest import closest
from trialrun.config import Suite, load_suite
from trialrun.config.messages import validation_errors
from trialrun.config.paths import display_path, nul_problem
from trialrun.config.yamlload import LoadedYaml, PathElement, load_yaml_file
from trialrun.errors import ConfigError, ConfigErrors


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class ExpectedFailure(_Strict):
    case: StrictStr
    failure: StrictStr = Field(min_length=1)
    """A failure kind (``cassette_mismatch``) or check type (``call_order``, ``budget:...``)."""


class FilePatch(_Strict):
    file: StrictStr = Field(min_length=1)
    replace: StrictStr = Field(min_length=1)
    with_: StrictStr = Field(alias="with")


class Breakage(_Strict):
    name: StrictStr = Field(min_length=1)
    env: dict[StrictStr, StrictStr] | None = None
    agent_command: list[StrictStr] | None = Field(default=None, min_length=1)
    patch: FilePatch | None = None
    expect: list[ExpectedFailure] = Field(min_length=1)

    @model_validator(mode="after")
    def _exactly_one_change(self) -> Breakage:
        given = [key for key in ("env", "agent_command", "patch") if getattr(self, key) is not None]
        if len(given) != 1:
            found = ", ".join(given) if given else "none"
            raise ValueError(
                f"a regression needs exactly one of env, agent_command, patch (found: {found})"
            )
        return self


class Limits(_Strict):
    max_seconds: StrictFloat | StrictInt = Field(gt=0)


class PlanConfig(_Strict):
    suite: StrictStr = Field(min_length=1)
    repeat: StrictInt = Field(default=1, ge=1)
    regressions: list[Breakage] = Field(default_factory=list)
    recovery: StrictBool = False
    limits: Limits | None = None


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
    try:
        config = PlanConfig.model_validate(doc.data)
    except ValidationError as exc:
        raise ConfigErrors(validation_errors(exc, doc, PlanConfig, "plan")) from None
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
    errors = [*_duplicate_names(doc, config), *_against_suite(doc, config, suite)]
    if errors:
        raise ConfigErrors(errors)
    commands = {
        step.name: [_absolute_if_present(part, plan_file.parent) for part in step.agent_command]
        for step in config.regressions
        if step.agent_command is not None
    }
    return VerifyPlan(config, plan_file, suite, commands)


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
