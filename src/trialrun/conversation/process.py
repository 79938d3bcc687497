"""One agent process: spawn it in its own process group, talk to it, and kill the whole group.

The agent runs in a new session (``start_new_session=True``), so the group id is its pid and a
signal to the group also reaches every helper it spawned that did not leave on purpose: no
``sleep 300`` outlives a case. Its stderr is drained all the time into a bounded ring, so a chatty
agent never blocks on a full pipe and a failure can show the last lines it wrote.

If trialrun itself is killed (SIGKILL: nothing of ours runs any more), the group is killed by
the watchdog of ``base.leftovers``, where it is noted while it may outlive us (or by the next
trialrun, should the watchdog be gone too).

asyncio's ``Process.wait()`` only returns once the pipes are closed too (a grandchild holding
stdout would hang it), so the exit of the agent itself is observed through the protocol's
``process_exited`` callback instead.

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
import subprocess
import sys
import weakref
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from trialrun.base import leftovers
from trialrun.base.linesredact import LineRedactor
from trialrun.base.redact import redact_text
from trialrun.conversation.lines import (
    ChannelLostError,
    LineReader,
    MessageTooLargeError,
    SocketLineReader,
    UnterminatedLine,
)
from trialrun.conversation.protocol import encode
from trialrun.conversation.spawner import SpawnedAgent, SpawnFailed
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
    "StderrRing",
    "UnterminatedLine",
    "resolve_command",
]

STDERR_TAIL_LINES = 200
STDERR_TAIL_BYTES = 64 * 1024
_STDERR_SETTLE_S = 0.5
"""How long to wait, after the group is dead, for the last stderr bytes already in the pipe."""
_KILL_REAP_S = 5.0
"""How long a SIGKILLed agent may take to be reported as exited before we stop waiting."""

_EXAMPLE_COMMAND = '["python3", "agent/agent.py"]'

Channel = Literal["stdio", "fd"]
CHANNEL_FD_ENV = "TRIALRUN_FD"
"""Names the agent's end of the socket pair when the channel is ``fd``."""


class AgentStartError(TrialrunError):
    """The agent command could not be started (the case fails as ``agent_error``)."""


class StderrRing:
    """The last lines an agent wrote to stderr, bounded in lines and in bytes, redacted.

    A private key block is dropped as its lines arrive (``LineRedactor``), before the ring can
    drop its BEGIN line and keep the rest; everything else is redacted when the text is read
    (a line is kept whole or dropped whole, so no secret is cut in two on the way), which costs
    a chatty agent nothing per line.
    """

    def __init__(self, max_lines: int = STDERR_TAIL_LINES, max_bytes: int = STDERR_TAIL_BYTES):
        self._lines: deque[bytes] = deque()
        self._max_lines = max_lines
        self._max_bytes = max_bytes
        self._size = 0
        self._partial = bytearray()
        self._redactor = LineRedactor()

    def feed(self, chunk: bytes) -> None:
        """Add the next bytes, in chunks of any size: how they were split changes nothing."""
        self._partial += chunk
        if b"\n" in chunk:
            data = bytes(self._partial)
            *complete, rest = data.split(b"\n")
            self._partial = bytearray(rest)
            if self._redactor.in_block or b"-----BEGIN" in data:
                for line in complete:
                    self._push_guarded(line)
            else:
                for line in complete:
                    self._push(line)
        if len(self._partial) > self._max_bytes:
            # One endless line: keep its end, which is what a reader wants to see, redacted
            # before it is cut.
            text = self._redactor.unfinished(self._partial.decode("utf-8", "replace"))
            self._partial = bytearray(text.encode("utf-8")[-self._max_bytes :])

    def text(self) -> str:
        lines = list(self._lines)
        if self._partial:
            lines.append(bytes(self._partial))
        return redact_text(b"\n".join(lines).decode("utf-8", "replace"))

    def _push_guarded(self, line: bytes) -> None:
        """``_push`` for lines that may open, lie in or close a private key block."""
        if self._redactor.in_block or b"-----BEGIN" in line:
            text = self._redactor.line(line.decode("utf-8", "replace"))
            if text is None:
                return
            line = text.encode("utf-8")
        self._push(line)

    def _push(self, line: bytes) -> None:
        line = line[-self._max_bytes :]
        self._lines.append(line)
        self._size += len(line) + 1
        while len(self._lines) > self._max_lines or self._size > self._max_bytes:
            self._size -= len(self._lines.popleft()) + 1


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


