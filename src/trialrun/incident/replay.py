"""Replay an incident against an agent: answer its tool calls from the recording, in order.

Each ``tool_call`` must be the next recorded call: same name and the same canonical arguments
(repeated identical requests included, each one consumes its own recording). Anything else, a call
beyond the recording, or an agent that stops without a final output, ends the replay as a
divergence. An agent may finish with fewer calls than the recording: a fixed agent does less.

Result words: ``inconclusive`` (the incident lacks argument or result capture, so nothing can be
matched or judged), ``diverged``, ``reproduced`` (a rule is violated by the replayed calls; they
are a prefix of the recording, so the recording violated it too) and ``passes``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from trialrun.base import canonjson
from trialrun.conversation import protocol
from trialrun.conversation.process import AgentProcess, AgentStartError, MessageTooLargeError
from trialrun.conversation.protocol import FinalOutputMsg, TaskErrorMsg, ToolCallMsg
from trialrun.errors import ProtocolError
from trialrun.incident.model import Incident, IncidentCall, capture_gaps, is_inconclusive
from trialrun.incident.rules import Rule, check_rules

GATE_FAILING = frozenset({"inconclusive", "diverged", "reproduced"})
DEFAULT_IDLE_S = 30.0
_MAX_MESSAGE_BYTES = 8 * 1024 * 1024
_KILL_GRACE_S = 1.0


@dataclass
class ReplayOutcome:
    result: str
    calls_matched: int = 0
    divergence: dict[str, Any] | None = None
    violations: list[dict[str, Any]] = field(default_factory=list)
    recorded_violations: list[dict[str, Any]] = field(default_factory=list)
    final_output: Any = None
    missing: list[str] = field(default_factory=list)
    stderr_tail: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "result": self.result,
            "calls_matched": self.calls_matched,
            "divergence": self.divergence,
            "violations": self.violations,
            "recorded_violations": self.recorded_violations,
            "final_output": self.final_output,
            "missing": self.missing,
        }


def replay(
    incident: Incident,
    command: str,
    *,
    rules: Sequence[Rule] = (),
    idle_s: float = DEFAULT_IDLE_S,
) -> ReplayOutcome:
    """Replay ``incident`` against ``command`` (run with ``bash -c``) and judge it by ``rules``."""
    recorded = check_rules(incident.calls, rules)
    if is_inconclusive(incident):
        return ReplayOutcome(
            "inconclusive", recorded_violations=recorded, missing=capture_gaps(incident)
        )
    outcome = asyncio.run(_converse(incident, ["bash", "-c", command], idle_s))
    outcome.recorded_violations = recorded
    if outcome.result == "diverged":
        return outcome
    # The replayed calls matched the recording one for one, so they carry its outcomes.
    replayed = incident.calls[: outcome.calls_matched]
    outcome.violations = check_rules(replayed, rules)
    outcome.result = "reproduced" if outcome.violations else "passes"
    return outcome


def _expected(calls: Sequence[IncidentCall], position: int) -> dict[str, Any] | None:
    if position >= len(calls):
        return None
    return {"name": calls[position].name, "args": calls[position].args}


async def _converse(incident: Incident, argv: list[str], idle_s: float) -> ReplayOutcome:
    calls = incident.calls
    outcome = ReplayOutcome("passes")

    def diverge(got: dict[str, Any] | None, reason: str) -> ReplayOutcome:
        outcome.result = "diverged"
        outcome.divergence = {
            "index": outcome.calls_matched,
            "expected": _expected(calls, outcome.calls_matched),
            "got": got,
            "reason": reason,
        }
        return outcome

    try:
        agent = await AgentProcess.start(argv, max_message_bytes=_MAX_MESSAGE_BYTES)
    except AgentStartError as exc:
        return diverge(None, f"the agent could not start: {exc}")
    try:
        await agent.send(protocol.task_start("incident", incident.input))
        line_no = 0
        while True:
            try:
                raw = await asyncio.wait_for(agent.read_line(), idle_s)
            except TimeoutError:
                return diverge(None, f"the agent sent nothing for {idle_s:g} s")
            except MessageTooLargeError as exc:
                return diverge(None, str(exc))
            if raw is None:
                await agent.wait_exited(0.5)
                return diverge(
                    None, f"the agent stopped (exit code {agent.returncode}) before final_output"
                )
            line_no += 1
            try:
                message = protocol.parse_line(raw, line_no)
            except ProtocolError as exc:
                return diverge(None, f"the agent broke the protocol: {exc}")
            if isinstance(message, FinalOutputMsg):
                outcome.final_output = message.output
                return outcome
            if isinstance(message, TaskErrorMsg):
                return diverge(None, f"the agent gave up with task_error: {message.message}")
            if isinstance(message, ToolCallMsg):
                got = {"name": message.name, "args": message.args}
                position = outcome.calls_matched
                if position >= len(calls):
                    return diverge(got, f"call {position} is beyond the recorded {len(calls)}")
                expected = calls[position]
                if expected.name != message.name or canonjson.dumps(
                    expected.args
                ) != canonjson.dumps(message.args):
                    return diverge(got, f"call {position} differs from the recording")
                outcome.calls_matched += 1
                reply = protocol.tool_result(
                    message.call_id, bool(expected.ok), expected.result, expected.error
                )
                await agent.send(reply)
    finally:
        try:
            await agent.terminate(_KILL_GRACE_S)
        except BaseException:  # a second Ctrl-C mid-teardown: no agent left unreaped
            await agent.kill_and_reap()
            raise
        outcome.stderr_tail = agent.stderr_tail()
