"""One agent process: spawn it in its own process group, talk to it, and kill the whole group.

The agent runs in a new session (``start_new_session=True``), so the group id is its pid and a
signal to the group also reaches every helper it spawned that did not leave on purpose: no
``sleep 300`` outlives a case. Its stderr is drained all the time into a bounded ring, so a chatty
agent never blocks on a full pipe and a failure can show the last lines it wrote.

If trialrun itself is killed (SIGKILL: nothing of ours runs any more), the group is killed by
the watchdog of ``base.leftovers``, where it is noted while it may outlive us (or by the next
trialrun, should the watchdog be gone too).

Every agent, sealed or not, is started by the run's spawner (``conversation.spawner``; a
sealed one also gets the seal's layers there), which reaps it and reports its exit: the exit of
the agent itself, not the end of its pipes (a grandchild may hold stdout open long after). A
start cancelled while spawning (a Ctrl-C) waits for the spawn and kills the agent's whole group.

``start_agent`` may run well before the case's ``task_start`` (pre-starting): the agent loads
its imports meanwhile. The session that claims a ``StartedAgent`` stops it; one no session
claims is stopped by ``StartedAgent.discard``.

Two channels carry the protocol. ``stdio`` (RunLedger's): messages on the agent's stdin and
stdout. ``fd``: one end of a Unix socket pair is inherited by the agent and named in
``TRIALRUN_FD``; the protocol runs there, stdin is ``/dev/null`` and stdout joins stderr in the
tail, so a framework that prints to stdout (smolagents, verbose LangChain) cannot corrupt it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from trialrun.base import leftovers
from trialrun.conversation.lines import (
    ChannelLostError,
    LineReader,
    MessageTooLargeError,
    SocketLineReader,
    UnterminatedLine,
    Writable,
)
from trialrun.conversation.protocol import encode
from trialrun.conversation.spawner import AgentSpawner, SpawnedAgent, SpawnFailed, shared
from trialrun.conversation.tail import STDERR_TAIL_BYTES, STDERR_TAIL_LINES, StderrRing
from trialrun.errors import TrialrunError

if TYPE_CHECKING:
    from trialrun.conversation.seal import AgentSeal

__all__ = [
    "CHANNEL_FD_ENV",
    "STDERR_TAIL_BYTES",
    "STDERR_TAIL_LINES",
    "AgentProcess",
    "AgentStartError",
    "Channel",
    "ChannelLostError",
    "MessageTooLargeError",
    "Spawn",
    "StartedAgent",
    "StderrRing",
    "UnterminatedLine",
    "resolve_command",
    "start_agent",
]

Channel = Literal["stdio", "fd"]
CHANNEL_FD_ENV = "TRIALRUN_FD"
"""Names the agent's end of the socket pair when the channel is ``fd``."""
KILL_REAP_S = 5.0
"""How long a SIGKILLed agent may take to be reported as exited before we stop waiting."""
EXAMPLE_COMMAND = '["python3", "agent/agent.py"]'
_STDERR_SETTLE_S = 0.5
"""How long to wait, after the group is dead, for the last stderr bytes already in the pipe."""


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