class _Handle(Protocol):
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
class _Started:
    """What a spawn gives, however it was done: the handle, the tail and (stdio) stdin."""

    handle: _Handle
    tail: _Tail
    stdin: asyncio.StreamWriter | None


class AgentProcess:
    """A running agent. Create it with ``await AgentProcess.start(...)``."""

    def __init__(
        self,
        started: _Started,
        max_message_bytes: int,
        messages: tuple[asyncio.ReadTransport, LineReader],
        socket_writer: asyncio.StreamWriter | None = None,
    ) -> None:
        self._handle = started.handle
        self._tail = started.tail
        self.pid = started.handle.pid
        self._messages, self._lines = messages
        """The agent's stdout pipe (stdio), or the socket (fd channel) that also takes ours."""
        if socket_writer is None:
            assert started.stdin is not None
            self._writer: asyncio.StreamWriter = started.stdin
        else:
            self._writer = socket_writer
        self._closed = False
        self._group_killed = False
        self.max_message_bytes = max_message_bytes
        self.channel: Channel = "stdio" if socket_writer is None else "fd"

    @classmethod
    async def start(
        cls,
        argv: Sequence[str],
        *,
        cwd: str | Path | None = None,
        env: Mapping[str, str] | None = None,
        max_message_bytes: int,
        channel: Channel = "stdio",
        seal: AgentSeal | None = None,
    ) -> AgentProcess:
        """Spawn ``argv`` (no shell) in a new process group, talking over ``channel``.

        ``env`` is the agent's whole environment (None: ours). ``PYTHONIOENCODING=utf-8`` and
        ``PYTHONUTF8=1`` are always set, so a Python agent speaks UTF-8 whatever the locale.
        ``seal``: the run's sealed spawner starts the agent inside the seal
        (conversation/seal.py, conversation/spawner.py); else asyncio starts it.
        Raises ``AgentStartError`` with a message a user can act on.
        """
        child_env = dict(os.environ if env is None else env)
        child_env["PYTHONIOENCODING"] = "utf-8"
        child_env["PYTHONUTF8"] = "1"
        command = resolve_command(argv, child_env.get("PATH"))
        if cwd is not None and not Path(cwd).is_dir():
            raise AgentStartError(f"Agent working directory does not exist: {cwd}")
        loop = asyncio.get_running_loop()
        ours: socket.socket | None = None
        theirs: socket.socket | None = None
        stdout_r, stdout_w = -1, -1
        if channel == "stdio":
            # stdout on a pipe of our own, read by LineReader (see conversation/lines.py).
            stdout_r, stdout_w = os.pipe()
        else:
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            child_env[CHANNEL_FD_ENV] = str(theirs.fileno())
        try:
            if seal is None:
                started = await _spawn_subprocess(
                    loop, command, cwd, child_env, max_message_bytes, stdout_w, theirs
                )
            else:
                started = await _spawn_sealed(loop, command, cwd, child_env, stdout_w, theirs, seal)
        except BaseException:
            if ours is not None:
                ours.close()
            if stdout_r >= 0:
                os.close(stdout_r)
            raise
        finally:
            # The agent holds its own copy now; ours must go, or its exit would never show as EOF.
            if theirs is not None:
                theirs.close()
            if stdout_w >= 0:
                os.close(stdout_w)
        handle = started.handle
        if ours is None:
            stdout_pipe = open(stdout_r, "rb", buffering=0)  # noqa: SIM115 (the transport's now)
            try:
                stdout = await loop.connect_read_pipe(
                    lambda: LineReader(max_message_bytes), stdout_pipe
                )
            except BaseException:
                stdout_pipe.close()
                _stop_group(handle)
                raise
            return cls(started, max_message_bytes, stdout)
        try:
            sock_transport, lines = await loop.create_unix_connection(
                lambda: SocketLineReader(max_message_bytes), sock=ours
            )
        except BaseException:
            ours.close()
            _stop_group(handle)
            raise
        writer = asyncio.StreamWriter(sock_transport, lines, None, loop)
        return cls(started, max_message_bytes, (sock_transport, lines), writer)

    @property
    def returncode(self) -> int | None:
        """The agent's exit status once it exited (negative: killed by that signal)."""
        return self._handle.returncode

    @property
    def killed_because(self) -> str | None:
        """Why trialrun killed the agent when the case did not ask for it (its spawner died)."""
        return self._handle.killed_because

    @property
    def exited(self) -> bool:
        return self._handle.exited.done()

    def on_exit(self, callback: Callable[[], object]) -> None:
        """Have the event loop call ``callback`` once the agent itself has exited."""
        self._handle.exited.add_done_callback(lambda _: callback())

    async def wait_exited(self, timeout_s: float | None = None) -> bool:
        """Wait until the agent itself exits (its children may live on); False on timeout."""
        if self.exited:
            return True
        # asyncio.wait, unlike wait_for on Python 3.11, starts no task and cancels nothing.
        done, _ = await asyncio.wait((self._handle.exited,), timeout=timeout_s)
        if done:
            return True
        # The timeout and the exit can be due in the same turn of a loop that a busy machine
        # held back, and the timeout runs first: ask the kernel before saying the agent runs.
        if not self._handle.has_exited():
            return False
        await self._handle.exited  # the loop is about to reap it; its status comes with it
        return True

    async def send(self, message: Mapping[str, Any]) -> bool:
        """Write one message to the agent. False when the agent no longer reads its channel."""
        sent = self.send_nowait(message)
        return await self.drain() if sent is None else sent

    def send_nowait(self, message: Mapping[str, Any]) -> bool | None:
        """Write one message without waiting: True once it is written, False when the agent no
        longer reads its channel, None when ``drain()`` must be awaited to know.

        The agent's inbox (a pipe or socket buffer) nearly always takes a whole message at once,
        and then there is nothing to wait for: a caller need not arm a timeout for it.
        """
        return self.write_nowait(encode(message))

    def write_nowait(self, line: bytes) -> bool | None:
        """``send_nowait`` for a message already encoded (``protocol.encode``)."""
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
        what is left): leaving then would close the event loop while its child watcher still
        waits for the agent ("RuntimeWarning: A loop is being detached from a child watcher
        with pending handlers") and leave a zombie. The wait is bounded; a cancellation that
        came meanwhile is raised once it is over.
        """
        self.kill_now()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _KILL_REAP_S
        cancelled = False
        while not self.exited and (remaining := deadline - loop.time()) > 0:
            try:
                await asyncio.wait((self._handle.exited,), timeout=remaining)
            except asyncio.CancelledError:
                cancelled = True
        if cancelled:
            raise asyncio.CancelledError

    async def terminate(self, grace_s: float) -> None:
        """Stop the whole group: SIGTERM, up to ``grace_s`` for the agent to exit, then SIGKILL.

        SIGKILL always goes to the group, even when the agent exited by itself, so helpers it
        left behind die too. Idempotent; never leaves the agent unreaped or a pipe open.
        """
        if self._closed:
            return
        if not self.exited:
            self._signal_group(signal.SIGTERM)
            await self.wait_exited(grace_s)
        # No SIGTERM for helpers of an agent that exited: the SIGKILL right after leaves them no
        # time to act on it.
        self._signal_group(signal.SIGKILL)
        await self.wait_exited(_KILL_REAP_S)
        await self._settle_stderr()
        self.close()

    async def finish(self, grace_s: float) -> None:
        """After the final output: close stdin, let the agent exit, then stop its group."""
        self.close_stdin()
        await self.wait_exited(min(grace_s, 0.5))
        await self.terminate(grace_s)

    def close(self) -> None:
        """Close the pipes and the transport (kills the agent if it still runs). Synchronous."""
        if self._closed:
            return
        self._closed = True
        if self.channel == "fd":
            self._writer.close()
        self._messages.close()
        self._handle.close()

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


async def _spawn_subprocess(
    loop: asyncio.AbstractEventLoop,
    command: list[str],
    cwd: str | Path | None,
    env: dict[str, str],
    max_message_bytes: int,
    stdout_w: int,
    theirs: socket.socket | None,
) -> _Started:
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
        raise AgentStartError(_start_problem(command[0], exc)) from None
    except ValueError as exc:  # a NUL in the command, its environment or cwd
        raise AgentStartError(f"Could not start agent command {command!r}: {exc}") from None
    leftovers.note_group(transport.get_pid())
    process = asyncio.subprocess.Process(transport, protocol, loop)
    return _Started(_SubprocessHandle(transport, protocol), protocol, process.stdin)


async def _spawn_sealed(
    loop: asyncio.AbstractEventLoop,
    command: list[str],
    cwd: str | Path | None,
    env: dict[str, str],
    stdout_w: int,
    theirs: socket.socket | None,
    seal: AgentSeal,
) -> _Started:
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
            return _Started(handle, tail, None)
        stdin_pipe = open(stdin_w, "wb", buffering=0)  # noqa: SIM115 (the transport's now)
        stdin_transport, stdin = await loop.connect_write_pipe(
            lambda: _StdinProtocol(loop), stdin_pipe
        )
        pipes.append(stdin_transport)
    except BaseException:
        _stop_group(handle)
        raise
    return _Started(handle, tail, asyncio.StreamWriter(stdin_transport, stdin, None, loop))


def _spawn_problem(command: list[str], exc: SpawnFailed) -> str:
    if exc.kind == "exec":
        return _start_problem(command[0], OSError(exc.errno, os.strerror(exc.errno)))
    if exc.kind == "value":  # a NUL in the command, its environment or cwd
        return f"Could not start agent command {command!r}: {exc}"
    if exc.kind == "cwd":
        return f"Could not enter the agent's working directory: {exc}"
    return f"Could not start agent command {command!r}: {exc}"


def _stop_group(handle: _Handle) -> None:
    """SIGKILL an agent's whole group (it leads a session of its own), then close its pipes:
    for an agent whose start was cut short, so that nothing it started outlives the run."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(handle.pid, signal.SIGKILL)
    handle.close()


async def _stop_cancelled_spawn(
    spawning: asyncio.Future[Any], handle_of: Callable[[Any], _Handle]
) -> None:
    """For a start cancelled while spawning: let the spawn finish, then kill the agent's group
    and reap it, each wait bounded. Left unreaped, the agent would keep the event loop's child
    watcher waiting as the loop closes. Further cancellations wait too; the caller re-raises."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + _KILL_REAP_S
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


def resolve_command(argv: Sequence[str], path: str | None) -> list[str]:
    """``argv`` ready to spawn: bare ``python`` becomes ``python3`` when only that exists."""
    if not argv or not argv[0]:
        raise AgentStartError(
            "agent_command is empty: set agent_command in suite.yaml to the command that starts "
            f"your agent (for example {_EXAMPLE_COMMAND})."
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


def _start_problem(program: str, exc: OSError) -> str:
    if isinstance(exc, FileNotFoundError):
        return _not_found_message(program)
    if isinstance(exc, PermissionError):
        return (
            f"Agent command is not executable: {program!r} (permission denied). Make it "
            f"executable (chmod +x) or start it through its interpreter, for example "
            f"{_EXAMPLE_COMMAND}."
        )
    return (
        f"Could not start agent command {program!r}: {exc}. If it is a script, give it "
        f"a #! line or start it through its interpreter, for example {_EXAMPLE_COMMAND}."
    )


def _not_found_message(program: str) -> str:
    if program == "python":
        return (
            "Agent command not found: 'python'. Neither python nor python3 is on PATH. Install "
            "Python, or set agent_command in suite.yaml to the full path of the interpreter that "
            f"runs your agent (for example {_EXAMPLE_COMMAND})."
        )
    return (
        f"Agent command not found: {program!r}. trialrun could not start the agent because that "
        "program is not on PATH and is not an existing file. Install it, or set agent_command "
        "in suite.yaml to the command that starts your agent "
        f"(for example {_EXAMPLE_COMMAND})."
    )
