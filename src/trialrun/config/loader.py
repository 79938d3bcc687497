"""Load a suite and its cases, validate every part, and report every problem at once.

Validation is deliberately exhaustive: a user fixing a suite should see all its problems in one run
(``error: <file>:<line>: <message>`` each), not one per attempt. So each check works from the raw
YAML data and keeps going after a failure; the typed ``Suite`` is built only when nothing failed.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from trialrun.base.quoting import excerpt
from trialrun.base.suggest import did_you_mean
from trialrun.config.assertions import AssertionCompiler
from trialrun.config.caseinput import first_non_json
from trialrun.config.messages import spec_errors
from trialrun.config.models import Budgets, CaseConfig, Normalization, SuiteConfig
from trialrun.config.normalize import REGEX_FLAGS
from trialrun.config.paths import PATH_CHARS, PathEscapeError, SuitePaths, display_path
from trialrun.config.spec import Record, SpecError, deprecated_keys, parse
from trialrun.config.yamlload import LoadedYaml, PathElement, load_yaml_file
from trialrun.errors import ConfigError, ConfigErrors

if TYPE_CHECKING:
    from trialrun.base.assertion_api import CompiledAssertion
    from trialrun.config.quarantine import QuarantineEntry

SUITE_FILE_NAMES = ("suite.yaml", "suite.yml")
CASE_FILE_SUFFIXES = (".yaml", ".yml", ".json")
_LISTED_IDS = 20
_ID_CHARS = 80

_Record = TypeVar("_Record", bound=Record)


@dataclass(frozen=True)
class Case:
    """One case, ready to run: its file's config plus everything it inherits from the suite."""

    config: CaseConfig
    file: Path
    cassette_path: Path
    """Resolved against the suite directory; may not exist yet (record mode creates it)."""
    assertions: list[CompiledAssertion]
    """Suite assertions, then the case's own."""
    budgets: Budgets
    normalization: Normalization


@dataclass(frozen=True)
class Suite:
    """A validated suite with its paths resolved and its cases loaded."""

    config: SuiteConfig
    suite_file: Path
    suite_dir: Path
    root: Path
    """The git repository root holding the suite, or the suite directory when there is none."""
    agent_command: list[str]
    cases: list[Case]
    """In case-file name order (filtered by ``case_ids`` when given)."""
    tool_module_dir: Path
    baseline_path: Path | None
    output_dir: Path | None
    warnings: tuple[str, ...] = ()
    """``warning: <file>:<line>: ...`` lines for keys that load but do nothing (deprecated)."""
    quarantine: tuple[QuarantineEntry, ...] = ()
    """The entries of quarantine.yaml beside the suite file (``config.quarantine``)."""


def load_suite(
    path: str | Path,
    *,
    case_ids: Sequence[str] = (),
    use_baseline_path: bool = True,
    mode: str | None = None,
) -> Suite:
    """Load the suite at ``path`` (a directory holding suite.yaml/suite.yml, or the YAML file).

    Raises ConfigErrors listing every problem in the suite file and all case files.
    ``use_baseline_path`` False (a run with ``--no-baseline`` or its own ``--baseline``): the
    suite's ``baseline_path`` is not read, so where it points is not checked either, and
    ``Suite.baseline_path`` is None. ``mode`` (``run --mode``) stands in for a suite file
    without ``mode``; a ``mode`` the file does hold is still checked.
    """
    try:
        suite_file = find_suite_file(Path(path))
    except ConfigError as exc:
        raise ConfigErrors([exc]) from None
    return _SuiteLoader(suite_file, use_baseline_path=use_baseline_path, mode=mode).load(case_ids)


def find_suite_file(path: Path) -> Path:
    """The suite YAML file ``path`` designates (absolute, symlinks resolved)."""
    shown = display_path(path)
    if path.is_dir():
        if not os.access(path, os.R_OK | os.X_OK):
            # Otherwise every name in it looks absent and the message would say "no suite.yaml".
            raise ConfigError("cannot read the directory: permission denied", file=shown)
        present = [path / name for name in SUITE_FILE_NAMES if (path / name).is_file()]
        if len(present) > 1:
            raise ConfigError("both suite.yaml and suite.yml exist; keep only one", file=shown)
        if not present:
            raise ConfigError("no suite.yaml or suite.yml in this directory", file=shown)
        return present[0].resolve()
    if path.is_file():
        return path.resolve()
    raise ConfigError(
        "suite not found (expected a directory with suite.yaml, or a suite file)", file=shown
    )


