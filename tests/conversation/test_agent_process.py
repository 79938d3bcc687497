"""AgentProcess: spawning, reading big lines, draining stderr and killing the whole group."""

from __future__ import annotations

import asyncio
import json
import os
import select
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest

from paths import AGENTS_DIR
from processes import process_gone
from trialrun.conversation.process import (
    AgentProcess,
    AgentStartError,
    MessageTooLargeError,
    StderrRing,
    resolve_command,
)
from trialrun.conversation.spawner import shared

AGENTS = AGENTS_DIR
MB = 1024 * 1024
T = TypeVar("T")


def agent(name: str, *args: str) -> list[str]:
    return [sys.executable, str(AGENTS / name), *args]


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def run(factory: Callable[[], Awaitable[T]]) -> T:
    async def main() -> T:
        return await factory()

    return asyncio.run(main())


async def start(argv: list[str], limit: int = 64 * MB, **kwargs: object) -> AgentProcess:
    return await AgentProcess.start(argv, max_message_bytes=limit, **kwargs)  # type: ignore[arg-type]


# -- start -------------------------------------------------------------------------------------


def test_missing_command_says_what_to_do() -> None:
    with pytest.raises(AgentStartError) as info:
        run(lambda: start(["no-such-agent-xyz", "a.py"]))
    message = str(info.value)
    assert message.startswith("Agent command not found: 'no-such-agent-xyz'.")
    assert "not on PATH" in message and "agent_command in suite.yaml" in message


@pytest.mark.parametrize("argv", [[], [""]])
def test_empty_command_is_refused(argv: list[str]) -> None:
    with pytest.raises(AgentStartError, match="agent_command is empty"):
        run(lambda: start(argv))


def test_non_executable_file_is_reported(tmp_path: Path) -> None:
    script = tmp_path / "agent.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o644)
    with pytest.raises(
        AgentStartError, match=r"not executable: '.*agent.sh' \(permission denied\)"
    ):
        run(lambda: start([str(script)]))


def test_script_without_shebang_suggests_an_interpreter(tmp_path: Path) -> None:
    script = tmp_path / "agent"
    script.write_bytes(b"\x7fELF-not-really\n")
    script.chmod(0o755)
    with pytest.raises(AgentStartError, match=r"Could not start agent command .*interpreter"):
        run(lambda: start([str(script)]))


def test_missing_working_directory_is_not_mistaken_for_a_missing_command(tmp_path: Path) -> None:
    with pytest.raises(AgentStartError, match="working directory does not exist"):
        run(lambda: start(agent("hang.py"), cwd=tmp_path / "nope"))


def test_bare_python_falls_back_to_python3(tmp_path: Path) -> None:
    (tmp_path / "python3").symlink_to(sys.executable)
    assert resolve_command(["python", "a.py"], str(tmp_path)) == ["python3", "a.py"]
    (tmp_path / "python").symlink_to(sys.executable)
    assert resolve_command(["python", "a.py"], str(tmp_path)) == ["python", "a.py"]


def test_bare_python_without_any_python_gets_its_own_message(tmp_path: Path) -> None:
    env = {"PATH": str(tmp_path)}
    with pytest.raises(AgentStartError, match="Neither python nor python3 is on PATH"):
        run(lambda: start(["python", "a.py"], env=env))


def test_python_agents_are_told_to_speak_utf8_and_env_is_the_whole_environment() -> None:
    code = (
        "import os, json;"
        "print(json.dumps({k: os.environ.get(k) for k in"
        " ('PYTHONIOENCODING', 'PYTHONUTF8', 'ONLY_THIS', 'HOME')}))"
    )

    async def scenario() -> bytes | None:
        proc = await start(python(code), env={"ONLY_THIS": "1", "PATH": os.environ["PATH"]})
        try:
            return await proc.read_line()
        finally:
            await proc.terminate(1.0)

    line = run(scenario)
    assert line is not None
    assert json.loads(line) == {
        "PYTHONIOENCODING": "utf-8",
        "PYTHONUTF8": "1",
        "ONLY_THIS": "1",
        "HOME": None,
    }


def test_runs_in_the_given_working_directory(tmp_path: Path) -> None:
    async def scenario() -> bytes | None:
        proc = await start(python("import os; print(os.getcwd())"), cwd=tmp_path)
        try:
            return await proc.read_line()
        finally:
            await proc.terminate(1.0)

    assert run(scenario) == str(tmp_path).encode()


# -- reading and writing -----------------------------------------------------------------------


