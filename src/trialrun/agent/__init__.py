"""The Python SDK for agents that ``trialrun run`` drives over a side channel.

With ``agent_channel: fd`` in the suite, an agent talks to the runner through a socket whose file
descriptor is in ``TRIALRUN_FD``, so its stdout and stderr stay free for prints, rich consoles and
logging. Three ways to use it:

* ``@tool`` on plain functions: each call becomes a recorded (or replayed) tool call;
* ``wrap(agent)`` on an OpenAI Agents SDK agent, a PydanticAI agent or a LangGraph graph, or the
  explicit adapters in ``trialrun.agent.openai_agents``, ``trialrun.agent.langchain`` and
  ``trialrun.agent.pydantic_ai``;
* ``connect()`` for the session itself: the task input, ``call_tool``, ``log``, ``usage``,
  ``final_output``, ``task_error``.

Outside the runner (no ``TRIALRUN_FD``) ``connect()`` returns None and decorated or wrapped tools
just run. This module imports no framework and nothing heavy; see docs/sdk.md.
"""

from __future__ import annotations

from trialrun.agent.channel import ChannelError
from trialrun.agent.client import Session, ToolCallError, connect
from trialrun.agent.decorator import tool
from trialrun.agent.frameworks import wrap

__all__ = ["ChannelError", "Session", "ToolCallError", "connect", "tool", "wrap"]
