"""Load a subject's eval assets (``<subject>/evals/``) and report every problem at once.

Files: ``compare.yaml`` (required), ``cases/<name>.yaml`` (one case each, sorted by file name),
``session.yaml`` (one agent session per arm, many scored sub-cases) and ``triggers.yaml``. As in
``trialrun.config.loader``, each check works from the raw YAML and keeps going after a failure; the
typed result is built only when nothing failed, and otherwise ``ConfigErrors`` lists every problem
as ``file:line: message``, ordered by file and line.

Choices made here: a check is a single-key mapping (``file_exists: out.txt``); a bare string is
refused rather than guessed at. Paths a case writes or checks (``files`` keys, ``file_exists`` /
``file_absent``, ``agent.stage``) must be relative and stay inside the sandbox; ``files`` may not
write under ``.claude/``, where arms stage the subject. ``fixture`` is relative to the file naming
it and must stay inside the subject, under its ``evals/`` or ``fixtures/`` (which are not staged);
``arms.incumbent.path`` is relative to ``evals/`` and must lie outside the subject or under
``evals/``. Either one elsewhere would be copied into the candidate's sandbox and counted in its
digest.
"""

from __future__ import annotations

import dataclasses
import os
import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from trialrun.base.quoting import excerpt
from trialrun.compare.checkspec import Check, compile_checks, sandbox_path_problem
from trialrun.compare.placeholders import expand, placeholder_problems
from trialrun.compare.sandbox import STAGE_EXCLUDED
from trialrun.compare.selector import SelectorSection, read_description
from trialrun.config.messages import spec_errors
from trialrun.config.paths import PATH_CHARS, display_path, nul_problem
from trialrun.config.spec import (
    AnyValue,
    Int,
    ListOf,
    MapOf,
    Nested,
    OneOf,
    Optional,
    Record,
    SpecError,
    Str,
    keyed,
    parse,
)
from trialrun.config.yamlload import LoadedYaml, PathElement, load_yaml_file
from trialrun.errors import ConfigError, ConfigErrors

COMPARE_FILE = "compare.yaml"
SESSION_FILE = "session.yaml"
TRIGGERS_FILE = "triggers.yaml"
CASES_DIR = "cases"
SESSION_ONLY_KEYS = ("task", "judge", "files", "fixture", "setup", "bucket")
"""Keys a session sub-case may not carry: they belong to the one shared session."""
_PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_REQUIREMENT = re.compile(r"[A-Za-z0-9_.+-]+|python3:[A-Za-z_][A-Za-z0-9_.]*")
_UNSTAGED = frozenset((name,) for name in STAGE_EXCLUDED)
"""The first path part of a subject folder the arms do not stage (a fixture's place)."""

_R = TypeVar("_R", bound=Record)
Bucket = Literal["explicit", "implicit", "contextual", "negative", "adversarial"]

_COMMAND_FIELDS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("agent", "command"), "agent.command"),
    (("judge", "command"), "judge.command"),
    (("judge", "escalate_command"), "judge.escalate_command"),
    (("triggers", "command"), "triggers.command"),
)
"""Every argv of compare.yaml, by where it sits and the name ``placeholders`` knows it by."""


def _lookup(data: Any, at: tuple[str, ...]) -> Any:
    for name in at:
        data = data.get(name) if isinstance(data, dict) else None
    return data


_ARGV = ListOf(Str(), min_length=1)
_MINUTES = Int(ge=1, le=120)
_TEXT = Optional(Str())


class AgentSection(Record):
    command: list[str] = keyed(_ARGV)
    stage: str = keyed(Str(), default=".claude/skills/{name}")
    transcript: Literal["stream-json", "text"] = keyed(
        OneOf("stream-json", "text"), default="stream-json"
    )
    timeout_minutes: int = keyed(_MINUTES, default=120)
    max_concurrent: int | None = keyed(Optional(Int(ge=1)), default=None)
    """At most this many agent commands at once across the run (None: as many as ``-j``)."""


class IncumbentArm(Record):
    path: str | None = keyed(_TEXT, default=None)
    version: str | None = keyed(Optional(Str(numbers=(int,))), default=None)