@dataclass
class _CaseDraft:
    """One case file on its way to a ``Case``: what has loaded so far."""

    doc: LoadedYaml
    file: Path
    config: CaseConfig | None = None
    cassette_path: Path | None = None
    assertions: list[CompiledAssertion] | None = None


class _SuiteLoader:
    """One load: collects errors (ordered by file, then line) and caches compiled assertions."""

    def __init__(
        self, suite_file: Path, *, use_baseline_path: bool = True, mode: str | None = None
    ) -> None:
        self._suite_file = suite_file
        self._use_baseline_path = use_baseline_path
        self._mode = mode
        self._paths = SuitePaths.for_suite_dir(suite_file.parent)
        self._cwd = Path.cwd().resolve()
        self._errors: list[tuple[int, ConfigError]] = []
        self._file_rank: dict[str | None, int] = {}
        self._assertions = AssertionCompiler(self._paths)

    def load(self, case_ids: Sequence[str]) -> Suite:
        doc = self._read(self._suite_file)
        if doc is None:
            raise self._collected()
        config = self._validate(doc, SuiteConfig, "suite", self._given_mode(doc))
        self._check_suite_name(doc)
        suite_assertions = self._compile_assertions(doc)
        self._check_normalization(doc, doc.data.get("normalization"))
        self._check_model_gateway(doc)
        self._check_tool_module(doc)
        baseline_path = (
            self._optional_path(doc, "baseline_path") if self._use_baseline_path else None
        )
        output_dir = self._optional_path(doc, "output_dir")
        if output_dir is not None and output_dir.exists() and not output_dir.is_dir():
            raw = doc.data["output_dir"]
            message = (
                f"'output_dir': expected a directory, found a file: {excerpt(raw, PATH_CHARS)}"
            )
            self._add(doc.error(message, ("output_dir",), "output_dir"))
        drafts = [self._load_case(file) for file in self._case_files(doc)]
        self._check_duplicate_ids(drafts)
        selected = self._select(drafts, case_ids)
        quarantine = self._quarantine(drafts)
        if self._errors or config is None:
            raise self._collected()
        cases = [self._build_case(d, config, suite_assertions) for d in selected]
        return Suite(
            config=config,
            suite_file=self._suite_file,
            suite_dir=self._paths.suite_dir,
            root=self._paths.root,
            agent_command=self._paths.agent_command(config.agent_command),
            cases=cases,
            tool_module_dir=self._paths.suite_dir,
            baseline_path=baseline_path,
            output_dir=output_dir,
            warnings=tuple(
                f"warning: {doc.file}:{doc.line_of((spelling,))}: '{spelling}' is deprecated: {why}"
                for spelling, why in deprecated_keys(SuiteConfig, doc.data)
            ),
            quarantine=quarantine,
        )

    def _quarantine(self, drafts: Sequence[_CaseDraft | None]) -> tuple[QuarantineEntry, ...]:
        """quarantine.yaml's entries, checked against every case of the suite (not only the
        ones ``--case`` selected)."""
        from trialrun.config.quarantine import find_quarantine_file, load_quarantine

        found = find_quarantine_file(self._paths.suite_dir)
        if found is None:
            return ()
        ids = [d.config.id for d in drafts if d is not None and d.config is not None]
        shown = self._display(found)
        self._file_rank.setdefault(shown, len(self._file_rank))
        try:
            return load_quarantine(found, ids, display=shown)
        except ConfigError as exc:
            self._add(exc)
            return ()

    # -- errors -------------------------------------------------------------------------------

    def _add(self, error: ConfigError) -> None:
        for single in error.errors if isinstance(error, ConfigErrors) else [error]:
            rank = self._file_rank.setdefault(single.file, len(self._file_rank))
            self._errors.append((rank, single))

    def _collected(self) -> ConfigErrors:
        ordered = sorted(self._errors, key=lambda item: (item[0], item[1].line or 0))
        return ConfigErrors([error for _, error in ordered])

    def _display(self, path: Path) -> str:
        return display_path(path, self._cwd)

    # -- files --------------------------------------------------------------------------------

    def _read(self, file: Path) -> LoadedYaml | None:
        shown = self._display(file)
        self._file_rank.setdefault(shown, len(self._file_rank))
        try:
            return load_yaml_file(file, display=shown)
        except ConfigError as exc:
            self._add(exc)
            return None

    def _given_mode(self, doc: LoadedYaml) -> dict[str, Any]:
        # `run --mode` says which mode to run in, so a file without one is complete with it.
        return {"mode": self._mode} if self._mode is not None and "mode" not in doc.data else {}

    def _validate(
        self,
        doc: LoadedYaml,
        record: type[_Record],
        what: str,
        given: Mapping[str, Any] | None = None,
    ) -> _Record | None:
        try:
            return parse(record, {**doc.data, **given} if given else doc.data)
        except SpecError as exc:
            for error in spec_errors(exc, doc, record, what):
                self._add(error)
            return None

    def _case_files(self, doc: LoadedYaml) -> list[Path]:
        raw = doc.data.get("cases_path")
        if not isinstance(raw, str):
            return []  # missing or mistyped: already reported by validation
        directory = self._resolve(doc, ("cases_path",), raw)
        if directory is None:
            return []
        shown = self._display(directory)
        if not directory.is_dir():
            problem = "is not a directory" if directory.exists() else "does not exist"
            message = (
                f"cases_path '{excerpt(raw, PATH_CHARS)}' {problem} ({excerpt(shown, PATH_CHARS)})"
            )
            self._add(doc.error(message, ("cases_path",)))
            return []
        try:
            files = sorted(
                (p for p in directory.iterdir() if p.suffix in CASE_FILE_SUFFIXES and p.is_file()),
                key=lambda p: p.name,
            )
        except OSError as exc:
            problem = f"cannot be read: {exc.strerror or exc}"
            message = (
                f"cases_path '{excerpt(raw, PATH_CHARS)}' {problem} ({excerpt(shown, PATH_CHARS)})"
            )
            self._add(doc.error(message, ("cases_path",)))
            return []
        if not files:
            self._add(
                doc.error(f"no case files (*.yaml, *.yml, *.json) in {shown}", ("cases_path",))
            )
        inside = [file for file in files if self._paths.is_inside(file)]
        for file in files:
            if file not in inside:
                message = (
                    f"case file '{self._display(file)}' is a symbolic link that resolves outside "
                    f"{self._paths.boundary} ({self._paths.root}); a suite reads no file "
                    "outside it: copy the case in instead"
                )
                self._add(doc.error(message, ("cases_path",), "cases_path"))
        return inside

    def _resolve(self, doc: LoadedYaml, at: tuple[PathElement, ...], raw: str) -> Path | None:
        try:
            return self._paths.resolve(raw)
        except PathEscapeError as exc:
            self._add(doc.error(f"'{at[-1]}': {exc}", at, str(at[-1])))
            return None

    def _optional_path(self, doc: LoadedYaml, key: str) -> Path | None:
        raw = doc.data.get(key)
        return self._resolve(doc, (key,), raw) if isinstance(raw, str) else None

    # -- suite checks -------------------------------------------------------------------------

    def _check_suite_name(self, doc: LoadedYaml) -> None:
        # The suite name becomes an output directory name: it must not walk out of it.
        name = doc.data.get("suite_name")
        if not isinstance(name, str):
            return
        if not name.strip() or name in (".", "..") or "/" in name or "\\" in name:
            message = (
                f"'suite_name' must be a plain name usable as a directory, found {excerpt(name)!r}"
            )
            self._add(doc.error(message, ("suite_name",), "suite_name"))

    def _check_model_gateway(self, doc: LoadedYaml) -> None:
        """The gateway's own rules compile and its price table exists (read when the run starts)."""
        gateway = doc.data.get("model_gateway")
        if not isinstance(gateway, dict):
            return
        self._check_normalization(doc, gateway.get("normalization"), ("model_gateway",))
        prices = gateway.get("prices")
        if not isinstance(prices, str):
            return
        at: tuple[PathElement, ...] = ("model_gateway", "prices")
        resolved = self._resolve(doc, at, prices)
        if resolved is not None and not resolved.is_file():
            self._add(
                doc.error(f"'prices': file not found: {excerpt(prices, PATH_CHARS)}", at, "prices")
            )

    def _check_tool_module(self, doc: LoadedYaml) -> None:
        name = doc.data.get("tool_module")
        outside = self._paths.module_outside(name) if isinstance(name, str) else None
        if outside is not None:
            message = (
                f"'tool_module': '{self._display(outside)}' is a symbolic link that resolves "
                f"outside {self._paths.boundary} ({self._paths.root}); trialrun imports no "
                "tool module from outside it"
            )
            self._add(doc.error(message, ("tool_module",), "tool_module"))

    def _check_normalization(
        self, doc: LoadedYaml, raw: Any, within: tuple[PathElement, ...] = ()
    ) -> None:
        """Regex patterns and flags of replace_text must compile (validation checks the shape)."""
        rules = raw.get("replace_text") if isinstance(raw, dict) else None
        if not isinstance(rules, list):
            return
        for index, rule in enumerate(rules):
            if not isinstance(rule, dict):
                continue
            at = (*within, "normalization", "replace_text", index)
            flags = rule.get("flags", "")
            bits = 0
            if isinstance(flags, str):
                unknown = sorted(set(flags) - set(REGEX_FLAGS))
                if unknown:
                    message = f"'flags' may only combine i, m and s; found {excerpt(flags)!r}"
                    self._add(doc.error(message, (*at, "flags"), "flags"))
                bits = sum(REGEX_FLAGS[f] for f in set(flags) & set(REGEX_FLAGS))
            pattern = rule.get("pattern")
            if isinstance(pattern, str):
                try:
                    re.compile(pattern, bits)
                except re.error as exc:
                    where = f" at position {exc.pos}" if exc.pos is not None else ""
                    message = f"invalid regular expression in 'pattern': {exc.msg}{where}"
                    self._add(doc.error(message, (*at, "pattern"), "pattern"))

    def _compile_assertions(self, doc: LoadedYaml) -> list[CompiledAssertion]:
        compiled, errors = self._assertions.compile_all(doc, doc.data.get("assertions"))
        for error in errors:
            self._add(error)
        return compiled

    # -- cases --------------------------------------------------------------------------------

    def _load_case(self, file: Path) -> _CaseDraft | None:
        doc = self._read(file)
        if doc is None:
            return None
        draft = _CaseDraft(doc=doc, file=file)
        draft.config = self._validate(doc, CaseConfig, "case")
        draft.assertions = self._compile_assertions(doc)
        self._check_normalization(doc, doc.data.get("normalization"))
        cassette = doc.data.get("cassette")
        if isinstance(cassette, str):
            draft.cassette_path = self._resolve(doc, ("cassette",), cassette)
        task_input = doc.data.get("input")
        if isinstance(task_input, dict):
            # Top-level keys are validation's business; values at any depth are checked here.
            for key, value in task_input.items():
                problem = first_non_json(value, ("input", key)) if isinstance(key, str) else None
                if problem is not None:
                    at, message = problem
                    self._add(doc.error(message, at, "input"))
                    break
        return draft

    def _check_duplicate_ids(self, drafts: Sequence[_CaseDraft | None]) -> None:
        first_seen: dict[str, str] = {}
        for draft in drafts:
            case_id = draft.doc.data.get("id") if draft else None
            if draft is None or not isinstance(case_id, str):
                continue
            where = f"{draft.doc.file}:{draft.doc.line_of(('id',))}"
            if case_id in first_seen:
                message = (
                    f"duplicate case id '{excerpt(case_id, _ID_CHARS)}' (first defined at "
                    f"{first_seen[case_id]})"
                )
                self._add(draft.doc.error(message, ("id",), "id"))
            else:
                first_seen[case_id] = where

    def _select(
        self, drafts: Sequence[_CaseDraft | None], case_ids: Sequence[str]
    ) -> list[_CaseDraft]:
        present = [d for d in drafts if d is not None]
        if not case_ids:
            return present
        known = [d.config.id for d in present if d.config is not None]
        for wanted in dict.fromkeys(case_ids):
            if wanted not in known:
                listed = ", ".join(known[:_LISTED_IDS])
                if len(known) > _LISTED_IDS:
                    listed += f", ... ({len(known) - _LISTED_IDS} more)"
                hint = did_you_mean(wanted, known)
                self._add(ConfigError(f"unknown case id '{wanted}'{hint}; known ids: {listed}"))
        wanted_ids = set(case_ids)
        return [d for d in present if d.config is not None and d.config.id in wanted_ids]

    def _build_case(
        self, draft: _CaseDraft, suite: SuiteConfig, suite_assertions: list[CompiledAssertion]
    ) -> Case:
        # Only called when loading found no error, so every part of the draft is present.
        assert draft.config is not None and draft.cassette_path is not None
        config = draft.config
        return Case(
            config=config,
            file=draft.file,
            cassette_path=draft.cassette_path,
            assertions=[*suite_assertions, *(draft.assertions or [])],
            budgets=(suite.budgets or Budgets()).merged(config.budgets),
            normalization=(suite.normalization or Normalization()).merged(config.normalization),
        )
