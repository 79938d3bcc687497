"""Compile the ``assertions:`` entries of suite and case files through the assertion registry.

Every entry is checked at load time (a mapping with a known ``type``, parameters the type accepts,
schema files that exist and are valid), so a typo fails the load with its line instead of failing
every case at run time as it did in RunLedger.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trialrun.base import assertion_api
from trialrun.base.foreign import FOREIGN_FAILURES, failure_text
from trialrun.base.suggest import did_you_mean
from trialrun.config.messages import describe_value
from trialrun.config.paths import PathEscapeError, SuitePaths
from trialrun.config.yamlload import LoadedYaml, PathElement
from trialrun.errors import ConfigError

if TYPE_CHECKING:
    from trialrun.base.assertion_api import CompiledAssertion


class AssertionCompiler:
    """Compiles the assertions of one suite's files; identical entries are compiled once.

    Sharing compiled assertions between cases is safe because they are immutable checks; it
    matters for ``json_schema``, whose compilation reads and validates the schema file.
    """

    def __init__(self, paths: SuitePaths) -> None:
        self._registry = assertion_api
        self._paths = paths
        self._compiled: dict[str, CompiledAssertion] = {}

    def compile_all(
        self, doc: LoadedYaml, raw: Any
    ) -> tuple[list[CompiledAssertion], list[ConfigError]]:
        """The compiled ``raw`` list (found at ``assertions`` in ``doc``) and every problem."""
        if not isinstance(raw, list):
            return [], []  # null, or mistyped and already reported by validation
        compiled: list[CompiledAssertion] = []
        errors: list[ConfigError] = []
        for index, entry in enumerate(raw):
            try:
                compiled.append(self._compile_one(doc, ("assertions", index), entry))
            except ConfigError as exc:
                errors.append(exc)
        return compiled, errors

    def _compile_one(
        self, doc: LoadedYaml, at: tuple[PathElement, ...], entry: Any
    ) -> CompiledAssertion:
        if not isinstance(entry, dict):
            found = describe_value(entry)
            raise doc.error(f"each assertion must be a mapping with a 'type', found {found}", at)
        kind = entry.get("type")
        if not isinstance(kind, str):
            problem = "has no 'type'" if kind is None else f"'type' is {describe_value(kind)}"
            # Listing every name lists the plugins' entry points: only for this message.
            names = self._registry.assertion_type_names()
            message = f"assertion {problem}; expected one of: {', '.join(names)}"
            raise doc.error(message, (*at, "type") if kind is not None else at, "type")
        try:
            assertion_type = self._registry.get_assertion_type(kind)
        except ConfigError as exc:  # a plugin providing this type failed to load
            raise doc.error(exc.message, (*at, "type"), "type") from None
        if assertion_type is None:
            names = self._registry.assertion_type_names()
            message = (
                f"unknown assertion type '{kind}'{did_you_mean(kind, names)}; "
                f"known types: {', '.join(names)}"
            )
            raise doc.error(message, (*at, "type"), "type")
        params = {key: value for key, value in entry.items() if key != "type"}
        cache_key = _cache_key(kind, params)
        if cache_key is not None and cache_key in self._compiled:
            return self._compiled[cache_key]
        context = self._registry.CompileContext(resolve_path=self._path_resolver(params))
        try:
            compiled = assertion_type.compile(params, context)
        except self._registry.AssertionParamError as exc:
            key = exc.key if isinstance(exc.key, str) else None
            # Built-in messages already name the type ("missing parameter 'fields' for ...").
            message = str(exc) if kind in str(exc) else f"{kind} assertion: {exc}"
            raise doc.error(message, (*at, key) if key else at, key) from None
        except FOREIGN_FAILURES as exc:  # a plugin's own failure, not an AssertionParamError
            message = f"assertion type '{kind}' failed to compile its parameters: "
            raise doc.error(message + failure_text(exc), at) from None
        if cache_key is not None:
            self._compiled[cache_key] = compiled
        return compiled

    def _path_resolver(self, params: dict[str, Any]) -> Callable[[str], Path]:
        def resolve_path(raw: str) -> Path:
            try:
                return self._paths.resolve(raw)
            except PathEscapeError as exc:
                # Point the error at the parameter that holds this path.
                key = next((k for k, v in params.items() if v == raw), None)
                raise self._registry.AssertionParamError(str(exc), key=key) from None

        return resolve_path


def _cache_key(kind: str, params: dict[str, Any]) -> str | None:
    try:
        return kind + "\0" + json.dumps(params, sort_keys=True)
    except (TypeError, ValueError):  # non-JSON params (a YAML date, int keys): just don't cache
        return None
