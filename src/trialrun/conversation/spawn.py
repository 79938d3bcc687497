"""How a case's agent is started: its command and environment, and an agent started ahead.

``start_agent`` may run well before the case's ``task_start`` (pre-starting): the agent loads
its imports meanwhile. The session that claims a ``StartedAgent`` stops it; one no session
claims is stopped by ``StartedAgent.discard``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from trialrun.conversation.process import AgentProcess, AgentStartError, Channel

if TYPE_CHECKING:
    from trialrun.conversation.seal import AgentSeal
    from trialrun.conversation.spawner import AgentSpawner

__all__ = ["Spawn", "StartedAgent", "start_agent"]


@dataclass(frozen=True, slots=True)
class Spawn:
    """How to start the agent: its command, where, with what environment, over which channel.

    ``env`` is the agent's whole environment (None: inherit ours) and ``extra_env`` is laid on
    top of it; ``cwd`` None: ours.
    """

    argv: list[str]
    cwd: Path | None = None
    env: Mapping[str, str] | None = None
    extra_env: Mapping[str, str] | None = None
    channel: Channel = "stdio"
    spawner: AgentSpawner | None = None
    """The run's spawner (None: the process's ``spawner.shared()``)."""
    seal: AgentSeal | None = None
    """Replay's network seal for this agent's process tree (None: not sealed)."""


@dataclass(slots=True)
class StartedAgent:
    """An agent process started ahead of its ``task_start``, or why it could not start."""

    process: AgentProcess | None
    start_error: str | None
    spawned_at: float
    """``time.monotonic()`` just before the spawn."""
    claimed: bool = False
    """A session took it: that session stops it. Otherwise ``discard`` must."""

    async def discard(self) -> None:
        """Stop an agent no case will use (interrupted run, failed setup): its whole group dies."""
        if self.process is None or self.claimed:
            return
        self.claimed = True
        try:
            await self.process.kill_and_reap()
        finally:
            self.process.close()


async def start_agent(spawn: Spawn, max_message_bytes: int) -> StartedAgent:
    """Start the agent of ``spawn``; never raises for an agent that cannot start."""
    spawned_at = time.monotonic()
    env = spawn.env
    if spawn.extra_env:
        env = {**(os.environ if env is None else env), **spawn.extra_env}
    try:
        process = await AgentProcess.start(
            spawn.argv,
            cwd=spawn.cwd,
            env=env,
            max_message_bytes=max_message_bytes,
            channel=spawn.channel,
            spawner=spawn.spawner,
            seal=spawn.seal,
        )
    except AgentStartError as exc:
        return StartedAgent(None, str(exc), spawned_at)
    return StartedAgent(process, None, spawned_at)
