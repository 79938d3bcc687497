"""How an agent process is started, the seam under ``AgentProcess``: every agent, sealed or
not, is started by the run's spawner (``conversation.spawner``); a sealed one also gets the
seal's layers there.

The agent gets its descriptors (stdin, stdout, the tail pipe, the ``fd`` channel's socket)
and leads a new session; ``AgentProcess`` knows it by the spawner's ``SpawnedAgent`` (its pid,
its exit and exit status) and the pipes connected to it (``Started``). A start cancelled while
spawning (a Ctrl-C) waits for the spawn and kills the agent's whole group; a failed start is
an ``AgentStartError``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from trialrun.base import leftovers
from trialrun.conversation.lines import LineReader, SocketLineReader, Writable
from trialrun.conversation.spawner import AgentSpawner, SpawnedAgent, SpawnFailed
from trialrun.conversation.tail import StderrRing
from trialrun.errors import TrialrunError

if TYPE_CHECKING:
    from trialrun.conversation.seal import AgentSeal

__all__ = [
    "CHANNEL_FD_ENV",
    "EXAMPLE_COMMAND",
    "KILL_REAP_S",
    "AgentStartError",
    "Channel",
    "Started",
    "spawn",
    "start_problem",
    "wait_out",
]

Channel = Literal["stdio", "fd"]
CHANNEL_FD_ENV = "TRIALRUN_FD"
"""Names the agent's end of the socket pair when the channel is ``fd``."""
KILL_REAP_S = 5.0
"""How long a SIGKILLed agent may take to be reported as exited before we stop waiting."""
EXAMPLE_COMMAND = '["python3", "agent/agent.py"]'


class AgentStartError(TrialrunError):
    """The agent command could not be started (the case fails as ``agent_error``)."""