class AgentProcess:
    """A running agent. Create it with ``await AgentProcess.start(...)``."""

    def __init__(
        self,
        agent: SpawnedAgent,
        tail: _TailReader,
        lines: LineReader,
        writer: asyncio.StreamWriter,
        transports: list[asyncio.BaseTransport],
        channel: Channel,
    ) -> None:
        self._agent = agent
        self._tail = tail
        self.pid = agent.pid
        self._lines = lines
        """Reads its stdout pipe (stdio), or the socket (fd channel) that also takes ours."""
        self._writer = writer
        self._transports = transports
        """Every transport of ours connected to the agent."""
        self._closed = False
        self._group_killed = False
        self._stop_asked = False
        self.channel = channel

    @classmethod
    async def start(
        cls,
        argv: Sequence[str],
        *,
        cwd: str | Path | None = None,
        env: Mapping[str, str] | None = None,
        max_message_bytes: int,
        channel: Channel = "stdio",
        spawner: AgentSpawner | None = None,
        seal: AgentSeal | None = None,
    ) -> AgentProcess:
        """Spawn ``argv`` (no shell) in a new process group, talking over ``channel``.

        ``env`` is the agent's whole environment (None: ours). ``PYTHONIOENCODING=utf-8`` and
        ``PYTHONUTF8=1`` are always set, so a Python agent speaks UTF-8 whatever the locale.
        ``spawner`` starts it (None: the process's ``spawner.shared()``), inside ``seal`` when
        one is given (conversation/seal.py).
        Raises ``AgentStartError`` with a message a user can act on.
        """
        child_env = dict(os.environ if env is None else env)
        child_env["PYTHONIOENCODING"] = "utf-8"
        child_env["PYTHONUTF8"] = "1"
        command = resolve_command(argv, child_env.get("PATH"))
        if cwd is not None and not Path(cwd).is_dir():
            raise AgentStartError(f"Agent working directory does not exist: {cwd}")
        return await _spawn(
            command, cwd, child_env, channel, max_message_bytes, spawner or shared(), seal
        )

    @property
    def returncode(self) -> int | None:
        """The agent's exit status once it exited (negative: killed by that signal)."""
        return self._agent.returncode

    @property
    def killed_because(self) -> str | None:
        """Why trialrun killed the agent when the case did not ask for it (its spawner died)."""
        return self._agent.killed_because

    @property
    def exited(self) -> bool:
        return self._agent.exited.done()

    def on_exit(self, callback: Callable[[], object]) -> None:
        """Have the event loop call ``callback`` once the agent itself has exited."""
        self._agent.exited.add_done_callback(lambda _: callback())

    async def wait_exited(self, timeout_s: float | None = None) -> bool:
        """Wait until the agent itself exits (its children may live on); False on timeout."""
        if self.exited:
            return True
        # asyncio.wait, unlike wait_for on Python 3.11, starts no task and cancels nothing.
        done, _ = await asyncio.wait((self._agent.exited,), timeout=timeout_s)
        return bool(done)

    async def send(self, message: Mapping[str, Any]) -> bool:
        """Write one message to the agent. False when the agent no longer reads its channel."""
        sent = self.write_nowait(encode(message))
        return await self.drain() if sent is None else sent

    def write_nowait(self, line: bytes) -> bool | None:
        """Write one encoded message (``protocol.encode``) without waiting: True once it is
        written, False when the agent no longer reads its channel, None when ``drain()`` must be
        awaited to know.

        The agent's inbox (a pipe or socket buffer) nearly always takes a whole message at once,
        and then there is nothing to wait for: a caller need not arm a timeout for it.
        """
        writer = self._writer
        if writer.is_closing():
            return False
        writer.write(line)
        if self._must_drain():
            return None
        return True

    async def drain(self) -> bool:
        """Wait until the agent took what was written. False when it no longer reads it."""
        try:
            await self._writer.drain()
        except ConnectionError:
            return False
        return True

    def _must_drain(self) -> bool:
        """Whether ``StreamWriter.drain`` would wait or raise instead of returning at once."""
        writer = self._writer
        if writer.is_closing() or writer.transport.get_write_buffer_size() > 0:
            return True
        # On the fd channel the writer shares the socket with our reader: once the agent reset
        # it, drain raises. On stdio the pipes are apart.
        return self.channel == "fd" and self._lines.lost is not None

    async def read_line(self) -> bytes | None:
        """The next protocol line without its newline; None at end of stream.

        A final line without a newline still counts; it comes as an ``UnterminatedLine``, so a
        caller can tell an agent that died mid-message. Raises ``MessageTooLargeError`` for a
        line longer than ``max_message_bytes`` and ``ChannelLostError`` when the agent reset
        the channel (see ``lines.LineReader.readline``).
        """
        return await self._lines.readline()

    def close_stdin(self) -> None:
        """Tell the agent no more messages come: stdin closes, or the socket's write side."""
        writer = self._writer
        if writer.is_closing():
            return
        if self.channel == "fd":
            with contextlib.suppress(OSError):
                writer.write_eof()
        else:
            writer.close()

    def stderr_tail(self) -> str:
        return self._tail.tail.text()

    def kill_now(self) -> None:
        """SIGKILL the whole group at once, without waiting (used when we are being cancelled)."""
        self._signal_group(signal.SIGKILL)

    async def kill_and_reap(self) -> None:
        """SIGKILL the whole group and wait until the agent is reaped, cancelled or not.

        For a teardown that is itself cancelled (a second SIGTERM, ``asyncio.run`` cancelling
        what is left): leaving then would close the event loop before the spawner reported
        the agent's exit, and its status would be lost. The wait is bounded; a cancellation
        that came meanwhile is raised once it is over.
        """
        self.kill_now()
        if await wait_out(self._agent.exited, KILL_REAP_S):
            raise asyncio.CancelledError

    async def terminate(self, grace_s: float) -> None:
        """Stop the whole group: SIGTERM, up to ``grace_s`` for the agent to exit, then SIGKILL.

        SIGKILL always goes to the group, even when the agent exited by itself, so helpers it
        left behind die too. Idempotent; never leaves the agent unreaped or a pipe open.
        """
        if self._closed:
            return
        if not self.exited:
            self._ask_to_stop()
            await self.wait_exited(grace_s)
        # No SIGTERM for helpers of an agent that exited: the SIGKILL right after leaves them no
        # time to act on it.
        self._signal_group(signal.SIGKILL)
        await self.wait_exited(KILL_REAP_S)
        await self._settle_stderr()
        self.close()

    async def finish(self, grace_s: float) -> None:
        """After the final output: stop the group at once; ``grace_s`` is the agent's to clean up.

        The agent has nothing left to say, so no time goes to waiting for it to leave by itself.
        SIGTERM comes before the end of its stdin: an agent that reads on meets the signal, not
        an end of input it might take for more work.
        """
        if not self.exited:
            self._ask_to_stop()
        self.close_stdin()
        await self.terminate(grace_s)

    @property
    def stopped_by_us(self) -> bool:
        """The agent died of the signal trialrun sent to stop it (SIGTERM, or SIGKILL after it)."""
        code = self.returncode
        if code == -signal.SIGTERM:
            return self._stop_asked
        return code == -signal.SIGKILL and self._group_killed

    def _ask_to_stop(self) -> None:
        # Once: a second SIGTERM would interrupt the cleanup the first one started.
        if not self._stop_asked:
            self._stop_asked = True
            self._signal_group(signal.SIGTERM)

    def close(self) -> None:
        """Close the pipes and the transport (kills the agent if it still runs). Synchronous."""
        if self._closed:
            return
        self._closed = True
        for transport in self._transports:
            transport.close()
        self._agent.close()

    def _signal_group(self, signum: signal.Signals) -> None:
        # The group outlives the agent while its children run, so this is not a stale-pid risk.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signum)
        if signum == signal.SIGKILL and not self._group_killed:
            self._group_killed = True
            leftovers.note_ended(self.pid)

    async def _settle_stderr(self) -> None:
        if not self._tail.tail_closed.done():
            await asyncio.wait((self._tail.tail_closed,), timeout=_STDERR_SETTLE_S)


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