class ArmsSection(Record):
    incumbent: IncumbentArm | None = keyed(Optional(Nested(IncumbentArm)), default=None)


class JudgeSection(Record):
    command: list[str] = keyed(_ARGV)
    escalate_command: list[str] | None = keyed(Optional(_ARGV), default=None)
    max_concurrent: int | None = keyed(Optional(Int(ge=1)), default=None)
    """At most this many judge calls at once across the run (None: as many as ``-j``)."""


class CompareConfig(Record):
    name: str = keyed(Str())
    id: str | None = keyed(_TEXT, default=None)
    """The subject's id in a team store; kept here because eval assets are outside the digest."""
    agent: AgentSection = keyed(Nested(AgentSection))
    arms: ArmsSection = keyed(Nested(ArmsSection), default_factory=ArmsSection)
    k: int = keyed(Int(ge=1), default=1)
    judge: JudgeSection | None = keyed(Optional(Nested(JudgeSection)), default=None)
    seed: int = keyed(Int(), default=0)
    triggers: SelectorSection | None = keyed(Optional(Nested(SelectorSection)), default=None)


class _Sandboxed(Record):
    """What seeds a sandbox: shared by cases and the session."""

    files: dict[str, str] = keyed(MapOf(Str()), default_factory=dict)
    fixture: str | None = keyed(_TEXT, default=None)
    setup: str | None = keyed(_TEXT, default=None)
    requires: list[str] = keyed(ListOf(Str(), single=True), default_factory=list)
    timeout_minutes: int = keyed(_MINUTES, default=120)
    max_turns: int = keyed(Int(ge=1), default=200)
    timeout_written: bool = field(default=False, compare=False, repr=False)
    """Whether the file wrote ``timeout_minutes`` (not a key; the loader sets it): only a written
    limit overrides compare.yaml's ``agent.timeout_minutes``."""


class CaseConfig(_Sandboxed):
    task: str = keyed(Str(min_length=1))
    checks: list[Any] = keyed(ListOf(AnyValue()), default_factory=list)
    """Validated and compiled by the loader into ``CompareCase.checks``."""
    judge: str | None = keyed(_TEXT, default=None)
    """The rubric; the judge is asked only when the arms tie on checks."""
    bucket: Bucket | None = keyed(
        Optional(OneOf("explicit", "implicit", "contextual", "negative", "adversarial")),
        default=None,
    )


class SubCaseConfig(Record):
    name: str = keyed(Str(min_length=1))
    checks: list[Any] = keyed(ListOf(AnyValue(), min_length=1))


class SessionConfig(_Sandboxed):
    task: str = keyed(Str(min_length=1))
    cases: list[SubCaseConfig] = keyed(ListOf(Nested(SubCaseConfig), min_length=1))


_PROMPTS = ListOf(Str(numbers=(int, float)))


class TriggersConfig(Record):
    should_trigger: list[str] = keyed(_PROMPTS, default_factory=list)
    should_not_trigger: list[str] = keyed(_PROMPTS, default_factory=list)


@dataclass(frozen=True)
class CompareCase:
    name: str
    """The case file's stem."""
    file: Path
    config: CaseConfig
    checks: tuple[Check, ...]
    fixture: Path | None


@dataclass(frozen=True)
class SessionSubCase:
    name: str
    checks: tuple[Check, ...]


@dataclass(frozen=True)
class CompareSession:
    file: Path
    config: SessionConfig
    cases: tuple[SessionSubCase, ...]
    fixture: Path | None


@dataclass(frozen=True)
class EvalAssets:
    subject: Path
    """Absolute, symlinks resolved."""
    evals_dir: Path
    config: CompareConfig
    cases: tuple[CompareCase, ...]
    session: CompareSession | None
    triggers: TriggersConfig | None
    incumbent_path: Path | None


def _inside(file: Path, root: Path) -> bool:
    try:
        return file.resolve().is_relative_to(root)
    except (OSError, RuntimeError):  # a symlink loop
        return False


