"""How an agent process is started, the seam under ``AgentProcess``: asyncio's subprocess for
an unsealed agent, the run's sealed spawner (``conversation.spawner``) for a replayed one.

Either way the agent gets the same descriptors (stdin, stdout, the tail pipe, the ``fd``
channel's socket), leads a new session, and is known to ``AgentProcess`` by a ``Handle``: its
pid, its exit and exit status, and ``close``. A start cancelled while spawning (a Ctrl-C) waits
for the spawn and kills the agent's whole group; a failed start is an ``AgentStartError`` worded
the same on both paths.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from trialrun.base import leftovers
from trialrun.conversation.spawner import SpawnedAgent, SpawnFailed
from trialrun.conversation.tail import StderrRing
from trialrun.errors import TrialrunError

if TYPE_CHECKING:
    from trialrun.conversation.seal import AgentSeal

__all__ = [
    "EXAMPLE_COMMAND",
    "KILL_REAP_S",
    "AgentStartError",
    "Handle",
    "Started",
    "spawn_sealed",
    "spawn_subprocess",
    "start_problem",
    "stop_group",
]

KILL_REAP_S = 5.0
"""How long a SIGKILLed agent may take to be reported as exited before we stop waiting."""
EXAMPLE_COMMAND = '["python3", "agent/agent.py"]'


class AgentStartError(TrialrunError):
    """The agent command could not be started (the case fails as ``agent_error``)."""


class _AgentProtocol(asyncio.subprocess.SubprocessStreamProtocol):
    """The standard stream protocol, plus the agent's own exit and its output tail.

    The tail pipe (stderr; stdout too on the ``fd`` channel) feeds ``tail`` as its bytes arrive:
    no reader task per agent, and no buffer that could fill up and block a chatty agent.
    """

    def __init__(self, limit: int, loop: asyncio.AbstractEventLoop, tail_fd: int) -> None:
        super().__init__(limit=limit, loop=loop)
        self.exited: asyncio.Future[None] = loop.create_future()
        self.tail = StderrRing()
        self.tail_closed: asyncio.Future[None] = loop.create_future()
        self._tail_fd = tail_fd

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        if fd == self._tail_fd:
            assert isinstance(data, bytes)  # pipes carry bytes; str exists only in the stubs
            self.tail.feed(data)
        else:
            super().pipe_data_received(fd, data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        super().pipe_connection_lost(fd, exc)
        if fd == self._tail_fd and not self.tail_closed.done():
            self.tail_closed.set_result(None)

    def process_exited(self) -> None:
        super().process_exited()
        if not self.exited.done():
            self.exited.set_result(None)


_PIDFD_LOOPS: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()


def _watch_children_with_pidfd(loop: asyncio.AbstractEventLoop) -> None:
    """Python 3.11 starts a new thread to wait for each child it spawns; a pidfd needs none.

    Python 3.12 picks the pidfd watcher by itself, and its child-watcher API is deprecated.
    """
    if sys.version_info >= (3, 12) or loop in _PIDFD_LOOPS or not hasattr(os, "pidfd_open"):
        return
    try:
        os.close(os.pidfd_open(os.getpid()))
    except OSError:  # kernel older than 5.3, or a sandbox that forbids pidfds
        return
    watcher = asyncio.PidfdChildWatcher()
    asyncio.set_child_watcher(watcher)
    watcher.attach_loop(loop)
    _PIDFD_LOOPS.add(loop)


class Handle(Protocol):
    """The seam between an agent and how it was started: asyncio's subprocess (an unsealed
    agent) or the run's sealed spawner (``conversation.spawner``). The rest of ``AgentProcess``
    and the conversation above it do not know which."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    @property
    def exited(self) -> asyncio.Future[None]: ...

    @property
    def killed_because(self) -> str | None: ...

    def has_exited(self) -> bool:
        """Whether it has exited, as far as can be told before its exit is reported."""

    def close(self) -> None:
        """Close its pipes; an agent still running is killed."""


class _Tail(Protocol):
    """Where the agent's output tail (stderr; stdout too on the ``fd`` channel) goes."""

    tail: StderrRing
    tail_closed: asyncio.Future[None]


