"""``@tool``: a plain Python function (sync or async) whose calls go through the trialrun runner.

Outside the runner the function runs as is; the only cost is one environment lookup per call.
Under the runner each call becomes a protocol tool call named after the function, with the
arguments bound to parameter names (defaults filled in, so ``search("x")`` and
``search("x", limit=10)`` are the same call when 10 is the default). The caller then gets the
runner's answer, converted back to the function's return annotation when it has one (a pydantic
model, a dataclass, a datetime...), so agent code sees the same types in record and replay.

``self``/``cls`` and the parameters named in ``exclude`` (a framework's context object, say) are
not part of the recorded arguments: they are not data and would never match on replay.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable, Collection
from typing import Any, ParamSpec, TypeVar, cast, overload

from trialrun.agent.client import connect

P = ParamSpec("P")
R = TypeVar("R")

_UNSET: Any = object()
# Return annotations the runner's JSON answer already satisfies: no conversion needed.
_JSON_NATIVE: frozenset[Any] = frozenset(
    {Any, object, dict, list, str, int, float, bool, type(None), None}
)


@overload
def tool(fn: Callable[P, R], /) -> Callable[P, R]: ...


@overload
def tool(
    *, name: str | None = None, exclude: Collection[str] = ()
) -> Callable[[Callable[P, R]], Callable[P, R]]: ...


def tool(
    fn: Callable[P, R] | None = None,
    /,
    *,
    name: str | None = None,
    exclude: Collection[str] = (),
) -> Callable[P, R] | Callable[[Callable[P, R]], Callable[P, R]]:
    """Route the calls of ``fn`` through the trialrun runner (``@tool`` or ``@tool(name=...)``).

    ``name``: the tool name the suite and the cassette use (default: the function's name).
    ``exclude``: parameters left out of the recorded arguments.
    """
    if isinstance(exclude, str):
        raise TypeError("exclude must be a collection of parameter names, not one string")

    def decorate(function: Callable[P, R]) -> Callable[P, R]:
        return _decorate(function, name, frozenset(exclude))

    return decorate if fn is None else decorate(fn)


def _decorate(fn: Callable[P, R], name: str | None, exclude: frozenset[str]) -> Callable[P, R]:
    tool_name = name or getattr(fn, "__name__", None)
    if not tool_name or tool_name == "<lambda>":
        raise TypeError("@tool needs a name for a callable without one: use @tool(name=...)")
    spec = _ToolSpec(fn, tool_name, exclude)

    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def call_async(*args: P.args, **kwargs: P.kwargs) -> Any:
            session = connect()
            if session is None:
                return await cast(Any, fn)(*args, **kwargs)
            result = await session.acall_tool(
                spec.name, spec.arguments(args, kwargs), lambda: cast(Any, fn)(*args, **kwargs)
            )
            return spec.rebuild(result)

        return cast(Callable[P, R], call_async)

    @functools.wraps(fn)
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        session = connect()
        if session is None:
            return fn(*args, **kwargs)
        result = session.call_tool(
            spec.name, spec.arguments(args, kwargs), lambda: fn(*args, **kwargs)
        )
        return cast(R, spec.rebuild(result))

    return call


class _ToolSpec:
    """What the decorator needs to know about the function, worked out on the first call."""

    def __init__(self, fn: Callable[..., Any], name: str, exclude: frozenset[str]) -> None:
        self.fn = fn
        self.name = name
        self.exclude = exclude
        self._signature: inspect.Signature | None = None
        self._adapter: Any = _UNSET

    def arguments(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """The call's arguments by parameter name (raises the function's own ``TypeError``)."""
        if self._signature is None:
            self._signature = inspect.signature(self.fn)
        bound = self._signature.bind(*args, **kwargs)
        bound.apply_defaults()
        named: dict[str, Any] = {}
        for index, (param_name, value) in enumerate(bound.arguments.items()):
            if param_name in self.exclude or (index == 0 and param_name in ("self", "cls")):
                continue
            kind = self._signature.parameters[param_name].kind
            if kind is inspect.Parameter.VAR_KEYWORD:
                named.update({k: v for k, v in value.items() if k not in self.exclude})
            elif kind is inspect.Parameter.VAR_POSITIONAL:
                named[param_name] = list(value)
            else:
                named[param_name] = value
        return named

    def rebuild(self, result: Any) -> Any:
        """The runner's JSON answer as the function's declared return type."""
        adapter = self._return_adapter()
        if adapter is None:
            return result
        try:
            return adapter.validate_python(result)
        except Exception as exc:
            raise TypeError(
                f"tool {self.name!r}: the runner's result does not match the function's return "
                f"annotation: {exc}"
            ) from None

    def _return_adapter(self) -> Any:
        if self._adapter is _UNSET:
            self._adapter = _adapter_for(self.fn)
        return self._adapter


def _adapter_for(fn: Callable[..., Any]) -> Any:
    try:
        annotation = typing.get_type_hints(fn).get("return", _UNSET)
    except Exception:  # an unresolvable forward reference: hand back the JSON as it is
        return None
    if annotation is _UNSET or _json_native(annotation):
        return None
    try:
        from pydantic import TypeAdapter

        return TypeAdapter(annotation)
    except Exception:  # no pydantic, or a type pydantic cannot build: JSON as it is
        return None


def _json_native(annotation: Any) -> bool:
    try:
        return annotation in _JSON_NATIVE
    except TypeError:  # an unhashable annotation object
        return False