def test_five_megabyte_line_is_read_whole_and_fast() -> None:
    # Each line of the agent's answers one of ours: a line of N characters, then "y" unended.
    code = (
        "import sys\n"
        "for size in sys.stdin:\n"
        "    sys.stdout.write('x' * int(size) + '\\n'); sys.stdout.flush()\n"
        "sys.stdout.write('y')\n"
    )

    async def scenario() -> tuple[list[float], list[float], bytes | None, bytes | None]:
        proc = await start(python(code))
        small: list[float] = []
        big: list[float] = []
        line: bytes | None = b""
        try:
            for size, times in [(500_000, small), (5_000_000, big)] * 3:
                started = time.perf_counter()
                assert proc.write_nowait(f"{size}\n".encode()) is True
                line = await proc.read_line()
                times.append(time.perf_counter() - started)
                assert line == b"x" * size
            proc.close_stdin()
            last = await proc.read_line()  # no trailing newline: still a line
            return small, big, line, last
        finally:
            await proc.terminate(1.0)

    small, big, line, last = run(scenario)
    assert line == b"x" * 5_000_000
    assert last == b"y"
    # Ten times the bytes: about ten times the time when reading is linear, a hundred times if
    # it were quadratic. A ratio, so that a loaded machine cannot fail it.
    assert min(big) < 40 * min(small), (small, big)


def test_line_over_the_limit_names_the_limit() -> None:
    async def scenario() -> None:
        proc = await start(python("print('x' * 5000)"), limit=1000)
        try:
            await proc.read_line()
        finally:
            await proc.terminate(1.0)

    with pytest.raises(MessageTooLargeError, match="longer than max_message_bytes=1000 bytes"):
        run(scenario)


def test_end_of_stream_is_none() -> None:
    async def scenario() -> tuple[bytes | None, bytes | None]:
        proc = await start(python("print('only')"))
        try:
            return await proc.read_line(), await proc.read_line()
        finally:
            await proc.terminate(1.0)

    assert run(scenario) == (b"only", None)


def test_send_reports_an_agent_that_stopped_reading() -> None:
    async def scenario() -> bool:
        proc = await start(agent("exit_early.py"))
        try:
            await proc.wait_exited(5.0)
            results = [await proc.send({"type": "tool_result", "pad": "x" * 200_000})]
            results.append(await proc.send({"type": "tool_result"}))
            return any(results)
        finally:
            await proc.terminate(1.0)

    assert run(scenario) is False


def test_a_chatty_stderr_never_blocks_the_agent_and_only_the_tail_is_kept() -> None:
    code = (
        "import sys\n"
        "for i in range(100_000): sys.stderr.write(f'noise line {i}\\n')\n"
        "print('done', flush=True)\n"
    )

    async def scenario() -> tuple[bytes | None, str]:
        proc = await start(python(code))
        try:
            line = await asyncio.wait_for(proc.read_line(), 10)
        finally:
            await proc.terminate(1.0)
        return line, proc.stderr_tail()

    line, tail = run(scenario)
    assert line == b"done"
    lines = tail.splitlines()
    assert len(lines) == 200
    assert lines[-1] == "noise line 99999"


def test_an_agent_that_exited_counts_as_exited_however_late_the_loop_notices() -> None:
    # On a busy machine the loop may get to an exit only after a short wait ran out; the wait
    # must still say the agent exited (with its code), once the spawner has reported it.
    async def scenario() -> tuple[bool, int | None]:
        proc = await start(python("import sys; sys.exit(3)"))
        # Blocks the loop, as a busy machine would, until the spawner's report of the exit
        # waits to be read.
        control = shared()._socket
        assert control is not None
        readable, _, _ = select.select([control], [], [], 30)
        assert readable, "the agent's exit was never reported"
        try:
            return await proc.wait_exited(0), proc.returncode
        finally:
            await proc.terminate(1.0)

    assert run(scenario) == (True, 3)


def test_agents_that_exit_together_are_each_reported() -> None:
    # The spawner learns of exits from SIGCHLD, and one signal may stand for several children.
    async def scenario() -> list[int | None]:
        procs = [
            await start(python(f"import sys; sys.stdin.readline(); raise SystemExit({n})"))
            for n in range(6)
        ]
        try:
            for proc in procs:  # all of them at once: nothing is awaited in between
                assert proc.write_nowait(b'{"type":"go"}\n')
            assert all([await proc.wait_exited(30) for proc in procs])
            return [proc.returncode for proc in procs]
        finally:
            for proc in procs:
                await proc.terminate(1.0)

    assert run(scenario) == [0, 1, 2, 3, 4, 5]


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="no /proc/PID/status")
def test_an_agent_started_without_a_seal_gets_no_no_new_privs() -> None:
    # A live or record agent may run setuid programs (sudo, ping): only the seal needs the flag.
    async def scenario() -> list[bytes]:
        proc = await start(python("print(open('/proc/self/status').read())"))
        lines = []
        while (line := await proc.read_line()) is not None:
            lines.append(bytes(line))
        await proc.terminate(1.0)
        return lines

    assert b"NoNewPrivs:\t0" in run(scenario)


