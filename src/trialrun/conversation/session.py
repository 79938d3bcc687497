"""One case's conversation with its agent: the protocol loop, the deadlines and the event log.

``run_agent`` never raises for anything the agent does: every way a case can go wrong becomes a
``Failure`` on the returned ``AgentRun`` (the first one wins) plus an ``agent_error`` event, with
the agent's stderr tail attached. Only cancellation (Ctrl-C) and bugs in a tool backend propagate,
after the agent's whole process group has been killed.

Deadlines are enforced while the agent runs, not judged afterwards: the wall deadline
(``Limits.wall_ms``, counted from ``task_start``, covering tool calls too) and the idle timeout
(the agent sent no line, or did not read its stdin, for ``Limits.idle_ms``; time spent inside a
tool does not count as the agent's silence).

An agent may be started ahead of its case (``start_agent``, then ``run_agent(prestarted=...)``):
it loads its imports while another case runs and waits for ``task_start`` as any agent does.
``AgentRun.wall_ms`` runs from ``task_start`` to the moment the result was decided: the final
message, a deadline, or a failure; ``AgentRun.startup_ms`` is the time between spawning the
agent and its ``task_start``, the head start it got. Teardown (kill grace, reaping) is in
neither, so an agent that ignores SIGTERM cannot inflate its own timing.

An agent that delivered its final output may still be cleaning up. Given ``Teardowns``, the
session returns at once and lets that agent exit in the background while the next case starts;
``Teardowns.wait_all`` then fills in its exit code and stderr tail and stops its process group.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from trialrun.base.results import (
    HANDOFF_PREFIX,
    AgentRun,
    Failure,
    JsonObject,
    Status,
    ToolCall,
)
from trialrun.conversation import protocol, wording
from trialrun.conversation.lines import ChannelLostError, MessageTooLargeError, UnterminatedLine
from trialrun.conversation.process import AgentProcess, Spawn, StartedAgent, start_agent
from trialrun.conversation.protocol import (
    AgentMessage,
    FinalOutputMsg,
    HandoffMsg,
    InvalidJsonError,
    LogMsg,
    StdoutNoiseError,
    TaskErrorMsg,
    ToolCallMsg,
    ToolReportMsg,
    UsageMsg,
)
from trialrun.conversation.teardowns import Teardowns
from trialrun.errors import CassetteError, CassetteMismatch, ProtocolError
from trialrun.tools.base import LocalTool, ToolBackend, ToolOutcome
from trialrun.tools.live import MissingToolError

_EXIT_DRAIN_S = 0.5
"""After the agent exited: how long its last stdout lines may take to arrive, and how long to
wait for its exit status once its stdout closed."""

_REFUSALS = (CassetteMismatch, MissingToolError, CassetteError)
"""What a tool backend raises for a call it cannot answer: the call fails the case."""


@dataclass(frozen=True, slots=True)
class Limits:
    """How long and how much one case's agent may take. ``wall_ms`` None: no wall deadline."""

    wall_ms: int | None
    idle_ms: int
    max_message_bytes: int
    kill_grace_ms: int


async def run_agent(
    argv: list[str] | Spawn,
    *,
    case_id: str,
    task_input: Any,
    tools: ToolBackend,
    allowed_tools: Collection[str],
    limits: Limits,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    teardowns: Teardowns | None = None,
    prestarted: StartedAgent | None = None,
    rerecord: str | None = None,
) -> AgentRun:
    """Run one case's agent to its final output or its first failure.

    ``argv`` is the command, or a whole ``Spawn`` (then ``cwd`` and ``env`` are ignored).
    ``env`` is the agent's whole environment (None: inherit ours); ``cwd`` None: ours.
    ``teardowns``: where a successful agent finishes exiting (None: before returning).
    ``prestarted``: the agent ``start_agent`` already started for this case (then ``argv``
    only names it); the session owns it from now on.
    ``rerecord``: the command that updates this case (``--mode update``), named by a cassette
    mismatch.
    """
    spawn = argv if isinstance(argv, Spawn) else Spawn(argv, cwd, env)
    if prestarted is None:
        prestarted = await start_agent(spawn, limits.max_message_bytes)
    prestarted.claimed = True
    session = _Session(case_id, tools, allowed_tools, limits, rerecord)
    return await session.run(prestarted, task_input, teardowns)