def resolve_command(argv: Sequence[str], path: str | None) -> list[str]:
    """``argv`` ready to spawn: bare ``python`` becomes ``python3`` when only that exists."""
    if not argv or not argv[0]:
        raise AgentStartError(
            "agent_command is empty: set agent_command in suite.yaml to the command that starts "
            f"your agent (for example {EXAMPLE_COMMAND})."
        )
    command = list(argv)
    if command[0] != "python":
        return command
    import shutil  # only here: it imports bz2 and lzma, ~7 M instructions before the first agent

    if shutil.which("python", path=path) is None:
        python3 = shutil.which("python3", path=path)
        if python3 is not None:
            command[0] = "python3"
    return command


async def _spawn(
    command: list[str],
    cwd: str | Path | None,
    env: dict[str, str],
    channel: Channel,
    max_message_bytes: int,
    spawner: AgentSpawner,
    seal: AgentSeal | None,
) -> AgentProcess:
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
    return AgentProcess(agent, tail, lines, writer, transports, channel)


def _spawn_problem(command: list[str], exc: SpawnFailed) -> str:
    if exc.kind == "exec":
        return _start_problem(command[0], OSError(exc.errno, os.strerror(exc.errno)))
    if exc.kind == "cwd":
        return f"Could not enter the agent's working directory: {exc}"
    # A NUL in the command, its environment or cwd ("value"), or any other failure.
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


def _start_problem(program: str, exc: OSError) -> str:
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