# -- terminate ---------------------------------------------------------------------------------


def test_terminate_sigkills_an_agent_that_ignores_sigterm_after_the_grace() -> None:
    async def scenario() -> tuple[float, int | None]:
        proc = await start(agent("ignore_sigterm.py"))
        await proc.send({"type": "task_start", "task_id": "t", "input": {}})
        assert await proc.read_line() == b"ignoring"
        started = time.monotonic()
        await proc.terminate(0.3)
        return time.monotonic() - started, proc.returncode

    elapsed, code = run(scenario)
    # Killed, so not left running; only after the grace (a lower bound no load can break).
    assert code == -signal.SIGKILL
    assert elapsed >= 0.25


def test_a_polite_agent_exits_on_sigterm_without_waiting_for_the_grace() -> None:
    async def scenario() -> tuple[float, int | None]:
        proc = await start(agent("hang.py"))
        started = time.monotonic()
        await proc.terminate(GRACE_S)
        return time.monotonic() - started, proc.returncode

    # Waiting out the grace would take all of it; an agent dies of SIGTERM in a small part of it
    # on the busiest machine.
    GRACE_S = 60.0
    elapsed, code = run(scenario)
    assert code == -signal.SIGTERM
    assert elapsed < GRACE_S / 2


def test_grandchildren_die_with_the_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"

    async def scenario() -> int:
        proc = await start(agent("spawn_child.py", str(pid_file), "hang"))
        await proc.send({"type": "task_start", "task_id": "t", "input": {}})
        deadline = time.monotonic() + 30  # generous: only a broken agent takes that long
        while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        child = int(pid_file.read_text())
        await proc.terminate(1.0)
        return child

    child = run(scenario)
    assert process_gone(child)


def test_finish_lets_the_agent_exit_then_still_kills_leftover_children(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"

    async def scenario() -> tuple[bytes | None, int | None, int]:
        proc = await start(agent("spawn_child.py", str(pid_file), "finish"))
        await proc.send({"type": "task_start", "task_id": "t", "input": {}})
        line = await proc.read_line()
        # finish() waits only briefly for the agent to exit before stopping it; that it then
        # still stops the grandchild must not depend on how soon a busy machine runs the exit.
        await proc.wait_exited()
        await proc.finish(2.0)
        return line, proc.returncode, int(pid_file.read_text())

    line, code, child = run(scenario)
    assert line is not None and json.loads(line)["type"] == "final_output"
    assert code == 0  # it exited by itself, and finish() did not signal it
    assert process_gone(child)


def test_terminate_is_idempotent_and_close_after_it_is_harmless() -> None:
    async def scenario() -> int | None:
        proc = await start(agent("hang.py"))
        await proc.terminate(1.0)
        await proc.terminate(1.0)
        proc.close()
        return proc.returncode

    assert run(scenario) == -signal.SIGTERM


# -- the stderr ring ---------------------------------------------------------------------------


def test_stderr_ring_keeps_the_last_lines_across_chunk_boundaries() -> None:
    ring = StderrRing(max_lines=3, max_bytes=1000)
    ring.feed(b"one\ntw")
    ring.feed(b"o\nthree\nfour\nfi")
    assert ring.text() == "two\nthree\nfour\nfi"


def test_stderr_ring_is_bounded_in_bytes_even_for_one_endless_line() -> None:
    ring = StderrRing(max_lines=200, max_bytes=100)
    for _ in range(50):
        ring.feed(b"z" * 64)
    assert ring.text() == "z" * 100
    ring.feed(b"\n" + b"a" * 60 + b"\n" + b"b" * 30 + b"\n")
    assert ring.text() == "a" * 60 + "\n" + "b" * 30


def test_stderr_ring_bounds_the_unfinished_line_after_a_newline_in_one_big_chunk() -> None:
    ring = StderrRing(max_lines=200, max_bytes=100)
    ring.feed(b"a\n" + b"z" * 300)
    assert ring.text() == "a\n" + "z" * 100


def test_stderr_ring_decodes_anything() -> None:
    ring = StderrRing()
    ring.feed("caf\u00e9 \U0001f600\n".encode() + b"\xff\xfe\n")
    assert ring.text() == "caf\u00e9 \U0001f600\n\ufffd\ufffd"
