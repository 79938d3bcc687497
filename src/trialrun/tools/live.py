"""Live tools: Python functions from the suite's ``tool_module``, run with a timeout per call.

RunLedger ran each tool on the runner thread with no timeout and crashed the whole run on a
result json could not encode. Here a call runs in its own daemon thread (a hung tool can neither
block the agent's deadlines nor keep the process alive at exit), coroutine functions are awaited,
and every way a tool can misbehave becomes an ``ok: false`` answer the agent and the checks see.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trialrun.base.foreign import FOREIGN_FAILURES
from trialrun.base.jsonvalue import json_problem
from trialrun.base.quoting import exception_text
from trialrun.base.results import JsonObject
from trialrun.errors import ConfigError, TrialrunError
from trialrun.tools.base import LocalTool, ToolOutcome, normalized_outcome
from trialrun.tools.contract import call_problem, keyword_hint, wrapper_advice

if TYPE_CHECKING:
    from trialrun.config.models import Normalization

ToolFn = Callable[[JsonObject], Any]
"""A tool: takes the call's args, returns a JSON value (or an awaitable of one)."""


class ToolModuleError(ConfigError):
    """The suite's ``tool_module`` cannot be imported or does not define usable ``TOOLS``."""


class MissingToolError(TrialrunError):
    """A tool the suite names has no implementation (the case fails as ``tool_registry_error``)."""

    def __init__(self, missing: Iterable[str], available: Iterable[str]) -> None:
        self.missing = sorted(missing)
        self.available = sorted(available)
        super().__init__(
            f"Tools not found in registry: {', '.join(self.missing)} "
            f"(implemented: {', '.join(self.available) or '<none>'})"
        )


def mock_search_docs(args: JsonObject) -> JsonObject:
    """RunLedger's built-in fake search, answer for answer: two fixed hits naming the query.

    The query is ``q`` stripped, or ``unknown`` when that leaves nothing. Recording a RunLedger
    suite with this built-in writes the cassette RunLedger would.
    """
    query = str(args.get("q", "")).strip() or "unknown"
    return {
        "hits": [
            {"title": "Reset password", "snippet": f"Results for {query}: reset password"},
            {"title": "Account help", "snippet": f"Results for {query}: account access"},
        ]
    }


def builtin_tools() -> dict[str, ToolFn]:
    """Tools every suite has unless its ``tool_module`` defines the same names."""
    return {"search_docs": mock_search_docs, "mock_search_docs": mock_search_docs}


def load_tool_module(module_name: str, search_dir: Path) -> dict[str, ToolFn]:
    """Import ``module_name`` from ``search_dir`` and return the built-ins overlaid with its TOOLS.

    ``search_dir`` (the suite directory) goes first on ``sys.path`` and stays there, because a tool
    module may import its siblings lazily when a tool runs; RunLedger needed ``PYTHONPATH`` for
    this. Python caches modules by name, so two suites with a same-named tool module in one
    process share the first one imported.
    """
    directory = str(search_dir.resolve())
    if directory not in sys.path:
        sys.path.insert(0, directory)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name or module_name.startswith(f"{exc.name}."):
            raise ToolModuleError(
                f"tool_module '{module_name}' not found: expected {module_name}.py or a package "
                f"in {directory} or on sys.path",
                key="tool_module",
            ) from None
        raise ToolModuleError(
            f"tool_module '{module_name}' failed to import: {exc}", key="tool_module"
        ) from None
    except FOREIGN_FAILURES as exc:
        said = exception_text(exc)
        raise ToolModuleError(
            f"tool_module '{module_name}' raised {type(exc).__name__} while importing"
            + (f": {said}" if said else ""),
            key="tool_module",
        ) from None
    if not hasattr(module, "TOOLS"):
        raise ToolModuleError(
            f"tool_module '{module_name}' must define TOOLS, a dict of tool name -> function",
            key="tool_module",
        )
    declared = module.TOOLS
    if not isinstance(declared, Mapping):
        raise ToolModuleError(
            f"TOOLS in tool_module '{module_name}' must be a dict of tool name -> function, "
            f"found {type(declared).__name__}",
            key="tool_module",
        )
    tools = builtin_tools()
    for name, tool in declared.items():
        tools[_tool_name(name, module_name)] = _as_function(name, tool, module_name)
    return tools


def select_tools(available: Mapping[str, ToolFn], registry: Iterable[str]) -> dict[str, ToolFn]:
    """Keep the tools the suite's ``tool_registry`` names; raise if any has no implementation."""
    names = list(registry)
    missing = [name for name in names if name not in available]
    if missing:
        raise MissingToolError(missing, available)
    return {name: available[name] for name in names}


