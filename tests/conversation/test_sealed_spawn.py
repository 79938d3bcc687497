"""Sealed agents start from the run's one spawner (``conversation/spawner.py``), as every agent
does: everything an unsealed agent has, a sealed one has too (exit status, signals, stdio and fd
channels, its group killed on a Ctrl-C during the spawn), the seal is applied per agent, a layer
that cannot be applied stops the agent before it runs, and a dead spawner takes its agents with
it, named.

Every listener is the test's own on 127.0.0.1; the agents are small real programs.
"""

from __future__ import annotations

import asyncio
import functools
import os
import signal
import socket
import sys
import time
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest

from trialrun.conversation.process import AgentProcess, AgentStartError
from trialrun.conversation.seal import AgentSeal, SealLayers, SealPolicy, probe
from trialrun.conversation.spawner import AgentSpawner, SpawnFailed

LAYERS = probe()
pytestmark = pytest.mark.skipif(not LAYERS.any, reason="this kernel offers no seal layer")
LIMIT = 1 << 20
_WAIT_S = 30.0
"""The bound on waiting for something the test knows will happen (a loaded machine is slow)."""

CONNECT = """
import socket, sys
s = socket.socket()
try:
    s.connect(("127.0.0.1", int(sys.argv[1])))
    print("connected", flush=True)
except OSError as exc:
    print(type(exc).__name__, flush=True)
"""


