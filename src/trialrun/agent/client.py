"""An agent's session with the trialrun runner: the task, its tool calls, logs, usage, the output.

``connect()`` opens the channel named by ``TRIALRUN_FD`` once per process and reads the
``task_start`` message; outside the runner it returns None and costs one environment lookup.

A tool call is one round trip, and the runner answers one call at a time:

* the agent sends ``tool_call`` (``local: true`` when it holds the real implementation);
* in replay the runner answers ``tool_result`` from the cassette at once;
* in record/live it answers ``tool_run``; the agent runs the real function, sends
  ``tool_report`` with what it returned (as JSON data), and gets the usual ``tool_result``.

The agent always continues with the ``tool_result``, never with the value its own function
returned, so record and replay hand the agent the same data. Round trips are serialized by a
``CallLock``; a coroutine never blocks its event loop (the socket I/O runs in a worker thread and
the real async function runs on the caller's loop). ``log``, ``usage``, ``final_output`` and
``task_error`` sent while a round trip is in flight are held back and sent right after it, so the
runner only ever sees complete round trips.

A tool that calls another tool while it runs (``@tool`` functions calling each other) is one
call: the inner call runs directly, because replaying the outer call never runs its body.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import itertools
import os
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from trialrun.agent.calllock import CallLock
from trialrun.agent.channel import ENV_FD, Channel, ChannelError, encode_line
from trialrun.agent.jsonable import NotJsonError, to_json_data
from trialrun.base.reported import as_cost_usd, as_count

if TYPE_CHECKING:
    from concurrent.futures import Future, ThreadPoolExecutor

ENV_MODE = "TRIALRUN_MODE"
"""Environment variable with the run's mode: ``replay``, ``record`` or ``live``."""

_RUNNING_TOOL: contextvars.ContextVar[tuple[Session, str] | None] = contextvars.ContextVar(
    "trialrun_running_tool", default=None
)
"""The session and tool whose real implementation runs in this context (nested-call detection)."""


class ToolCallError(Exception):
    """The runner answered a tool call with ``ok: false``; ``str()`` is the tool's error.

    In record mode, when the real function raised, that exception is the ``__cause__``.
    """

    def __init__(self, tool: str, call_id: str, error: str) -> None:
        self.tool = tool
        self.call_id = call_id
        self.error = error
        super().__init__(error)


@dataclass(frozen=True, slots=True)
class _Call:
    name: str
    call_id: str
    line: bytes
    """The encoded ``tool_call`` message."""


@dataclass(frozen=True, slots=True)
class _Reply:
    """The runner's answer: ``tool_run`` (run it here) or the final ``tool_result``."""

    run_here: bool
    ok: bool = False
    result: Any = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class _Report:
    """What the real function did, before it is converted and encoded as ``tool_report``."""

    ok: bool
    value: Any = None
    error: str | None = None


@dataclass(slots=True)
class _Ownership:
    """Whether a cancelled coroutine handed the call lock to a background completion."""

    handed_off: bool = False