class _TailReader(asyncio.Protocol):
    """The agent's output tail (stderr; stdout too on the ``fd`` channel), fed to a ring as
    its bytes arrive: no reader task per agent, and no buffer a chatty agent could fill."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.tail = StderrRing()
        self.tail_closed: asyncio.Future[None] = loop.create_future()

    def data_received(self, data: bytes) -> None:
        self.tail.feed(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.tail_closed.done():
            self.tail_closed.set_result(None)


@dataclass
class Started:
    """What a spawn gives: the agent, its output tail, where its messages are read (``lines``)
    and ours written (``writer``), and every transport of ours connected to it."""

    agent: SpawnedAgent
    tail: _TailReader
    lines: LineReader
    writer: asyncio.StreamWriter
    transports: list[asyncio.BaseTransport]

    def close(self) -> None:
        """Close our pipes and socket; an agent still running is killed."""
        for transport in self.transports:
            transport.close()
        self.agent.close()


async def spawn(
    command: list[str],
    cwd: str | Path | None,
    env: dict[str, str],
    channel: Channel,
    max_message_bytes: int,
    spawner: AgentSpawner,
    seal: AgentSeal | None,
) -> Started:
    """Start an agent through ``spawner``, inside ``seal`` when there is one, talking over
    ``channel``: on ``stdio`` its stdin and stdout are pipes of ours; on ``fd`` it gets one
    end of a socket pair (named in ``TRIALRUN_FD``), stdin ``/dev/null``, and its stdout joins
    stderr in the output tail (a framework that prints cannot corrupt the protocol)."""
    loop = asyncio.get_running_loop()
    tail_r, tail_w = os.pipe()
    ours: socket.socket | None = None
    if channel == "stdio":
        stdin_r, stdin_w = os.pipe()
        stdout_r, stdout_w = os.pipe()
        fds = [(stdin_r, 0), (stdout_w, 1), (tail_w, 2)]
        kept = [(tail_r, "rb"), (stdout_r, "rb"), (stdin_w, "wb")]
    else:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        at = theirs.detach()
        env = {**env, CHANNEL_FD_ENV: str(at)}
        devnull = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        fds = [(devnull, 0), (tail_w, 1), (tail_w, 2), (at, at)]
        kept = [(tail_r, "rb")]
    spawning = asyncio.ensure_future(
        spawner.spawn(
            command,
            env=env,
            cwd=None if cwd is None else str(cwd),
            fds=fds,
            ports=None if seal is None else seal.ports,
            notify=None if seal is None else seal.notify_fd(),
        )
    )
    try:
        # Shielded: a Ctrl-C while the spawner starts the agent would otherwise leave it, and
        # whatever it starts in its group, running.
        agent = await asyncio.shield(spawning)
    except BaseException as exc:
        if isinstance(exc, asyncio.CancelledError):
            await _stop_cancelled_spawn(spawning)
        for fd, _ in kept:
            os.close(fd)
        if ours is not None:
            ours.close()
        if isinstance(exc, SpawnFailed):
            raise AgentStartError(_spawn_problem(command, exc)) from None
        raise
    finally:
        # The agent holds its own copies now; ours must go, or its exit would never show as EOF.
        for fd in {fd for fd, _ in fds}:
            os.close(fd)
        if seal is not None:
            seal.spawned()
    files = [open(fd, mode, buffering=0) for fd, mode in kept]  # noqa: SIM115 (transports')
    tail = _TailReader(loop)
    transports: list[asyncio.BaseTransport] = []
    try:
        transports.append((await loop.connect_read_pipe(lambda: tail, files[0]))[0])
        if ours is None:
            lines = LineReader(max_message_bytes)
            transports.append((await loop.connect_read_pipe(lambda: lines, files[1]))[0])
            stdin_transport, stdin = await loop.connect_write_pipe(Writable, files[2])
            transports.append(stdin_transport)
            writer = asyncio.StreamWriter(stdin_transport, stdin, None, loop)
        else:
            lines = SocketLineReader(max_message_bytes)
            socket_transport, _ = await loop.create_unix_connection(lambda: lines, sock=ours)
            transports.append(socket_transport)
            writer = asyncio.StreamWriter(socket_transport, lines, None, loop)
    except BaseException:
        # A start cut short: nothing the agent started may outlive it.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(agent.pid, signal.SIGKILL)
        for transport in transports:
            transport.close()
        for file in files:
            file.close()
        if ours is not None:
            ours.close()
        agent.close()
        raise
    return Started(agent, tail, lines, writer, transports)


def _spawn_problem(command: list[str], exc: SpawnFailed) -> str:
    if exc.kind == "exec":
        return start_problem(command[0], OSError(exc.errno, os.strerror(exc.errno)))
    if exc.kind == "value":  # a NUL in the command, its environment or cwd
        return f"Could not start agent command {command!r}: {exc}"
    if exc.kind == "cwd":
        return f"Could not enter the agent's working directory: {exc}"
    return f"Could not start agent command {command!r}: {exc}"


async def _stop_cancelled_spawn(spawning: asyncio.Future[SpawnedAgent]) -> None:
    """For a start cancelled while spawning: let the spawn finish, then kill the agent's group
    and wait until the spawner reaped it, so that the cancellation goes on with the agent gone.
    The caller re-raises."""
    await wait_out(spawning, KILL_REAP_S)
    if not spawning.done() or spawning.cancelled() or spawning.exception() is not None:
        return
    agent = spawning.result()
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(agent.pid, signal.SIGKILL)
    leftovers.note_ended(agent.pid)
    await wait_out(agent.exited, KILL_REAP_S)
    agent.close()


async def wait_out(future: asyncio.Future[Any], timeout_s: float) -> bool:
    """Wait until ``future`` is done, at most ``timeout_s``, through cancellations (a second
    Ctrl-C while an agent is being stopped). True when one came: the caller raises it then."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    cancelled = False
    while not future.done() and (remaining := deadline - loop.time()) > 0:
        try:
            await asyncio.wait((future,), timeout=remaining)
        except asyncio.CancelledError:
            cancelled = True
    return cancelled


def start_problem(program: str, exc: OSError) -> str:
    if isinstance(exc, FileNotFoundError):
        return _not_found_message(program)
    if isinstance(exc, PermissionError):
        return (
            f"Agent command is not executable: {program!r} (permission denied). Make it "
            f"executable (chmod +x) or start it through its interpreter, for example "
            f"{EXAMPLE_COMMAND}."
        )
    return (
        f"Could not start agent command {program!r}: {exc}. If it is a script, give it "
        f"a #! line or start it through its interpreter, for example {EXAMPLE_COMMAND}."
    )


def _not_found_message(program: str) -> str:
    if program == "python":
        return (
            "Agent command not found: 'python'. Neither python nor python3 is on PATH. Install "
            "Python, or set agent_command in suite.yaml to the full path of the interpreter that "
            f"runs your agent (for example {EXAMPLE_COMMAND})."
        )
    return (
        f"Agent command not found: {program!r}. trialrun could not start the agent because that "
        "program is not on PATH and is not an existing file. Install it, or set agent_command "
        "in suite.yaml to the command that starts your agent "
        f"(for example {EXAMPLE_COMMAND})."
    )