class _CaseOver(Exception):
    """The case is decided; ``AgentRun.failure`` says why."""


class _Session:
    def __init__(
        self,
        case_id: str,
        tools: ToolBackend,
        allowed_tools: Collection[str],
        limits: Limits,
        rerecord: str | None,
    ) -> None:
        self._case_id = case_id
        self._rerecord = rerecord
        self._tools = tools
        self._allowed = allowed_tools
        self._limits = limits
        self._run = AgentRun(case_id=case_id)
        self._started = 0.0
        self._deadline: float | None = None
        self._decided = False
        self._line_no = 0
        self._reading: asyncio.Timeout | None = None
        """The deadline of the line being read, if any: the agent's exit shortens it."""
        self._draining = False
        """The agent exited: reads wait only for what it left in the pipe."""
        self._last_sent = "the task_start message"
        """What trialrun sent last, for a failure message to name."""
        self._unsent: str | None = None
        """What could not be sent because the agent had closed its inbox: it can only end now."""

    async def run(
        self, started: StartedAgent, task_input: Any, teardowns: Teardowns | None
    ) -> AgentRun:
        self._started = time.monotonic()
        self._run.startup_ms = round((self._started - started.spawned_at) * 1000)
        if self._limits.wall_ms is not None:
            self._deadline = self._started + self._limits.wall_ms / 1000
        self._event("task_start", task_id=self._case_id, input=task_input)
        agent = started.process
        if agent is None:
            self._record_failure("agent_error", started.start_error or "", "error")
            return self._run
        agent.on_exit(self._agent_exited)
        grace_s = self._limits.kill_grace_ms / 1000
        try:
            delivered = await self._converse(agent, task_input)
        except BaseException:
            agent.kill_now()
            await self._stop(agent, agent.terminate(0.0))
            raise
        if not delivered:
            await self._stop(agent, agent.terminate(grace_s))
        elif teardowns is None:
            await self._stop(agent, agent.finish(grace_s), after_output=True)
        else:
            teardowns.start(self._stop(agent, agent.finish(grace_s), after_output=True))
        return self._run

    async def _stop(
        self,
        agent: AgentProcess,
        stopping: Awaitable[None],
        *,
        after_output: bool = False,
    ) -> None:
        """Stop the agent's group, then record how it ended. No process of the case survives."""
        try:
            await stopping
        except BaseException:
            # Cancelled (Ctrl-C) or a backend bug mid-teardown: kill without grace.
            await agent.kill_and_reap()
            raise
        finally:
            agent.close()
            self._run.exit_code = agent.returncode
            if after_output and agent.stopped_by_us:
                # Not the agent's status but trialrun's stop; whether an agent leaving right
                # after its output still beat the signal is chance (see AgentRun.exit_code).
                self._run.exit_code = None
                self._run.stopped_by_trialrun = True
            self._run.stderr_tail = agent.stderr_tail()
            if self._run.failure is not None:
                self._run.failure.stderr_tail = self._run.stderr_tail

    async def _converse(self, agent: AgentProcess, task_input: Any) -> bool:
        """True when the agent delivered its final output, False when the case failed."""
        try:
            await self._send(
                agent, protocol.task_start(self._case_id, task_input), "the task_start message"
            )
            while True:
                message = await self._next_message(agent)
                if isinstance(message, FinalOutputMsg):
                    self._decide()
                    self._run.output = message.output
                    self._event("final_output", output=message.output)
                    return True
                if isinstance(message, ToolCallMsg):
                    await self._tool_call(agent, message)
                else:
                    self._note(message)
        except _CaseOver:
            return False

    def _note(self, message: AgentMessage) -> None:
        """Handle any message but a tool call or the final output: nothing to wait for."""
        if isinstance(message, LogMsg):
            self._event("log", level=message.level, message=message.message, data=message.data)
        elif isinstance(message, UsageMsg):
            self._run.usage.add(message.tokens_in, message.tokens_out, message.cost_usd)
            if message.model is not None:
                self._run.usage.model = message.model
            self._event(
                "usage",
                tokens_in=message.tokens_in,
                tokens_out=message.tokens_out,
                cost_usd=message.cost_usd,
                model=message.model,
            )
        elif isinstance(message, HandoffMsg):
            self._handoff(message)
        elif isinstance(message, TaskErrorMsg):
            self._event("task_error", message=message.message, data=message.data)
            self._fail("task_error", message.message, "error", log_event=False)
        elif isinstance(message, ToolReportMsg):
            self._fail(
                "protocol_error",
                f"agent sent a tool_report for call {message.call_id!r} that trialrun did not ask "
                "it to run (expected tool_report only after a tool_run message)",
                "error",
            )

    def _handoff(self, message: HandoffMsg) -> None:
        """A tool-like event ``handoff:<agent>``: assertions see it; no cassette serves it."""
        call_id = f"handoff-{sum(1 for c in self._run.tool_calls if c.kind == 'handoff') + 1}"
        name = f"{HANDOFF_PREFIX}{message.to}"
        args: JsonObject = {} if message.source is None else {"from": message.source}
        start_ms = (time.monotonic() - self._started) * 1000
        self._event("tool_call", name=name, call_id=call_id, args=args, kind="handoff")
        self._event("tool_result", call_id=call_id, ok=True, result=None, error=None)
        self._run.tool_calls.append(
            ToolCall(call_id, name, args, True, None, None, 0.0, start_ms, kind="handoff")
        )

    async def _tool_call(self, agent: AgentProcess, call: ToolCallMsg) -> None:
        start_ms = self._call_received(call)
        local: LocalTool | None = None
        if call.local:

            async def local() -> ToolOutcome:
                return await self._run_locally(agent, call)

        started = time.monotonic()
        try:
            outcome = await self._call_tool(call, local)
        except _REFUSALS as exc:
            self._refuse_for(call, exc, start_ms)
        reply = self._call_answered(call, outcome, start_ms, started)
        await self._send(agent, reply, wording.answer_of(call))

    def _call_received(self, call: ToolCallMsg) -> float:
        """Record the call and refuse a tool the suite does not allow; its start on the case's
        clock (the timeline in report.html places each call from there)."""
        start_ms = (time.monotonic() - self._started) * 1000
        self._event("tool_call", name=call.name, call_id=call.call_id, args=call.args)
        if call.name not in self._allowed:
            allowed = ", ".join(sorted(self._allowed)) or "<none>"
            self._refuse(
                call,
                "tool_not_allowed",
                f"Tool not allowed: {wording.shown(call.name)}. Allowed tools: {allowed}",
                "fail",
                start_ms,
            )
        return start_ms

    def _refuse_for(self, call: ToolCallMsg, exc: Exception, start_ms: float) -> NoReturn:
        if isinstance(exc, CassetteMismatch):
            message = str(exc)
            if self._rerecord is not None:
                message += f"\nTo update just this case: {self._rerecord}"
            self._refuse(call, "cassette_mismatch", message, "fail", start_ms)
        if isinstance(exc, MissingToolError):
            self._refuse(call, "tool_registry_error", str(exc), "error", start_ms)
        self._refuse(call, "cassette_error", str(exc), "error", start_ms)

    def _call_answered(
        self, call: ToolCallMsg, outcome: ToolOutcome, start_ms: float, started: float
    ) -> JsonObject:
        """Record the outcome of the call; the ``tool_result`` to send."""
        duration_ms = (time.monotonic() - started) * 1000
        self._run.tool_calls.append(
            ToolCall(
                call.call_id,
                call.name,
                call.args,
                outcome.ok,
                outcome.result,
                outcome.error,
                duration_ms,
                start_ms,
            )
        )
        self._event(
            "tool_result",
            call_id=call.call_id,
            ok=outcome.ok,
            result=outcome.result,
            error=outcome.error,
        )
        return protocol.tool_result(call.call_id, outcome.ok, outcome.result, outcome.error)

    async def _call_tool(self, call: ToolCallMsg, local: LocalTool | None) -> ToolOutcome:
        if self._deadline is None:
            return await self._tools.call(call.name, call.args, local)
        try:
            # asyncio.timeout, unlike wait_for on Python 3.11, starts no task per call.
            async with asyncio.timeout(self._deadline - time.monotonic()):
                return await self._tools.call(call.name, call.args, local)
        except TimeoutError:
            if time.monotonic() < self._deadline:
                raise  # the backend's own timeout escaped it: a backend bug, not our deadline
            self._wall_exceeded()

    async def _run_locally(self, agent: AgentProcess, call: ToolCallMsg) -> ToolOutcome:
        """Ask the agent to run its own tool and wait for its report (record and live mode)."""
        what = f"call {call.call_id!r} ({call.name})"
        await self._send(agent, protocol.tool_run(call.call_id), f"the tool_run of {what}")
        while True:
            message = await self._next_message(agent)
            if isinstance(message, ToolReportMsg) and message.call_id == call.call_id:
                return ToolOutcome(message.ok, message.result, message.error)
            if isinstance(message, LogMsg | UsageMsg | TaskErrorMsg | HandoffMsg):
                self._note(message)
                continue
            found = (
                f"a tool_report for call {message.call_id!r}"
                if isinstance(message, ToolReportMsg)
                else f"a {protocol.message_type(message)} message"
            )
            self._fail(
                "protocol_error",
                f"expected the tool_report of {what} after tool_run, found {found}",
                "error",
            )

    def _refuse(
        self, call: ToolCallMsg, kind: str, message: str, status: Status, start_ms: float
    ) -> NoReturn:
        # Every tool_call message counts as a call (RunLedger's budgets count refused ones too).
        self._run.tool_calls.append(
            ToolCall(
                call.call_id,
                call.name,
                call.args,
                ok=False,
                error=message,
                start_ms=start_ms,
                refused=True,
            )
        )
        self._fail(kind, message, status)

    async def _send(self, agent: AgentProcess, message: Mapping[str, Any], what: str) -> None:
        """Send ``message``, now the last thing sent; fails the case if it cannot be encoded (a
        case input or a tool result that is not JSON data)."""
        self._last_sent = what
        try:
            line = protocol.encode(message)
        except (TypeError, ValueError) as exc:
            if message["type"] == "task_start":
                self._fail(
                    "agent_error",
                    f"Cannot send task_start: the case input is not JSON data ({exc})",
                    "error",
                )
            self._fail(
                "tool_error",
                f"Cannot send {what}: the tool result is not JSON data ({exc})",
                "error",
            )
        sent = agent.write_nowait(line)
        if sent is None:  # the agent's inbox is full: it has idle_ms to read it
            timeout, is_wall = self._budget()
            try:
                async with asyncio.timeout(timeout):
                    sent = await agent.drain()
            except TimeoutError:
                self._overdue(is_wall, wording.to_read(agent, what))
        # False (the agent closed its stdin) fails nothing yet: its last lines may still be
        # on the way, and the next read reports how it exited (or that it went deaf).
        if not sent:
            self._unsent = what

    async def _next_message(self, agent: AgentProcess) -> AgentMessage:
        while True:
            try:
                raw = await self._next_line(agent)
            except MessageTooLargeError as exc:
                where = f"{wording.source(agent)} line {self._line_no + 1}"
                self._fail("message_too_large", f"{exc} ({where})", "error")
            except ChannelLostError:
                unread = self._last_sent
                await self._stdout_closed(
                    agent, f"closed its {wording.source(agent)} without reading {unread}"
                )
            if raw is None:
                await self._stdout_closed(agent, self._unread(agent))
            self._line_no += 1
            try:
                message = protocol.parse_line(raw, self._line_no, wording.source(agent))
            except (StdoutNoiseError, InvalidJsonError) as exc:
                if isinstance(raw, UnterminatedLine) and raw.lstrip().startswith(b"{"):
                    await self._stdout_closed(agent, wording.mid_message(agent, self._line_no, exc))
                noise = isinstance(exc, StdoutNoiseError)
                self._fail("stdout_noise" if noise else "protocol_error", str(exc), "error")
            except ProtocolError as exc:
                self._fail("protocol_error", str(exc), "error")
            if message is not None:
                return message

    async def _next_line(self, agent: AgentProcess) -> bytes | None:
        """The next stdout line, racing the deadlines and the agent's own exit."""
        # The agent exited or stopped reading: wait only for what it left in the pipe.
        ending = self._draining or self._unsent is not None
        timeout, is_wall = (_EXIT_DRAIN_S, False) if ending else self._budget()
        try:
            async with asyncio.timeout(timeout) as self._reading:
                return await agent.read_line()
        except TimeoutError:
            self._read_timed_out(agent, is_wall)
        finally:
            self._reading = None

    def _read_timed_out(self, agent: AgentProcess, is_wall: bool) -> NoReturn:
        if self._draining:
            self._fail(
                "agent_crashed",
                f"{wording.exit_of(agent)} before sending final_output "
                f"(a process it started still holds its {wording.source(agent)} open)",
                "error",
            )
        if (unread := self._unread(agent)) is not None:
            # Deaf to its inbox yet still running: it can only end, do not wait idle_ms.
            self._fail("agent_crashed", wording.still_running(unread), "error")
        self._overdue(is_wall, "to send its next message")

    def _agent_exited(self) -> None:
        """Whatever the agent wrote before exiting is already in the pipe: wait only for that."""
        self._draining = True
        reading = self._reading
        # An expired timeout cannot be rescheduled; its read is ending anyway.
        if reading is not None and not reading.expired():
            reading.reschedule(asyncio.get_running_loop().time() + _EXIT_DRAIN_S)

    def _unread(self, agent: AgentProcess) -> str | None:
        if self._unsent is None:
            return None
        return f"closed its {wording.inbox(agent)} without reading {self._unsent}"

    async def _stdout_closed(self, agent: AgentProcess, how: str | None = None) -> NoReturn:
        """The agent's messages ended; ``how`` ("closed its ...") says what it left undone."""
        self._decide()
        if await agent.wait_exited(_EXIT_DRAIN_S):
            problem = f"{wording.exit_of(agent)} before sending final_output"
            if how is not None:
                problem += f"; it {how}"
        else:
            problem = wording.still_running(how or f"closed its {wording.source(agent)}")
        self._fail("agent_crashed", problem, "error")

    def _budget(self) -> tuple[float, bool]:
        """Seconds the next wait may take, and whether the wall deadline is the one that ends it."""
        idle_s = self._limits.idle_ms / 1000
        if self._deadline is None:
            return idle_s, False
        remaining = max(0.0, self._deadline - time.monotonic())
        return (remaining, True) if remaining <= idle_s else (idle_s, False)

    def _overdue(self, is_wall: bool, activity: str) -> NoReturn:
        """A wait ran out: the wall deadline's, or the idle timeout while the agent was due
        ``activity``."""
        if is_wall:
            self._wall_exceeded()
        self._idle_exceeded(activity)

    def _wall_exceeded(self) -> NoReturn:
        self._decide()
        self._fail(
            "timeout",
            f"Agent exceeded max_wall_ms={self._limits.wall_ms} "
            f"(killed after {self._run.wall_ms} ms)",
            "fail",
        )

    def _idle_exceeded(self, activity: str) -> NoReturn:
        self._decide()
        self._fail(
            "idle_timeout",
            f"Agent was idle for idle_timeout_ms={self._limits.idle_ms} while trialrun waited for "
            f"it {activity} (killed after {self._run.wall_ms} ms)",
            "error",
        )

    def _fail(self, kind: str, message: str, status: Status, *, log_event: bool = True) -> NoReturn:
        self._record_failure(kind, message, status, log_event=log_event)
        raise _CaseOver

    def _record_failure(
        self, kind: str, message: str, status: Status, *, log_event: bool = True
    ) -> None:
        self._decide()
        self._run.failure = Failure(kind=kind, message=message, status=status)
        if log_event:
            self._event("agent_error", kind=kind, message=message)

    def _decide(self) -> None:
        if not self._decided:
            self._decided = True
            self._run.wall_ms = round((time.monotonic() - self._started) * 1000)

    def _event(self, event_type: str, **fields: Any) -> None:
        self._run.events.append(
            {"type": event_type, "case_id": self._case_id, "timestamp": time.time(), **fields}
        )