class Session:
    """The agent's side of one case. Create it with ``connect()``; thread-safe."""

    task_id: str
    """The case id from ``task_start``."""
    input: Any
    """The case input from ``task_start`` (usually a JSON object)."""
    mode: str | None
    """``replay``, ``record`` or ``live`` (from ``TRIALRUN_MODE``), None when not given."""

    def __init__(self, channel: Channel, *, task_id: str, task_input: Any, mode: str | None):
        self.task_id = task_id
        self.input = task_input
        self.mode = mode
        self._channel = channel
        self._lock = CallLock()
        self._state = threading.Lock()  # guards the fields below and one-way sends
        self._in_flight = False
        self._deferred: list[bytes] = []
        self._stale: set[str] = set()
        self._ids = itertools.count(1)
        self._executor: ThreadPoolExecutor | None = None

    @classmethod
    def open(cls, channel: Channel, *, mode: str | None = None) -> Session:
        """Read the runner's ``task_start`` from ``channel`` and start the session."""
        first = channel.receive()
        if first["type"] != "task_start":
            raise ChannelError(
                f"expected task_start as the runner's first message, found {first['type']!r}"
            )
        task_id = first.get("task_id")
        if not isinstance(task_id, str):
            raise ChannelError("the runner's task_start has no string task_id")
        return cls(channel, task_id=task_id, task_input=first.get("input"), mode=mode)

    # -- tool calls ----------------------------------------------------------------------------

    def call_tool(
        self,
        name: str,
        args: Mapping[str, Any],
        run: Callable[[], Any] | None = None,
        *,
        queued: Callable[[], None] | None = None,
    ) -> Any:
        """Call tool ``name`` through the runner and return the result it answers with.

        ``run`` is the real implementation, called (in this thread) when the runner asks for it.
        Raises ``ToolCallError`` when the answer is ``ok: false`` and ``ChannelError`` when the
        runner is gone. Use ``acall_tool`` from a coroutine. ``queued`` (for adapters that order
        concurrent calls) is called, and must not raise, once this call holds its place in the
        queue to the runner: a call made after that is sent after this one. A call made while a
        tool runs never reaches the runner, so it calls ``queued`` before it runs.
        """
        running = _RUNNING_TOOL.get()
        if running is not None and running[0] is self:
            direct = _nested(name, running[1], run)
            if queued is not None:
                queued()
            return direct()
        call = self._new_call(name, args, local=run is not None)
        self._lock.acquire(queued)
        cause: BaseException | None = None
        try:
            reply = self._start(call)
            if reply.run_here:
                report, cause = self._run_sync(call, run)
                reply = self._finish(call, report)
        finally:
            self._end_round_trip()
            self._lock.release()
        return _deliver(call, reply, cause)

    async def acall_tool(
        self,
        name: str,
        args: Mapping[str, Any],
        run: Callable[[], Awaitable[Any]] | None = None,
    ) -> Any:
        """``call_tool`` for coroutines: ``run`` is awaited on the caller's event loop."""
        running = _RUNNING_TOOL.get()
        if running is not None and running[0] is self:
            value = _nested(name, running[1], run)()
            return await value if inspect.isawaitable(value) else value
        call = self._new_call(name, args, local=run is not None)
        await self._lock.acquire_async()
        ownership = _Ownership()
        cause: BaseException | None = None
        try:
            reply = await self._in_thread(ownership, call, self._start, call)
            if reply.run_here:
                report, cause = await self._run_async(call, run)
                reply = await self._in_thread(ownership, call, self._finish, call, report)
        finally:
            if not ownership.handed_off:
                self._end_round_trip()
                self._lock.release()
        return _deliver(call, reply, cause)

    # -- one-way messages ----------------------------------------------------------------------

    def log(
        self, message: str, *, level: str = "info", data: Mapping[str, Any] | None = None
    ) -> None:
        """Send a log line to the run's event log (``data``: a JSON object or None)."""
        self._post(
            {"type": "log", "level": level, "message": message, "data": _object_or_none(data)}
        )

    def handoff(self, to: str, *, source: str | None = None) -> None:
        """Tell the runner the conversation passed to agent ``to`` (from agent ``source``).

        The trace shows it as a tool-like event ``handoff:<to>`` that assertions can name; no
        cassette serves it, and the handoff itself runs here in every mode.
        """
        self._post({"type": "handoff", "to": to, "from": source})

    def usage(
        self,
        *,
        tokens_in: int | None = None,
        tokens_out: int | None = None,
        cost_usd: float | None = None,
        model: str | None = None,
    ) -> None:
        """Report tokens and cost spent since the previous ``usage`` call (the runner adds up)."""
        # The runner's bounds (base.reported): beyond them it would fail the case instead.
        for key, count in (("tokens_in", tokens_in), ("tokens_out", tokens_out)):
            if count is not None and (not isinstance(count, int) or as_count(count) is None):
                raise ValueError(
                    f"usage {key} must be a non-negative integer up to 2**53 - 1, found {count!r}"
                )
        if cost_usd is not None and as_cost_usd(cost_usd) is None:
            raise ValueError(
                f"usage cost_usd must be a non-negative number up to 1e9, found {cost_usd!r}"
            )
        self._post(
            {
                "type": "usage",
                "tokens_in": tokens_in,
                "tokens_out": tokens_out,
                "cost_usd": cost_usd,
                "model": model,
            }
        )

    def final_output(self, output: Mapping[str, Any]) -> None:
        """Deliver the case's final output (a JSON object); the runner then ends the case."""
        data = to_json_data(output)
        if not isinstance(data, dict):
            raise TypeError(f"final_output must be a mapping, found {type(output).__name__}")
        self._post({"type": "final_output", "output": data})

    def task_error(self, message: str, data: Mapping[str, Any] | None = None) -> None:
        """Tell the runner the agent could not do the task; the case fails with ``message``."""
        self._post({"type": "task_error", "message": message, "data": _object_or_none(data)})

    def close(self) -> None:
        """Close the channel (the runner then sees the agent's end of the conversation)."""
        if self._executor is not None:
            self._executor.shutdown(wait=False)
        self._channel.close()

    # -- the round trip ------------------------------------------------------------------------

    def _new_call(self, name: str, args: Mapping[str, Any], *, local: bool) -> _Call:
        if not isinstance(name, str) or not name:
            raise ValueError(f"a tool name must be a non-empty string, found {name!r}")
        try:
            data = to_json_data(args)
        except NotJsonError as exc:
            raise ValueError(f"the arguments of tool {name!r} are not JSON data: {exc}") from None
        if not isinstance(data, dict):
            raise TypeError(f"the arguments of tool {name!r} must be a mapping, found {data!r}")
        call_id = f"sdk-{next(self._ids)}"
        message = {
            "type": "tool_call",
            "name": name,
            "call_id": call_id,
            "args": data,
            "local": local,
        }
        try:
            line = encode_line(message)
        except ValueError as exc:
            raise ValueError(f"the arguments of tool {name!r} are not JSON data: {exc}") from None
        return _Call(name, call_id, line)

    def _start(self, call: _Call) -> _Reply:
        with self._state:
            self._in_flight = True
            self._channel.send_line(call.line)
        return self._await_reply(call, run_allowed=True)

    def _finish(self, call: _Call, report: _Report) -> _Reply:
        line = self._encode_report(call, report)
        with self._state:
            self._channel.send_line(line)
        return self._await_reply(call, run_allowed=False)

    def _await_reply(self, call: _Call, *, run_allowed: bool) -> _Reply:
        while True:
            message = self._channel.receive()
            kind = message["type"]
            if kind not in ("tool_result", "tool_run"):
                continue  # a message type this SDK does not know yet: not for us
            call_id = message.get("call_id")
            if kind == "tool_result" and call_id in self._stale:
                self._stale.discard(call_id)  # the answer to a call the agent abandoned
                continue
            if call_id != call.call_id:
                raise ChannelError(
                    f"the runner answered call {call_id!r} while the agent waited for call "
                    f"{call.call_id!r} ({call.name})"
                )
            if kind == "tool_run":
                if not run_allowed:
                    raise ChannelError(
                        f"the runner sent tool_run twice for call {call.call_id!r} ({call.name})"
                    )
                return _Reply(run_here=True)
            return _parse_result(message, call)

    def _run_sync(
        self, call: _Call, run: Callable[[], Any] | None
    ) -> tuple[_Report, BaseException | None]:
        if run is None:
            return _no_implementation(call), None
        token = _RUNNING_TOOL.set((self, call.name))
        try:
            value = run()
            if inspect.isawaitable(value):
                if inspect.iscoroutine(value):
                    value.close()
                raise TypeError(
                    f"tool {call.name!r} returned an awaitable to call_tool; "
                    "call async tools with acall_tool"
                )
        except Exception as exc:
            return _Report(ok=False, error=_error_text(exc)), exc
        except BaseException:
            self._abandon(call, "was interrupted while running")
            raise
        finally:
            _RUNNING_TOOL.reset(token)
        return _Report(ok=True, value=value), None

    async def _run_async(
        self, call: _Call, run: Callable[[], Awaitable[Any]] | None
    ) -> tuple[_Report, BaseException | None]:
        if run is None:
            return _no_implementation(call), None
        token = _RUNNING_TOOL.set((self, call.name))
        try:
            value: Any = run()
            if inspect.isawaitable(value):
                value = await value
        except Exception as exc:
            return _Report(ok=False, error=_error_text(exc)), exc
        except BaseException:
            self._abandon(call, "was cancelled while running")
            raise
        finally:
            _RUNNING_TOOL.reset(token)
        return _Report(ok=True, value=value), None

    def _encode_report(self, call: _Call, report: _Report) -> bytes:
        message: dict[str, Any] = {"type": "tool_report", "call_id": call.call_id}
        if report.ok:
            try:
                message.update(ok=True, result=to_json_data(report.value), error=None)
                return encode_line(message)
            except (NotJsonError, ValueError, TypeError) as exc:
                report = _Report(
                    ok=False, error=f"tool {call.name!r} returned a value that is not JSON: {exc}"
                )
        message.update(ok=False, result=None, error=report.error)
        return encode_line(message)

    def _abandon(self, call: _Call, what: str) -> None:
        """The runner waits for a report the agent will not produce: end the call cleanly.

        Its ``tool_result`` is skipped by whichever call reads next.
        """
        line = encode_line(
            {
                "type": "tool_report",
                "call_id": call.call_id,
                "ok": False,
                "result": None,
                "error": f"tool {call.name!r} {what} in the agent",
            }
        )
        with self._state:
            self._stale.add(call.call_id)
            # If the runner is gone, nothing waits for the report any more.
            with contextlib.suppress(ChannelError):
                self._channel.send_line(line)

    def _end_round_trip(self) -> None:
        with self._state:
            self._in_flight = False
            deferred, self._deferred = self._deferred, []
            try:
                for line in deferred:
                    self._channel.send_line(line)
            except ChannelError:
                pass  # the runner is gone; the next call or message says so

    def _post(self, message: Mapping[str, Any]) -> None:
        line = encode_line(message)
        with self._state:
            if self._in_flight:
                self._deferred.append(line)
            else:
                self._channel.send_line(line)

    # -- coroutine support ---------------------------------------------------------------------

    async def _in_thread(
        self, ownership: _Ownership, call: _Call, step: Callable[..., _Reply], *args: Any
    ) -> _Reply:
        """Run one blocking step of a round trip in the channel's worker thread.

        If the awaiting coroutine is cancelled the step still finishes (the runner is mid-call);
        its completion then ends the round trip and releases the call lock.
        """
        import asyncio

        done = self._io_executor().submit(step, *args)
        try:
            return await asyncio.shield(asyncio.wrap_future(done))
        except asyncio.CancelledError:
            ownership.handed_off = True
            done.add_done_callback(lambda finished: self._complete_abandoned(call, finished))
            raise

    def _complete_abandoned(self, call: _Call, finished: Future[_Reply]) -> None:
        try:
            reply = None if finished.exception() is not None else finished.result()
            if reply is not None and reply.run_here:
                self._abandon(call, "was cancelled before it ran")
        finally:
            self._end_round_trip()
            self._lock.release()

    def _io_executor(self) -> ThreadPoolExecutor:
        with self._state:
            if self._executor is None:
                from concurrent.futures import ThreadPoolExecutor

                # One worker: only the holder of the call lock ever does channel I/O.
                self._executor = ThreadPoolExecutor(1, thread_name_prefix="trialrun-channel")
            return self._executor