def load_eval_assets(subject: str | Path) -> EvalAssets:
    """Load and validate ``<subject>/evals/``. Raises ConfigErrors listing every problem."""
    root = Path(subject).resolve()
    evals_dir = root / "evals"
    if not (evals_dir / COMPARE_FILE).is_file():
        shown = display_path(evals_dir / COMPARE_FILE)
        raise ConfigErrors([ConfigError(f"no {COMPARE_FILE} for subject {root}: expected {shown}")])
    return _AssetsLoader(root, evals_dir).load()


class _AssetsLoader:
    def __init__(self, subject: Path, evals_dir: Path) -> None:
        self._subject = subject
        self._evals = evals_dir
        self._errors: list[tuple[int, ConfigError]] = []
        self._file_rank: dict[str | None, int] = {}

    def load(self) -> EvalAssets:
        doc = self._read(self._evals / COMPARE_FILE)
        config = self._validate(doc, CompareConfig, "compare.yaml") if doc else None
        incumbent = self._check_compare(doc) if doc else None
        cases = [self._load_case(f) for f in self._case_files()]
        session = self._load_session(self._evals / SESSION_FILE, {c.name for c in cases if c})
        triggers_file = self._evals / TRIGGERS_FILE
        triggers_doc = self._read(triggers_file) if triggers_file.exists() else None
        triggers = (
            self._validate(triggers_doc, TriggersConfig, "triggers") if triggers_doc else None
        )
        if triggers_doc and config is not None and config.triggers is not None:
            self._check_own_description()  # only the selector reads it; an agent reads its own
        nothing = not cases and session is None and not (self._evals / SESSION_FILE).exists()
        if doc and nothing and not self._errors:
            self._add(doc.error(f"nothing to compare: no {CASES_DIR}/*.yaml and no {SESSION_FILE}"))
        if self._errors or config is None or None in cases:
            ordered = sorted(self._errors, key=lambda item: (item[0], item[1].line or 0))
            raise ConfigErrors([error for _, error in ordered])
        return EvalAssets(
            subject=self._subject,
            evals_dir=self._evals,
            config=config,
            cases=tuple(c for c in cases if c is not None),
            session=session,
            triggers=triggers,
            incumbent_path=incumbent,
        )

    def _check_own_description(self) -> None:
        """The selector reads the subject's SKILL.md description: a broken one is found now."""
        try:
            read_description(self._subject, strict=True)
        except ConfigError as exc:
            self._add(exc)

    def _case_files(self) -> list[Path]:
        """``cases/*.yaml``; a folder that cannot be listed is an error, not "no cases"."""
        cases_dir = self._evals / CASES_DIR
        try:
            names = [entry.name for entry in os.scandir(cases_dir)]
        except FileNotFoundError:
            return []
        except OSError as exc:
            problem = "expected a folder, found a file" if cases_dir.is_file() else exc.strerror
            self._add(
                ConfigError(f"cannot list the cases: {problem}", file=display_path(cases_dir))
            )
            return []
        return sorted(cases_dir / name for name in names if name.endswith(".yaml"))

    def _add(self, error: ConfigError) -> None:
        self._errors.append((self._file_rank.setdefault(error.file, len(self._file_rank)), error))

    def _read(self, file: Path) -> LoadedYaml | None:
        shown = display_path(file)
        self._file_rank.setdefault(shown, len(self._file_rank))
        if not _inside(file, self._subject):
            # A case file linked to anywhere would be read, and quoted in its errors.
            message = (
                f"a symbolic link that resolves outside the subject ({self._subject}); "
                "compare reads no file outside it: copy the file in instead"
            )
            self._add(ConfigError(message, file=shown))
            return None
        try:
            return load_yaml_file(file, display=shown)
        except ConfigError as exc:
            for single in exc.errors if isinstance(exc, ConfigErrors) else [exc]:
                self._add(single)
            return None

    def _validate(
        self, doc: LoadedYaml, record: type[_R], what: str, data: Any = None
    ) -> _R | None:
        data = doc.data if data is None else data
        try:
            config = parse(record, data)
        except SpecError as exc:
            for error in spec_errors(exc, doc, record, what):
                self._add(error)
            return None
        if isinstance(config, _Sandboxed) and "timeout_minutes" in data:
            config = dataclasses.replace(config, timeout_written=True)
        return config

    # -- compare.yaml -------------------------------------------------------------------------

    def _check_compare(self, doc: LoadedYaml) -> Path | None:
        name = doc.data.get("name")
        if isinstance(name, str) and not _PLAIN_NAME.fullmatch(name):
            message = (
                f"'name' must be a plain name (letters, digits, . _ -), found {excerpt(name)!r}"
            )
            self._add(doc.error(message, ("name",), "name"))
        self._check_commands(doc)
        arms = doc.data.get("arms")
        incumbent = arms.get("incumbent") if isinstance(arms, dict) else None
        if not isinstance(incumbent, dict):
            return None
        at: tuple[PathElement, ...] = ("arms", "incumbent")
        if ("path" in incumbent) == ("version" in incumbent):
            message = "'incumbent' needs exactly one of 'path' or 'version'"
            self._add(doc.error(message, at, "incumbent"))
            return None
        raw = incumbent.get("path")
        if not isinstance(raw, str):
            return None
        if (problem := nul_problem(raw, "incumbent path")) is not None:
            self._add(doc.error(problem, (*at, "path"), "path"))
            return None
        path = (self._evals / raw.replace("\\", "/")).resolve()
        if path.is_relative_to(self._subject) and not path.is_relative_to(self._evals):
            # There the candidate's arm would stage it and its digest would count it.
            message = (
                f"incumbent path '{excerpt(raw, PATH_CHARS)}' lies inside the subject "
                f"({excerpt(display_path(path), PATH_CHARS)}), so the candidate would be "
                "staged and counted with it: put the incumbent outside the subject "
                "(relative to evals/: '../../<folder>') or under evals/"
            )
            self._add(doc.error(message, (*at, "path"), "path"))
            return None
        if not path.is_dir():
            message = (
                f"incumbent path '{excerpt(raw, PATH_CHARS)}' is not a directory "
                f"({excerpt(display_path(path), PATH_CHARS)})"
            )
            self._add(doc.error(message, (*at, "path"), "path"))
            return None
        return path

    def _check_commands(self, doc: LoadedYaml) -> None:
        for where, known_as in _COMMAND_FIELDS:
            command = _lookup(doc.data, where)
            for index, part in enumerate(command if isinstance(command, list) else []):
                if isinstance(part, str):
                    self._check_placeholders(doc, (*where, index), part, known_as)
        stage = _lookup(doc.data, ("agent", "stage"))
        if isinstance(stage, str) and self._check_placeholders(
            doc, ("agent", "stage"), stage, "agent.stage"
        ):
            problem = sandbox_path_problem(expand(stage, {"name": "subject"}))
            if problem is not None:
                self._add(doc.error(f"'stage': {problem}", ("agent", "stage"), "stage"))

    def _check_placeholders(
        self, doc: LoadedYaml, at: tuple[PathElement, ...], text: str, known_as: str
    ) -> bool:
        problems = placeholder_problems(text, known_as)
        for message in problems:
            self._add(doc.error(message, at, str(at[-1])))
        return not problems

    # -- cases and session --------------------------------------------------------------------

    def _load_case(self, file: Path) -> CompareCase | None:
        doc = self._read(file)
        if doc is None:
            return None
        config = self._validate(doc, CaseConfig, "case")
        checks = self._checks(doc, ("checks",), doc.data.get("checks"))
        fixture = self._check_sandbox_inputs(doc, file)
        if config is None or checks is None:
            return None
        return CompareCase(file.stem, file, config, checks, fixture)

    def _load_session(self, file: Path, case_names: set[str]) -> CompareSession | None:
        doc = self._read(file) if file.exists() else None
        if doc is None:
            return None
        data = dict(doc.data)
        raw_cases = data.get("cases")
        if isinstance(raw_cases, list):
            data["cases"] = [self._strip_session_keys(doc, i, c) for i, c in enumerate(raw_cases)]
        config = self._validate(doc, SessionConfig, "session", data)
        fixture = self._check_sandbox_inputs(doc, file)
        sub_cases: list[SessionSubCase] = []
        first_line: dict[str, int] = {}
        for index, entry in enumerate(raw_cases if isinstance(raw_cases, list) else []):
            name = entry.get("name") if isinstance(entry, dict) else None
            checks = self._checks(doc, ("cases", index, "checks"), entry.get("checks"))
            if not isinstance(name, str) or checks is None:
                continue
            at = ("cases", index, "name")
            if name in first_line:
                message = (
                    f"duplicate sub-case name '{excerpt(name)}' (first at line {first_line[name]})"
                )
                self._add(doc.error(message, at, "name"))
            elif name in case_names:
                shown = excerpt(name)
                message = f"sub-case name '{shown}' collides with {CASES_DIR}/{shown}.yaml"
                self._add(doc.error(message, at, "name"))
            first_line.setdefault(name, doc.line_of(at))
            sub_cases.append(SessionSubCase(name, checks))
        return CompareSession(file, config, tuple(sub_cases), fixture) if config else None

    def _strip_session_keys(self, doc: LoadedYaml, index: int, entry: Any) -> Any:
        if not isinstance(entry, dict):
            return entry
        for only_key in SESSION_ONLY_KEYS:
            if only_key in entry:
                message = (
                    f"a session sub-case cannot carry '{only_key}': it belongs to the session, "
                    "whose one agent run all sub-cases share (sessions are never judged)"
                )
                self._add(doc.error(message, ("cases", index, only_key), only_key))
        return {k: v for k, v in entry.items() if k not in SESSION_ONLY_KEYS}

    def _check_sandbox_inputs(self, doc: LoadedYaml, file: Path) -> Path | None:
        files = doc.data.get("files")
        for path_key in files if isinstance(files, dict) else {}:
            if not isinstance(path_key, str):
                continue
            problem = sandbox_path_problem(path_key)
            normal = posixpath.normpath(path_key.replace("\\", "/"))
            if problem is None and (normal == ".claude" or normal.startswith(".claude/")):
                problem = (
                    f"path '{excerpt(path_key, PATH_CHARS)}' is under .claude/, where the arms "
                    "stage the subject"
                )
            if problem is not None:
                self._add(doc.error(f"'files': {problem}", ("files", path_key), "files"))
        for path_key in ("requires",):
            raw = doc.data.get(path_key)
            for index, item in enumerate(
                raw if isinstance(raw, list) else [raw] if isinstance(raw, str) else []
            ):
                if isinstance(item, str) and not _REQUIREMENT.fullmatch(item):
                    at = (path_key, index) if isinstance(raw, list) else (path_key,)
                    message = (
                        "'requires' entries are a program name or python3:<module>, found "
                        f"{excerpt(item)!r}"
                    )
                    self._add(doc.error(message, at, path_key))
        fixture = doc.data.get("fixture")
        if not isinstance(fixture, str):
            return None
        if (problem := nul_problem(fixture, "fixture")) is not None:
            self._add(doc.error(problem, ("fixture",), "fixture"))
            return None
        path = (file.parent / fixture.replace("\\", "/")).resolve()
        if not path.is_relative_to(self._subject):
            shown = excerpt(fixture, PATH_CHARS)
            problem = f"fixture '{shown}' resolves outside the subject ({self._subject})"
        elif path.relative_to(self._subject).parts[:1] not in _UNSTAGED:
            shown = excerpt(fixture, PATH_CHARS)
            problem = (
                f"fixture '{shown}' lies in the staged part of the subject "
                f"({display_path(path)}), so it would be copied into the candidate's sandbox "
                "and counted in its digest: keep fixtures under evals/ (e.g. evals/fixtures/)"
            )
        elif not path.is_dir():
            shown = excerpt(fixture, PATH_CHARS)
            problem = f"fixture '{shown}' is not a directory ({display_path(path)})"
        else:
            return path
        self._add(doc.error(problem, ("fixture",), "fixture"))
        return None

    def _checks(
        self, doc: LoadedYaml, at: tuple[PathElement, ...], raw: Any
    ) -> tuple[Check, ...] | None:
        checks, errors = compile_checks(doc, at, raw)
        for error in errors:
            self._add(error)
        return checks
