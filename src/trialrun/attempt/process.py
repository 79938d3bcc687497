"""Run one shell command of ``trialrun attempt`` (the agent or the verifier) under a deadline.

The command is ``bash -c <command>`` in a new session, so its process group id is its pid and a
signal to the group reaches every helper it started: a timed-out ``sleep 600`` inside a test suite
dies with it. A timeout (or our own interruption) sends SIGTERM to the group, waits ``grace_s``,
then sends SIGKILL. Even after a normal exit the group gets SIGKILL, so a background helper that
still holds the pipes cannot keep us waiting.

stdout lines are stamped with the monotonic time they arrived, which is how the transcript parser
learns tool durations; stderr is either merged into the output (the verifier: what a human reads)
or kept apart as a bounded tail (the agent: stdout is its transcript).
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from trialrun.base import leftovers
from trialrun.base.linesredact import redacting_sink
from trialrun.base.signals import signal_group

__all__ = ["CommandResult", "run_shell"]

STDERR_TAIL_LINES = 200
_READER_JOIN_S = 2.0
"""How long to wait for the pipe readers once the group is dead (a setsid'd helper may linger)."""


@dataclass(frozen=True)
class CommandResult:
    exit_code: int | None
    """None when the command was killed (timeout or interruption); negative: killed by signal."""
    timed_out: bool
    duration_ms: float
    lines: list[tuple[float, str]] = field(default_factory=list)
    """stdout (and stderr when merged) lines without newlines, with their monotonic arrival time."""
    stderr_tail: str = ""

    @property
    def output(self) -> str:
        return "\n".join(text for _, text in self.lines)

    @property
    def succeeded(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def failure_reason(self, timeout_s: float) -> str:
        """Why the command did not succeed, for a rollback reason (the last stderr line)."""
        if self.timed_out:
            return f"the agent timed out after {timeout_s:g}s (its process group was killed)"
        if self.exit_code is not None and self.exit_code < 0:
            return f"the agent was killed by signal {-self.exit_code}"
        tail = self.stderr_tail.strip().splitlines()[-1:]
        last = f": {tail[0][:200]}" if tail else ""
        return f"the agent exited with code {self.exit_code}{last}"


def run_shell(
    command: str,
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout_s: float | None,
    merge_stderr: bool,
    grace_s: float = 2.0,
) -> CommandResult:
    """Run ``bash -c command`` in ``cwd`` with exactly ``env``; wait at most ``timeout_s``.

    A ``KeyboardInterrupt`` while waiting kills the group before it propagates. Raises
    ``OSError`` when bash itself cannot be started.
    """
    started = time.monotonic()
    proc = subprocess.Popen(
        ["bash", "-c", command],
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
        start_new_session=True,
    )
    leftovers.note_group(proc.pid)
    lines: list[tuple[float, str]] = []
    tail: deque[str] = deque(maxlen=STDERR_TAIL_LINES)
    assert proc.stdout is not None
    readers = [_start_reader(proc.stdout, lambda text: lines.append((time.monotonic(), text)))]
    if proc.stderr is not None:
        readers.append(_start_reader(proc.stderr, redacting_sink(tail.append)))
    timed_out = False
    try:
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            _stop_group(proc, grace_s)
    except BaseException:
        _stop_group(proc, grace_s=0.0)
        raise
    finally:
        signal_group(proc.pid, signal.SIGKILL)
        leftovers.note_ended(proc.pid)
        for reader in readers:
            reader.join(_READER_JOIN_S)
    exit_code = None if timed_out else proc.returncode
    return CommandResult(
        exit_code=exit_code,
        timed_out=timed_out,
        duration_ms=round((time.monotonic() - started) * 1000, 3),
        lines=list(lines),
        stderr_tail="\n".join(tail),
    )


def _start_reader(stream: IO[bytes], sink: Callable[[str], None]) -> threading.Thread:
    def pump() -> None:
        with contextlib.suppress(OSError, ValueError), stream:
            for raw in stream:
                sink(raw.decode("utf-8", "replace").rstrip("\r\n"))

    thread = threading.Thread(target=pump, name="trialrun-attempt-pipe", daemon=True)
    thread.start()
    return thread


def _stop_group(proc: subprocess.Popen[bytes], grace_s: float) -> None:
    """SIGTERM the group, give it ``grace_s`` to go, then SIGKILL it and reap the shell."""
    signal_group(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace_s)
    signal_group(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5.0)