def _parse_result(message: Mapping[str, Any], call: _Call) -> _Reply:
    ok = message.get("ok")
    error = message.get("error")
    if not isinstance(ok, bool) or not (error is None or isinstance(error, str)):
        raise ChannelError(
            f"the runner's tool_result for call {call.call_id!r} ({call.name}) needs a boolean "
            '"ok" and a string or null "error"'
        )
    return _Reply(run_here=False, ok=ok, result=message.get("result"), error=error)


def _deliver(call: _Call, reply: _Reply, cause: BaseException | None) -> Any:
    if reply.ok:
        return reply.result
    error = reply.error or f"tool {call.name!r} failed"
    raise ToolCallError(call.name, call.call_id, error) from cause


def _nested(name: str, outer: str, run: Callable[[], Any] | None) -> Callable[[], Any]:
    if run is None:
        raise ChannelError(
            f"tool {name!r} was called through trialrun while tool {outer!r} runs in this agent; "
            "the runner answers one call at a time, so a tool that calls another tool must hold "
            "that tool's implementation"
        )
    return run


def _no_implementation(call: _Call) -> _Report:
    return _Report(
        ok=False,
        error=f"the runner asked the agent to run tool {call.name!r}, but the agent holds no "
        "implementation of it (it sent local: false)",
    )