class LiveBackend:
    """Runs real tool functions; every failure becomes an ``ok: false`` outcome, never a crash."""

    def __init__(
        self,
        tools: Mapping[str, ToolFn],
        *,
        timeout_s: float,
        normalization: Normalization | None = None,
    ) -> None:
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s}")
        self._tools = dict(tools)
        self._timeout_s = timeout_s
        self._normalization = normalization

    async def call(
        self, name: str, args: JsonObject, local: LocalTool | None = None
    ) -> ToolOutcome:
        if local is not None:
            # The agent runs its own tool; the session bounds the wait with the agent's deadlines.
            reported = await local()
            return self._outcome(reported.ok, reported.result, reported.error)
        tool = self._tools.get(name)
        if tool is None:
            raise MissingToolError([name], self._tools)
        deadline = asyncio.timeout(self._timeout_s)
        try:
            async with deadline:
                value = await _invoke(tool, args)
        except TimeoutError as exc:
            # A tool's own timeout (a socket read, say) is its error, not our deadline.
            if not deadline.expired():
                return self._outcome(False, None, _raised(name, exc))
            timeout_ms = round(self._timeout_s * 1000)
            return self._outcome(False, None, f"tool '{name}' timed out after {timeout_ms} ms")
        except FOREIGN_FAILURES as exc:
            hint = keyword_hint(name, tool, args)
            said = _raised(name, exc) + (f" ({hint})" if hint else "")
            return self._outcome(False, None, said)
        try:
            problem = json_problem(value)
            result = None if problem is not None else _json_copy(value)
        except FOREIGN_FAILURES as exc:  # a container of the tool's own whose methods raise
            problem = f"reading it raised {type(exc).__name__}: {_described(exc)}"
        if problem is not None:
            return self._outcome(
                False, None, f"tool '{name}' returned a value that is not JSON: {problem}"
            )
        return self._outcome(True, result, None)

    def close(self, *, clean: bool) -> None:
        """Live tools hold no per-case resources."""

    def unused(self) -> int:
        return 0

    def _outcome(self, ok: bool, result: Any, error: str | None) -> ToolOutcome:
        return normalized_outcome(ok, result, error, self._normalization)


def _raised(name: str, exc: BaseException) -> str:
    """``tool 'create_issue' raised KeyError: 'id'``: which tool, what it raised, what it said."""
    said = exception_text(exc)
    return f"tool '{name}' raised {type(exc).__name__}" + (f": {said}" if said else "")


def _described(exc: BaseException) -> str:
    """What a tool's exception says; its type's name when it says nothing, or cannot."""
    return exception_text(exc) or type(exc).__name__


def _json_copy(value: Any) -> Any:
    """A copy the tool cannot mutate later (tuples become lists, as json would write them)."""
    if isinstance(value, list | tuple):
        return [_json_copy(item) for item in value]
    if isinstance(value, dict):
        return {key: _json_copy(item) for key, item in value.items()}
    return value


async def _invoke(tool: ToolFn, args: JsonObject) -> Any:
    if _is_coroutine_function(tool):
        return await tool(args)
    value = await _run_in_daemon_thread(tool, args)
    if inspect.isawaitable(value):
        return await value
    return value


def _is_coroutine_function(tool: Any) -> bool:
    if inspect.iscoroutinefunction(tool):
        return True
    call = getattr(tool, "__call__", None)  # noqa: B004 - a callable object's async __call__
    return inspect.iscoroutinefunction(call)


async def _run_in_daemon_thread(tool: ToolFn, args: JsonObject) -> Any:
    """Run a blocking tool off the event loop in a thread nobody has to join.

    ``asyncio.to_thread`` would put a hung tool in the default executor, whose threads are joined
    when the loop and the interpreter shut down: one stuck tool would hang the whole run's exit.
    """
    loop = asyncio.get_running_loop()
    done: asyncio.Future[Any] = loop.create_future()

    def settle(value: Any, error: BaseException | None) -> None:
        if done.done():  # the call already timed out
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(value)

    def work() -> None:
        value: Any = None
        error: BaseException | None = None
        try:
            value = tool(args)
        except BaseException as exc:  # SystemExit in a tool must not vanish with its thread
            error = exc if isinstance(exc, Exception) else RuntimeError(repr(exc))
        # The loop may have closed while the tool was still running: nobody waits any more.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, value, error)

    threading.Thread(target=work, name="trialrun-tool", daemon=True).start()
    return await done


def _tool_name(name: Any, module_name: str) -> str:
    if not isinstance(name, str):
        raise ToolModuleError(
            f"TOOLS in tool_module '{module_name}' must have string keys, found "
            f"{type(name).__name__} {name!r}",
            key="tool_module",
        )
    return name


def _as_function(name: Any, tool: Any, module_name: str) -> ToolFn:
    if inspect.isclass(tool):
        # Calling the class would build an instance, not answer the call.
        raise ToolModuleError(
            f"TOOLS['{name}'] in tool_module '{module_name}' is the class {tool.__name__}; "
            f"expected an instance of it or a function of args",
            key="tool_module",
        )
    method = getattr(tool, "call", None)
    if callable(method):
        bound: ToolFn = method
        return _callable_with_args(name, bound, module_name)
    if callable(tool):
        function: ToolFn = tool
        return _callable_with_args(name, function, module_name)
    raise ToolModuleError(
        f"TOOLS['{name}'] in tool_module '{module_name}' must be a function of args or an object "
        f"with a .call(args) method, found {type(tool).__name__}",
        key="tool_module",
    )


def _callable_with_args(name: str, tool: ToolFn, module_name: str) -> ToolFn:
    """``tool`` itself, once it is known to accept one positional argument."""
    problem = call_problem(tool)
    if problem is not None:
        raise ToolModuleError(
            f"TOOLS['{name}'] in tool_module '{module_name}' cannot be called with one argument "
            f"({problem}); {wrapper_advice(name)}",
            key="tool_module",
        )
    return tool