class _SubprocessHandle:
    """An agent started by asyncio (``loop.subprocess_exec``), which reaps it."""

    def __init__(self, transport: asyncio.SubprocessTransport, protocol: _AgentProtocol) -> None:
        self._transport = transport
        self.pid: int = transport.get_pid()
        self.exited = protocol.exited
        self.killed_because: str | None = None

    @property
    def returncode(self) -> int | None:
        return self._transport.get_returncode()

    def has_exited(self) -> bool:
        """Whether the kernel holds the agent's exit status (WNOWAIT: the loop still reaps it)."""
        if not hasattr(os, "waitid"):  # not on every Unix: then only the loop can tell
            return False
        try:
            status = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:  # reaped already: its exit is on its way to the loop
            return True
        return status is not None

    def close(self) -> None:
        self._transport.close()


class _SealedHandle:
    """An agent the sealed spawner started, with the pipes we connected to it."""

    def __init__(self, agent: SpawnedAgent, pipes: list[asyncio.BaseTransport]) -> None:
        self._agent = agent
        self._pipes = pipes
        self.pid = agent.pid
        self.exited = agent.exited

    @property
    def returncode(self) -> int | None:
        return self._agent.returncode

    @property
    def killed_because(self) -> str | None:
        return self._agent.killed_because

    def has_exited(self) -> bool:
        return self._agent.has_exited()

    def close(self) -> None:
        for pipe in self._pipes:
            pipe.close()
        self._agent.close()


class _TailReader(asyncio.Protocol):
    """The output tail's pipe of a sealed agent (asyncio's subprocess protocol reads it else)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.tail = StderrRing()
        self.tail_closed: asyncio.Future[None] = loop.create_future()

    def data_received(self, data: bytes) -> None:
        self.tail.feed(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.tail_closed.done():
            self.tail_closed.set_result(None)


class _StdinProtocol(asyncio.streams.FlowControlMixin):
    """The stdin pipe of a sealed agent, written through a ``StreamWriter`` (``drain``)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(loop)
        self._closed: asyncio.Future[None] = loop.create_future()

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        if not self._closed.done():
            self._closed.set_result(None)

    def _get_close_waiter(self, stream: asyncio.StreamWriter) -> asyncio.Future[None]:
        return self._closed


@dataclass
class Started:
    """What a spawn gives, however it was done: the handle, the tail and (stdio) stdin."""

    handle: Handle
    tail: _Tail
    stdin: asyncio.StreamWriter | None


async def spawn_subprocess(
    loop: asyncio.AbstractEventLoop,
    command: list[str],
    cwd: str | Path | None,
    env: dict[str, str],
    max_message_bytes: int,
    stdout_w: int,
    theirs: socket.socket | None,
) -> Started:
    """Start an unsealed agent through asyncio: stdout goes to ``stdout_w`` (stdio channel) or
    joins stderr in the tail, the protocol then running over ``theirs`` (fd channel)."""
    _watch_children_with_pidfd(loop)
    if theirs is None:
        pipes: dict[str, Any] = {
            "stdin": subprocess.PIPE,
            "stdout": stdout_w,
            "stderr": subprocess.PIPE,
        }
    else:
        pipes = {
            "stdin": subprocess.DEVNULL,
            "stdout": subprocess.PIPE,
            "stderr": subprocess.STDOUT,
            "pass_fds": (theirs.fileno(),),
        }
    # On the fd channel the agent's stdout joins its stderr (stderr=STDOUT) in the tail.
    tail_fd = 2 if theirs is None else 1
    spawning = asyncio.ensure_future(
        loop.subprocess_exec(
            lambda: _AgentProtocol(max_message_bytes, loop, tail_fd),
            *command,
            cwd=cwd,
            env=env,
            start_new_session=True,
            **pipes,
        )
    )
    try:
        # Shielded: a Ctrl-C while asyncio connects the pipes would otherwise stop only the
        # agent itself, and whatever it had started in its group would live on.
        transport, protocol = await asyncio.shield(spawning)
    except asyncio.CancelledError:
        await _stop_cancelled_spawn(spawning, lambda started: _SubprocessHandle(*started))
        raise
    except OSError as exc:
        raise AgentStartError(start_problem(command[0], exc)) from None
    except ValueError as exc:  # a NUL in the command, its environment or cwd
        raise AgentStartError(f"Could not start agent command {command!r}: {exc}") from None
    leftovers.note_group(transport.get_pid())
    process = asyncio.subprocess.Process(transport, protocol, loop)
    return Started(_SubprocessHandle(transport, protocol), protocol, process.stdin)