def _error_text(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def _object_or_none(data: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if data is None:
        return None
    converted = to_json_data(data)
    if not isinstance(converted, dict):
        raise TypeError(f"data must be a mapping or None, found {type(data).__name__}")
    return converted


_connected: tuple[int, Session] | None = None
_connect_lock = threading.Lock()


def connect() -> Session | None:
    """This process's session with the runner, or None when not run by ``trialrun run``.

    The first call opens the channel from ``TRIALRUN_FD`` and reads ``task_start`` (blocking until
    it arrives); later calls return the same session. Raises ``ChannelError`` when
    ``TRIALRUN_FD`` is set but unusable.
    """
    current = _connected
    if current is not None and current[0] == os.getpid():
        return current[1]
    fd_text = os.environ.get(ENV_FD)
    if not fd_text:
        return None
    return _open_once(fd_text)


def _open_once(fd_text: str) -> Session:
    global _connected
    with _connect_lock:
        if _connected is not None:
            if _connected[0] == os.getpid():
                return _connected[1]
            raise ChannelError(
                "trialrun.agent was used in a forked child process; only the process trialrun "
                "started can talk to the runner (run tools in the parent, or in threads)"
            )
        session = Session.open(Channel.from_environment(fd_text), mode=os.environ.get(ENV_MODE))
        _connected = (os.getpid(), session)
        return session
