"""The assertion registry: how a name in ``assertions: [{type: ...}]`` becomes a check.

An assertion type is any object with a ``name`` and a ``compile(params, ctx)`` method that
validates its parameters once, at load time, and returns a ``CompiledAssertion`` whose
``check(subject)`` runs after every case. Types are found through the entry-point group
``trialrun.assertions``; the built-in ones are declared there too, so they use exactly the
extension API a third-party package gets. ``register()`` adds a type programmatically.

Listing entry points imports ``importlib.metadata`` and reads the metadata of every installed
distribution (the more packages, the longer), which a suite that only uses built-in types
should not pay before its first agent starts. So the built-ins are also named in
``BUILTIN_TYPES`` and loaded from there; entry points are listed only for a name that is not
built in (or to list every name, as an "unknown type" error does). A built-in name is therefore
reserved: a plugin's entry point of the same name is never used.

Each entry point is imported only when its type is first asked for, then cached: a broken plugin
fails the suites that use it, with an error naming the entry point, and nothing else. How an
entry point is found and loaded is shared with the incident importers (``base.plugins``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, cast

from trialrun.base.plugins import EntryPointLike, Registry, installed_entry_points
from trialrun.base.redact import redact_text
from trialrun.base.results import CheckFailure, JsonObject, ToolCall
from trialrun.base.suggest import did_you_mean
from trialrun.errors import ConfigError

ENTRY_POINT_GROUP = "trialrun.assertions"

BUILTIN_TYPES: Mapping[str, str] = {
    "call_order": "trialrun.checks.builtin:CALL_ORDER",
    "json_schema": "trialrun.checks.builtin:JSON_SCHEMA",
    "must_call": "trialrun.checks.builtin:MUST_CALL",
    "must_not_call": "trialrun.checks.builtin:MUST_NOT_CALL",
    "required_fields": "trialrun.checks.builtin:REQUIRED_FIELDS",
    "tool_args": "trialrun.checks.builtin:TOOL_ARGS",
}
"""The built-in types, exactly as pyproject.toml declares them in ``trialrun.assertions``
(a test holds the two equal). A string, not an import: ``checks`` is a higher layer."""


class AssertionParamError(ValueError):
    """An assertion's parameters are invalid; ``key`` names the offending parameter if any."""

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.key = key


class AssertionPluginError(ConfigError):
    """An assertion type provided by an entry point cannot be loaded or is not one."""


@dataclass(frozen=True)
class CompileContext:
    """What an assertion type may use while compiling its parameters."""

    resolve_path: Callable[[str], Path]
    """Suite-relative path resolution; raises AssertionParamError if the path escapes."""


@dataclass(frozen=True)
class CheckSubject:
    """What an assertion looks at: the normalized final output and the tool-call trace."""

    output: JsonObject
    tool_calls: Sequence[ToolCall]


class CompiledAssertion(Protocol):
    """One configured assertion, ready to check any number of runs."""

    @property
    def type(self) -> str: ...

    def check(self, subject: CheckSubject) -> list[CheckFailure]: ...


class AssertionType(Protocol):
    """A kind of assertion (``json_schema``, ``must_call``, a plugin's own ...)."""

    @property
    def name(self) -> str: ...

    def compile(self, params: Mapping[str, Any], ctx: CompileContext) -> CompiledAssertion: ...


@dataclass(frozen=True)
class Param:
    """One parameter an assertion type accepts, for ``check_params``."""

    name: str
    description: str
    """What a valid value is, completing "must be ...": ``"a list of strings"``."""
    accepts: Callable[[Any], bool]
    required: bool = True


def is_string(value: Any) -> bool:
    return isinstance(value, str)


def is_string_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def is_object(value: Any) -> bool:
    return isinstance(value, Mapping)


def check_params(type_name: str, params: Mapping[str, Any], spec: Sequence[Param]) -> None:
    """Refuse unknown (with a did-you-mean), missing and mistyped parameters, in that order."""
    known = [param.name for param in spec]
    for key in params:
        if key not in known:
            hint = did_you_mean(str(key), known) or f" (valid parameters: {', '.join(known)})"
            raise AssertionParamError(f"unknown parameter '{key}' for {type_name}{hint}", key=key)
    for param in spec:
        if param.name not in params:
            if param.required:
                raise AssertionParamError(
                    f"missing parameter '{param.name}' for {type_name} "
                    f"(expected {param.description})",
                    key=param.name,
                )
            continue
        value = params[param.name]
        if not param.accepts(value):
            raise AssertionParamError(
                f"parameter '{param.name}' of {type_name} must be {param.description}, "
                f"found {describe_value(value)}",
                key=param.name,
            )


def describe_value(value: Any) -> str:
    """A short "found ..." text: the JSON type and a cut-down rendering of the value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    kinds = {int: "integer", float: "number", str: "string", list: "list"}
    kind = kinds.get(type(value)) or ("mapping" if is_object(value) else type(value).__name__)
    text = redact_text(repr(value))
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{kind} {text}"


def discover_entry_points() -> list[EntryPointLike]:
    """Every entry point of the ``trialrun.assertions`` group in the installed distributions."""
    return installed_entry_points(ENTRY_POINT_GROUP)


class AssertionRegistry(Registry[AssertionType]):
    """Assertion types by name: programmatic registrations, built-ins, then entry points.

    ``builtins`` (name -> ``module:attribute``) are loaded without listing the entry points;
    the process-wide registry gets ``BUILTIN_TYPES``, a bare one (tests) none.
    """

    def __init__(
        self,
        discover: Callable[[], Iterable[EntryPointLike]] = discover_entry_points,
        builtins: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(
            "assertion type",
            ENTRY_POINT_GROUP,
            AssertionPluginError,
            _require_assertion_type,
            builtins=builtins,
            discover=discover,
        )

    def names(self) -> list[str]:
        """Every known type name, sorted (entry points are listed, not imported)."""
        return sorted(super().names())


def _require_assertion_type(candidate: object, where: str) -> AssertionType:
    name = getattr(candidate, "name", None)
    if not isinstance(name, str) or not name or not callable(getattr(candidate, "compile", None)):
        raise AssertionPluginError(
            f"{where} is not an assertion type: expected an object with a string 'name' and a "
            f"compile(params, ctx) method, found {type(candidate).__name__}"
        )
    return cast(AssertionType, candidate)


_DEFAULT_REGISTRY = AssertionRegistry(builtins=BUILTIN_TYPES)


def default_registry() -> AssertionRegistry:
    """The process-wide registry behind the module-level functions."""
    return _DEFAULT_REGISTRY


def get_assertion_type(name: str) -> AssertionType | None:
    """The assertion type called ``name`` or None; AssertionPluginError if it fails to load."""
    return _DEFAULT_REGISTRY.get(name)


def assertion_type_names() -> list[str]:
    """Every assertion type name known to the process-wide registry, sorted."""
    return _DEFAULT_REGISTRY.names()


def register(assertion_type: AssertionType, *, replace: bool = False) -> None:
    """Make ``assertion_type`` available by name to every suite loaded afterwards."""
    _DEFAULT_REGISTRY.register(assertion_type, replace=replace)
