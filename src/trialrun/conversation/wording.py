"""How the session words what an agent did wrong: the pieces of its failure messages."""

from __future__ import annotations

from trialrun.base.quoting import shortened
from trialrun.conversation.process import AgentProcess
from trialrun.conversation.protocol import ToolCallMsg
from trialrun.conversation.spawner import signal_name
from trialrun.errors import ProtocolError

__all__ = [
    "answer_of",
    "exit_of",
    "inbox",
    "mid_message",
    "shown",
    "source",
    "still_running",
    "to_read",
]


_SHOWN_CHARS = 200


def shown(text: str) -> str:
    """A name or id the agent chose, as a message quotes it: at most 200 characters (a tool
    name 100,000 characters long made every failure message that long)."""
    return shortened(text, _SHOWN_CHARS)


def answer_of(call: ToolCallMsg) -> str:
    """The tool_result of ``call``, as a failure message names what trialrun sent last."""
    return f"the tool_result of call {shown(call.call_id)!r} ({shown(call.name)})"


def to_read(agent: AgentProcess, what: str) -> str:
    """What an agent whose inbox is full was due to do, for the idle timeout's message."""
    return f"to read {what} on its {inbox(agent)}"


def source(agent: AgentProcess) -> str:
    """Where the agent's messages come from, as the diagnostics name it."""
    return "stdout" if agent.channel == "stdio" else "channel"


def mid_message(agent: AgentProcess, line_no: int, exc: ProtocolError) -> str:
    found = f": {exc.text}" if exc.text else ""
    return (
        f"closed its {source(agent)} in the middle of a message ({source(agent)} line "
        f"{line_no} ends without a newline and is not whole JSON{found})"
    )


def still_running(how: str) -> str:
    """The failure of an agent that still runs but ``how`` (closed its ...) can no longer talk."""
    return f"Agent {how} before sending final_output (it was still running)"


def inbox(agent: AgentProcess) -> str:
    return "stdin" if agent.channel == "stdio" else "channel"


def exit_of(agent: AgentProcess) -> str:
    """How the agent exited, and why trialrun killed it when the case did not ask for it."""
    returncode = agent.returncode
    if returncode is None:
        return "Agent exited"
    if returncode < 0:
        name = signal_name(-returncode)
        if agent.killed_because is not None:
            return f"Agent was killed by {name} because {agent.killed_because}"
        return f"Agent was killed by {name}"
    return f"Agent exited with code {returncode}"