def in_loop(test: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    """Run an async test in a loop of its own (the spawner fixture binds to it)."""

    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> None:
        asyncio.run(test(*args, **kwargs))

    return run


@pytest.fixture
def spawner() -> Iterator[AgentSpawner]:
    spawner = AgentSpawner()
    yield spawner
    spawner.close()


@pytest.fixture
def listeners() -> Iterator[list[socket.socket]]:
    servers = []
    for _ in range(2):
        server = socket.socket()
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        servers.append(server)
    yield servers
    for server in servers:
        server.close()


def sealed(*ports: int, layers: SealLayers = LAYERS) -> AgentSeal:
    return AgentSeal(SealPolicy(loopback_ports=frozenset(ports)), layers)


async def run_to_end(agent: AgentProcess) -> list[bytes]:
    lines = []
    while (line := await agent.read_line()) is not None:
        lines.append(bytes(line))
    assert await agent.wait_exited(_WAIT_S)
    await agent.terminate(0.2)
    return lines


def gone(pid: int) -> bool:
    """Whether ``pid`` is dead (gone, or a zombie no one reaped yet)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state in ("Z", "X")


def wait_until(condition: object, what: str) -> None:
    deadline = time.monotonic() + _WAIT_S
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


@in_loop
async def test_the_agent_runs_with_its_own_pid_argv_cwd_and_env(
    spawner: AgentSpawner, tmp_path: Path
) -> None:
    script = (
        "import os, sys; print(os.getpid(), os.getpgid(0), os.getsid(0), os.getcwd(), "
        "ascii(os.environb[b'MARK']), sys.argv[1:], sep='|', flush=True); sys.exit(3)"
    )
    seal = sealed()
    agent = await AgentProcess.start(
        [sys.executable, "-c", script, "a b", "c"],
        cwd=tmp_path,
        env={**os.environ, "MARK": "m\udcff"},
        max_message_bytes=LIMIT,
        spawner=spawner,
        seal=seal,
    )
    (line,) = await run_to_end(agent)
    seal.stop()
    pid, group, session, cwd, mark, argv = line.decode().split("|")
    assert int(pid) == int(group) == int(session) == agent.pid  # a session of its own
    assert cwd == str(tmp_path)
    assert mark == "b'm\\xff'"  # the variable's bytes, as given
    assert argv == "['a b', 'c']"
    assert agent.returncode == 3
    assert agent.killed_because is None


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM])
@in_loop
async def test_an_agent_killed_by_a_signal_has_a_negative_returncode(
    spawner: AgentSpawner, signum: signal.Signals
) -> None:
    seal = sealed()
    script = f"import os; os.kill(os.getpid(), {int(signum)})"
    agent = await AgentProcess.start(
        [sys.executable, "-c", script], max_message_bytes=LIMIT, spawner=spawner, seal=seal
    )
    assert await run_to_end(agent) == []
    seal.stop()
    assert agent.returncode == -signum


@in_loop
async def test_a_missing_or_unexecutable_command_is_the_usual_start_error(
    spawner: AgentSpawner, tmp_path: Path
) -> None:
    script = tmp_path / "agent.sh"
    script.write_text("#!/bin/sh\n", encoding="utf-8")  # not executable
    for argv, expected in (
        (["no-such-agent-command"], "Agent command not found: 'no-such-agent-command'"),
        ([str(script)], f"Agent command is not executable: {str(script)!r}"),
        (["a\0b"], "Could not start agent command ['a\\x00b']"),
    ):
        with pytest.raises(AgentStartError) as raised:
            await AgentProcess.start(argv, max_message_bytes=LIMIT, spawner=spawner, seal=sealed())
        assert str(raised.value).startswith(expected)
    # The spawner is still there for the next agent.
    agent = await AgentProcess.start(
        [sys.executable, "-c", "pass"],
        max_message_bytes=LIMIT,
        spawner=spawner,
        seal=sealed(),
    )
    assert await run_to_end(agent) == []
    assert agent.returncode == 0


@in_loop
async def test_a_layer_that_cannot_be_applied_stops_the_agent_before_it_runs(
    spawner: AgentSpawner, tmp_path: Path
) -> None:
    if not LAYERS.landlock:
        pytest.skip("this kernel has no Landlock ABI 4")
    ran = tmp_path / "ran"
    with pytest.raises(SpawnFailed) as raised:
        # A port no TCP rule can name: landlock_add_rule refuses it.
        await spawner.spawn(
            ["/bin/sh", "-c", f"touch {ran}"],
            env=dict(os.environ),
            cwd=None,
            fds=[],
            ports=[70000],
            notify=None,
        )
    assert raised.value.kind == "seal"
    assert str(raised.value) == (
        "trialrun network seal: landlock_add_rule (port 70000) failed: Invalid argument"
    )
    assert not ran.exists()


@in_loop
async def test_the_stdio_channel_carries_messages_and_stderr_goes_to_the_tail(
    spawner: AgentSpawner,
) -> None:
    script = (
        "import sys\n"
        "line = sys.stdin.readline()\n"
        "print('to stderr', file=sys.stderr, flush=True)\n"
        "print(line.strip().upper(), flush=True)\n"
    )
    seal = sealed()
    agent = await AgentProcess.start(
        [sys.executable, "-c", script], max_message_bytes=LIMIT, spawner=spawner, seal=seal
    )
    assert await agent.send({"type": "ping"})
    assert await run_to_end(agent) == [b'{"TYPE":"PING"}']
    seal.stop()
    assert agent.stderr_tail() == "to stderr"


@in_loop
async def test_the_fd_channel_carries_messages_and_stdout_joins_the_tail(
    spawner: AgentSpawner,
) -> None:
    script = (
        "import os, socket, sys\n"
        "s = socket.socket(fileno=int(os.environ['TRIALRUN_FD']))\n"
        "f = s.makefile('rwb')\n"
        "line = f.readline()\n"
        "print('on stdout', flush=True)\n"
        "print('on stderr', file=sys.stderr, flush=True)\n"
        "f.write(line.strip().upper() + b'\\n'); f.flush()\n"
        "print(sys.stdin.read() == '', flush=True)\n"
    )
    seal = sealed()
    agent = await AgentProcess.start(
        [sys.executable, "-c", script],
        max_message_bytes=LIMIT,
        channel="fd",
        spawner=spawner,
        seal=seal,
    )
    assert await agent.send({"type": "ping"})
    assert await run_to_end(agent) == [b'{"TYPE":"PING"}']
    seal.stop()
    assert agent.stderr_tail() == "on stdout\non stderr\nTrue"  # stdin is /dev/null


@in_loop
async def test_each_agent_gets_its_own_ports_and_a_refusal_is_named(
    spawner: AgentSpawner, listeners: list[socket.socket]
) -> None:
    first, second = (int(server.getsockname()[1]) for server in listeners)
    seals = [sealed(first), sealed(second)]
    agents = [
        await AgentProcess.start(
            [sys.executable, "-c", f"{CONNECT}\nsys.argv[1] = {port!r}\n{CONNECT}", str(mine)],
            max_message_bytes=LIMIT,
            spawner=spawner,
            seal=seal,
        )
        for seal, mine, port in ((seals[0], first, second), (seals[1], second, first))
    ]
    outputs = [await run_to_end(agent) for agent in agents]
    for seal in seals:
        seal.stop()
    assert outputs == [[b"connected", b"PermissionError"]] * 2
    if LAYERS.seccomp:
        assert seals[0].attempts() == [f"127.0.0.1:{second}"]
        assert seals[1].attempts() == [f"127.0.0.1:{first}"]


@in_loop
async def test_landlock_alone_holds_per_agent(
    spawner: AgentSpawner, listeners: list[socket.socket]
) -> None:
    if not LAYERS.landlock:
        pytest.skip("this kernel has no Landlock ABI 4")
    first, second = (int(server.getsockname()[1]) for server in listeners)
    outputs = []
    for mine, other in ((first, second), (second, first)):
        seal = sealed(mine, layers=SealLayers(landlock=True, seccomp=False))
        agent = await AgentProcess.start(
            [sys.executable, "-c", f"{CONNECT}\nsys.argv[1] = {other!r}\n{CONNECT}", str(mine)],
            max_message_bytes=LIMIT,
            spawner=spawner,
            seal=seal,
        )
        outputs.append(await run_to_end(agent))
        seal.stop()
        assert seal.attempts() == []  # Landlock refuses; only seccomp could name it
    assert outputs == [[b"connected", b"PermissionError"]] * 2


HELPER_AGENT = """
import os, subprocess, sys, time
helper = subprocess.Popen(["sleep", "300"])
with open(sys.argv[1] + ".tmp", "w") as out:
    out.write(f"{os.getpid()} {helper.pid}")
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(300)
"""


@in_loop
async def test_a_ctrl_c_during_the_spawn_stops_the_whole_group(
    spawner: AgentSpawner, tmp_path: Path
) -> None:
    pids = tmp_path / "pids"
    seal = sealed()
    start = asyncio.ensure_future(
        AgentProcess.start(
            [sys.executable, "-c", HELPER_AGENT, str(pids)],
            max_message_bytes=LIMIT,
            spawner=spawner,
            seal=seal,
        )
    )
    for _ in range(100):
        if spawner.in_flight:
            break
        await asyncio.sleep(0)
    assert spawner.in_flight == 1, "the request never went out"
    # The loop is held here, so the spawner's "started" cannot be read before the cancel: the
    # agent and its helper run, and the start is still waiting for that reply.
    wait_until(pids.exists, "the agent never started its helper")
    start.cancel()
    with pytest.raises(asyncio.CancelledError):
        await start
    seal.stop()
    agent_pid, helper_pid = (int(pid) for pid in pids.read_text().split())
    wait_until(lambda: gone(agent_pid) and gone(helper_pid), "a process of the group lives on")
    assert spawner.in_flight == 0


@in_loop
async def test_a_dead_spawner_takes_its_agents_with_it_named_and_the_next_spawn_works(
    spawner: AgentSpawner, tmp_path: Path
) -> None:
    pids = tmp_path / "pids"
    seal = sealed()
    agent = await AgentProcess.start(
        [sys.executable, "-c", HELPER_AGENT, str(pids)],
        max_message_bytes=LIMIT,
        spawner=spawner,
        seal=seal,
    )
    wait_until(pids.exists, "the agent never started its helper")
    dead = spawner.pid
    assert dead is not None
    os.kill(dead, signal.SIGKILL)
    assert await agent.wait_exited(_WAIT_S)
    await agent.terminate(0.2)
    seal.stop()
    assert agent.returncode == -signal.SIGKILL
    assert agent.killed_because == f"the agent spawner (pid {dead}) was killed by SIGKILL"
    helper_pid = int(pids.read_text().split()[1])
    wait_until(lambda: gone(agent.pid) and gone(helper_pid), "a process of the group lives on")

    again = await AgentProcess.start(
        [sys.executable, "-c", "print('again')"],
        max_message_bytes=LIMIT,
        spawner=spawner,
        seal=sealed(),
    )
    assert await run_to_end(again) == [b"again"]
    assert spawner.pid not in (None, dead)


@in_loop
async def test_stopping_the_spawner_kills_what_it_still_runs(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    spawner = AgentSpawner()
    seal = sealed()
    agent = await AgentProcess.start(
        [sys.executable, "-c", HELPER_AGENT, str(pids)],
        max_message_bytes=LIMIT,
        spawner=spawner,
        seal=seal,
    )
    wait_until(pids.exists, "the agent never started its helper")
    spawner.close()
    seal.stop()
    assert agent.exited and agent.returncode == -signal.SIGKILL
    assert agent.killed_because is not None and "stopped the agent spawner" in agent.killed_because
    agent.close()
    helper_pid = int(pids.read_text().split()[1])
    wait_until(lambda: gone(agent.pid) and gone(helper_pid), "a process of the group lives on")
