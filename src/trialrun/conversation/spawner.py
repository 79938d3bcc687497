"""trialrun's side of the agent spawner (``seal_spawner.py``): one per run, started with the
run's first agent, it starts every agent, and applies the network seal to a replayed one
between fork and exec.

An agent started by a process of its own, a small single-threaded one, can be sealed there
(``preexec_fn`` is safe only without threads), and every agent starting the same way means one
code path to start, watch and stop them. ``AgentSpawner.spawn`` sends a request (the agent's
descriptors by SCM_RIGHTS) and waits for its reply; replies and exits arrive as JSON lines read
by the event loop. A ``SpawnedAgent`` is what ``AgentProcess`` holds for such an agent: its
pid, its exit status as the spawner reports it, and the reason it was killed when the spawner
died (every agent it started is killed then: the seal's bookkeeping went with it; the next spawn
starts a new spawner).
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import json
import os
import signal
import socket
import struct
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from trialrun.base import leftovers
from trialrun.errors import TrialrunError

__all__ = ["SPAWNER", "AgentSpawner", "SpawnFailed", "SpawnedAgent", "shared", "signal_name"]

SPAWNER = Path(__file__).with_name("seal_spawner.py")
_HEADER_FORMAT = "=II"
# Python ignores SIGPIPE, so a spawner gone away gives EPIPE; where the flag exists (not on
# macOS) it keeps that so for a host program that restored SIGPIPE.
_SEND_FLAGS = getattr(socket, "MSG_NOSIGNAL", 0)
_STOP_WAIT_S = 5.0
"""How long a spawner told to stop may take to exit (it kills what is left first)."""


class SpawnFailed(TrialrunError):
    """The agent never ran: ``kind`` is ``exec``, ``cwd``, ``seal``, ``value``, ``fork`` or
    ``lost`` (the spawner died); ``errno`` is the failed call's, 0 when there is none."""

    def __init__(self, kind: str, errno: int, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.errno = errno


class SpawnedAgent:
    """An agent the spawner started (in a new session: its pid is its group's id)."""

    def __init__(self, pid: int, loop: asyncio.AbstractEventLoop) -> None:
        self.pid = pid
        self.exited: asyncio.Future[None] = loop.create_future()
        self.returncode: int | None = None
        self.killed_because: str | None = None
        """Why trialrun killed it, when not for the case (the spawner died)."""

    def close(self) -> None:
        """As asyncio's transport does on close: an agent still running is killed."""
        if not self.exited.done():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(self.pid, signal.SIGKILL)

    def _ended(self, code: int, reason: str | None = None) -> None:
        if self.exited.done():
            return
        self.returncode = code
        self.killed_because = reason
        self.exited.set_result(None)


class AgentSpawner:
    """The run's spawner; ``close()`` at the end of the run stops it. It serves one event loop
    at a time: a spawn from another loop stops it and starts a new one."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None
        self._socket: socket.socket | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._buffer = b""
        self._next_id = 0
        self._pending: dict[int, asyncio.Future[SpawnedAgent]] = {}
        self._agents: dict[int, SpawnedAgent] = {}

    @property
    def pid(self) -> int | None:
        """The spawner's pid while one runs."""
        return None if self._process is None else self._process.pid

    @property
    def in_flight(self) -> int:
        """Spawns sent and not yet answered."""
        return len(self._pending)

    async def spawn(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: str | None,
        fds: Sequence[tuple[int, int]],
        ports: Sequence[int] | None,
        notify: int | None,
    ) -> SpawnedAgent:
        """Start ``argv`` with ``fds`` (ours, the number it has in the agent) in place, sealed
        by Landlock to ``ports`` and seccomp through ``notify`` (None: that layer is off; both
        None: not sealed).

        Raises ``SpawnFailed`` when it never ran. Cancelled, the agent may still start: it is
        killed with its group as soon as the spawner says it runs.
        """
        loop = asyncio.get_running_loop()
        sock = self._ensure(loop)
        ident = self._next_id
        self._next_id += 1
        request = {
            "id": ident,
            "argv": list(argv),
            "env": dict(env),
            "cwd": cwd,
            "fds": [target for _, target in fds],
            "ports": None if ports is None else list(ports),
            "notify": notify is not None,
        }
        payload = json.dumps(request).encode("ascii")
        passed = [fd for fd, _ in fds] + ([] if notify is None else [notify])
        reply: asyncio.Future[SpawnedAgent] = loop.create_future()
        self._pending[ident] = reply
        try:
            # Blocking, and brief: the spawner reads each request as soon as it is sent.
            sock.sendmsg(
                [struct.pack(_HEADER_FORMAT, len(payload), len(passed))],
                [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", passed))],
                _SEND_FLAGS,
            )
            sock.sendall(payload, _SEND_FLAGS)
        except OSError:
            self._lost()
        try:
            return await reply
        except asyncio.CancelledError:
            if not reply.done():
                reply.add_done_callback(_kill_when_started)
            raise

    def close(self) -> None:
        """Stop the spawner (it kills what it started that still runs) and reap it."""
        ended = self._hang_up()
        if ended is not None:
            self._forget(f"trialrun stopped the agent spawner (pid {ended[0].pid})")

    def _ensure(self, loop: asyncio.AbstractEventLoop) -> socket.socket:
        if self._socket is not None and self._loop is loop:
            return self._socket
        self.close()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-I", "-S", str(SPAWNER), str(theirs.fileno())],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),),
                # Out of the terminal's group: a Ctrl-C is trialrun's to handle, not its.
                start_new_session=True,
            )
        except OSError as exc:
            ours.close()
            problem = f"could not start the agent spawner: {exc}"
            raise SpawnFailed("fork", exc.errno or 0, problem) from None
        finally:
            theirs.close()
        leftovers.note_group(self._process.pid)
        self._socket, self._loop, self._buffer = ours, loop, b""
        loop.add_reader(ours.fileno(), self._readable)
        return ours

    def _readable(self) -> None:
        sock = self._socket
        assert sock is not None
        try:
            data = sock.recv(65536, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._lost()
            return
        *lines, self._buffer = (self._buffer + data).split(b"\n")
        for line in lines:
            self._reply(json.loads(line))

    def _reply(self, reply: dict[str, Any]) -> None:
        if "exited" in reply:
            agent = self._agents.pop(reply["exited"], None)
            if agent is not None:
                agent._ended(reply["code"])
            return
        future = self._pending.pop(reply["id"], None)
        if "pid" in reply:
            assert self._loop is not None
            agent = SpawnedAgent(reply["pid"], self._loop)
            self._agents[agent.pid] = agent
            leftovers.note_group(agent.pid)
            if future is not None and not future.done():
                future.set_result(agent)
            else:  # its start was cancelled: nothing of it may live on
                _kill_group(agent.pid)
            return
        if future is not None and not future.done():
            future.set_exception(SpawnFailed(reply["error"], reply["errno"], reply["message"]))

    def _lost(self) -> None:
        """The spawner died (or hung up): kill what it started; the next spawn starts anew."""
        ended = self._hang_up()
        if ended is None:
            return
        process, code = ended
        how = f"was killed by {signal_name(-code)}" if code < 0 else f"exited with code {code}"
        self._forget(f"the agent spawner (pid {process.pid}) {how}")

    def _hang_up(self) -> tuple[subprocess.Popen[bytes], int] | None:
        """Close our end and reap the spawner (killed if it outstays the wait); None if none
        runs. At end of file it kills its agents and exits; a dead one's status is there."""
        process, sock = self._process, self._socket
        if process is None or sock is None:
            return None
        self._detach()
        sock.close()
        try:
            code = process.wait(_STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            code = process.wait()
        return process, code

    def _detach(self) -> None:
        if self._loop is not None and self._socket is not None and not self._loop.is_closed():
            self._loop.remove_reader(self._socket.fileno())
        self._socket = None
        self._loop = None

    def _forget(self, reason: str) -> None:
        if self._process is not None:
            leftovers.note_ended(self._process.pid)
        self._process = None
        pending, self._pending = self._pending, {}
        agents, self._agents = self._agents, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(SpawnFailed("lost", 0, f"{reason} before the agent ran"))
        for agent in agents.values():
            _kill_group(agent.pid)
            agent._ended(-signal.SIGKILL, reason)


def _kill_when_started(future: asyncio.Future[SpawnedAgent]) -> None:
    if not future.cancelled() and future.exception() is None:
        _kill_group(future.result().pid)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    leftovers.note_ended(pid)


def signal_name(number: int) -> str:
    """``SIGKILL`` for 9; ``signal 99`` for a number that names none."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


_SHARED: AgentSpawner | None = None


def shared() -> AgentSpawner:
    """The spawner of agents started outside a run (``trialrun incident replay``, a direct
    ``run_agent``): one per process, stopped as the interpreter exits."""
    global _SHARED
    if _SHARED is None:
        import atexit

        _SHARED = AgentSpawner()
        atexit.register(_SHARED.close)
    return _SHARED