async def spawn_sealed(
    loop: asyncio.AbstractEventLoop,
    command: list[str],
    cwd: str | Path | None,
    env: dict[str, str],
    stdout_w: int,
    theirs: socket.socket | None,
    seal: AgentSeal,
) -> Started:
    """Start a sealed agent through the run's spawner, with the same descriptors asyncio would
    give it: pipes of ours for stdin (stdio channel) and the tail, ``theirs`` at its number."""
    tail_r, tail_w = os.pipe()
    if theirs is None:
        stdin_r, stdin_w = os.pipe()
        fds = [(stdin_r, 0), (stdout_w, 1), (tail_w, 2)]
    else:
        stdin_r, stdin_w = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC), -1
        fds = [(stdin_r, 0), (tail_w, 1), (tail_w, 2), (theirs.fileno(), theirs.fileno())]
    spawning = asyncio.ensure_future(
        seal.spawner.spawn(
            command,
            env=env,
            cwd=None if cwd is None else str(cwd),
            fds=fds,
            ports=seal.ports,
            notify=seal.notify_fd(),
        )
    )
    try:
        # Shielded, as asyncio's spawn is: a Ctrl-C now must still find the agent's group.
        agent = await asyncio.shield(spawning)
    except BaseException as exc:
        if isinstance(exc, asyncio.CancelledError):
            await _stop_cancelled_spawn(spawning, lambda started: _SealedHandle(started, []))
        os.close(tail_r)
        if stdin_w >= 0:
            os.close(stdin_w)
        if isinstance(exc, SpawnFailed):
            raise AgentStartError(_spawn_problem(command, exc)) from None
        raise
    finally:
        os.close(tail_w)
        os.close(stdin_r)
        seal.spawned()
    pipes: list[asyncio.BaseTransport] = []
    handle = _SealedHandle(agent, pipes)
    try:
        tail_pipe = open(tail_r, "rb", buffering=0)  # noqa: SIM115 (the transport's now)
        tail_transport, tail = await loop.connect_read_pipe(lambda: _TailReader(loop), tail_pipe)
        pipes.append(tail_transport)
        if stdin_w < 0:
            return Started(handle, tail, None)
        stdin_pipe = open(stdin_w, "wb", buffering=0)  # noqa: SIM115 (the transport's now)
        stdin_transport, stdin = await loop.connect_write_pipe(
            lambda: _StdinProtocol(loop), stdin_pipe
        )
        pipes.append(stdin_transport)
    except BaseException:
        stop_group(handle)
        raise
    return Started(handle, tail, asyncio.StreamWriter(stdin_transport, stdin, None, loop))


def _spawn_problem(command: list[str], exc: SpawnFailed) -> str:
    if exc.kind == "exec":
        return start_problem(command[0], OSError(exc.errno, os.strerror(exc.errno)))
    if exc.kind == "value":  # a NUL in the command, its environment or cwd
        return f"Could not start agent command {command!r}: {exc}"
    if exc.kind == "cwd":
        return f"Could not enter the agent's working directory: {exc}"
    return f"Could not start agent command {command!r}: {exc}"


def stop_group(handle: Handle) -> None:
    """SIGKILL an agent's whole group (it leads a session of its own), then close its pipes:
    for an agent whose start was cut short, so that nothing it started outlives the run."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(handle.pid, signal.SIGKILL)
    handle.close()


async def _stop_cancelled_spawn(
    spawning: asyncio.Future[Any], handle_of: Callable[[Any], Handle]
) -> None:
    """For a start cancelled while spawning: let the spawn finish, then kill the agent's group
    and reap it, each wait bounded. Left unreaped, the agent would keep the event loop's child
    watcher waiting as the loop closes. Further cancellations wait too; the caller re-raises."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + KILL_REAP_S
    while not spawning.done() and (remaining := deadline - loop.time()) > 0:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait((spawning,), timeout=remaining)
    if not spawning.done() or spawning.cancelled() or spawning.exception() is not None:
        return
    handle = handle_of(spawning.result())
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(handle.pid, signal.SIGKILL)
    leftovers.note_ended(handle.pid)
    while not handle.exited.done() and (remaining := deadline - loop.time()) > 0:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait((handle.exited,), timeout=remaining)
    handle.close()


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
