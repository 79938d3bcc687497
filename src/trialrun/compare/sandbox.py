"""Seed one arm's sandbox and run a command in it under a deadline.

A sandbox is built in this order, as the seed engine does (reference §1.3, §1.4): the case's
``fixture`` copied in, then its inline ``files`` (``*.sh`` and ``bin/*`` made executable), then
the staged subject (nothing for the baseline arm). ``setup`` runs afterwards, by the caller, with
``run_command``.

Nothing here writes outside the sandbox: the loader already refuses paths that escape, and a
fixture could still carry a symlink pointing out of it, so every write is checked against the
sandbox after symlinks are resolved. Staging leaves out the subject's top-level ``evals/`` and
``fixtures/`` (the answer key) and any directory that is the run's own work directory, so a store
kept inside the subject is never copied into itself.

Commands run in a new session, so their process group id is their pid: a timeout or a
cancellation kills the whole group (SIGTERM, a grace period, SIGKILL), and so does a normal exit,
so a helper left in the background cannot outlive its arm or hold the pipes open.
"""

from __future__ import annotations

import asyncio
import contextlib
import posixpath
import shutil
import signal
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from trialrun.base import leftovers
from trialrun.base.fsutil import atomic_write_text
from trialrun.base.linesredact import redacting_sink
from trialrun.base.signals import signal_group
from trialrun.errors import TrialrunError

__all__ = [
    "STAGE_EXCLUDED",
    "CommandOutcome",
    "SandboxError",
    "fresh_sandbox",
    "run_command",
    "stage_subject",
    "write_case_files",
]

STAGE_EXCLUDED = frozenset({"evals", "fixtures"})
"""Top-level subject entries never staged: the cases and their fixtures are the answer key."""
STDERR_TAIL_LINES = 50
KILL_GRACE_S = 2.0
_PIPE_DRAIN_S = 2.0
"""How long to wait for the pipes once the group is dead (a setsid'd helper may hold them)."""
_REAP_S = 5.0
"""How long a killed command may take to be reported as exited before we stop waiting."""
_READ_CHUNK = 65536


class SandboxError(TrialrunError):
    """A sandbox could not be seeded (an unreadable fixture, a write that would escape it)."""


@dataclass(frozen=True)
class CommandOutcome:
    exit_code: int | None
    """None when the command timed out or could not start; negative: killed by that signal."""
    timed_out: bool
    stdout: str
    stderr_tail: str
    duration_s: float
    start_error: str | None = None
    """Why the command could not be started (no such program, not executable), else None."""


def fresh_sandbox(
    sandbox: Path,
    *,
    fixture: Path | None,
    files: Mapping[str, str],
    stage: Path | None = None,
    subject: Path | None = None,
    workdir: Path,
) -> None:
    """Empty ``sandbox`` (under ``workdir``) and seed it: fixture, files, staged subject.

    ``stage`` is the subject's place relative to the sandbox; both or neither of ``stage`` and
    ``subject`` are given. Raises SandboxError on anything that would leave it half built.
    """
    if not sandbox.resolve().is_relative_to(workdir.resolve()):
        raise SandboxError(f"sandbox {sandbox} is not inside the work directory {workdir}")
    if sandbox.exists() or sandbox.is_symlink():
        shutil.rmtree(sandbox)
    sandbox.mkdir(parents=True)
    try:
        if fixture is not None:
            shutil.copytree(fixture, sandbox, symlinks=True, dirs_exist_ok=True)
        write_case_files(sandbox, files)
        if stage is not None and subject is not None:
            stage_subject(subject, _inside(sandbox, stage.as_posix()), exclude=workdir)
    except OSError as exc:
        raise SandboxError(f"could not seed sandbox {sandbox}: {exc}") from exc


def write_case_files(sandbox: Path, files: Mapping[str, str]) -> None:
    """Write a case's inline ``files``; ``*.sh`` and ``bin/*`` become executable (0755)."""
    for relpath, text in files.items():
        target = _inside(sandbox, relpath)
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_symlink():
            target.unlink()  # a fixture's link must not redirect the write elsewhere
        atomic_write_text(target, text)
        normal = posixpath.normpath(relpath.replace("\\", "/"))
        if normal.endswith(".sh") or normal.startswith("bin/"):
            target.chmod(0o755)


def stage_subject(subject: Path, target: Path, *, exclude: Path | None = None) -> None:
    """Copy ``subject`` to ``target`` without its top-level ``evals/`` and ``fixtures/``."""
    skip = exclude.resolve() if exclude is not None else None
    root = subject.resolve()

    def ignore(directory: str, names: list[str]) -> set[str]:
        here = Path(directory).resolve()
        ignored = {n for n in names if here == root and n in STAGE_EXCLUDED}
        if skip is not None:
            ignored |= {n for n in names if (here / n).resolve() == skip}
        return ignored

    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(subject, target, symlinks=True, ignore=ignore, dirs_exist_ok=True)


def _inside(sandbox: Path, relpath: str) -> Path:
    target = sandbox / relpath.replace("\\", "/")
    parent = target.parent.resolve()
    if not parent.is_relative_to(sandbox.resolve()) or target.name in ("", ".", ".."):
        raise SandboxError(
            f"path '{relpath}' would be written outside the sandbox {sandbox} "
            f"(it resolves under {parent})"
        )
    return parent / target.name


async def run_command(
    argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], timeout_s: float
) -> CommandOutcome:
    """Run ``argv`` (no shell) in ``cwd``; stdout is kept whole, stderr as a tail.

    On timeout or cancellation the process group is killed; a cancellation then propagates.
    """
    started = time.monotonic()
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=dict(env),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the command, env or cwd
        return CommandOutcome(None, False, "", "", time.monotonic() - started, str(exc))
    leftovers.note_group(proc.pid)
    assert proc.stdout is not None and proc.stderr is not None
    out_chunks: list[bytes] = []
    err_lines: deque[str] = deque(maxlen=STDERR_TAIL_LINES)
    readers = [
        asyncio.ensure_future(_pump(proc.stdout, out_chunks.append)),
        asyncio.ensure_future(_pump_lines(proc.stderr, redacting_sink(err_lines.append))),
    ]
    timed_out = False
    try:
        try:
            await asyncio.wait_for(proc.wait(), timeout_s)
        except TimeoutError:
            timed_out = True
            await _stop_group(proc)
    except BaseException:
        signal_group(proc.pid, signal.SIGKILL)
        for reader in readers:
            reader.cancel()
        # Reap it here: a transport left to the garbage collector may outlive the event loop.
        await _reap(proc)
        raise
    finally:
        signal_group(proc.pid, signal.SIGKILL)
        leftovers.note_ended(proc.pid)
    _, pending = await asyncio.wait(readers, timeout=_PIPE_DRAIN_S)
    for reader in pending:
        reader.cancel()
    return CommandOutcome(
        exit_code=None if timed_out else proc.returncode,
        timed_out=timed_out,
        stdout=b"".join(out_chunks).decode("utf-8", "replace"),
        stderr_tail="\n".join(err_lines),
        duration_s=time.monotonic() - started,
    )


async def _reap(proc: asyncio.subprocess.Process) -> None:
    """Wait (bounded) until the killed ``proc`` is reaped, through further cancellations too:
    a second Ctrl-C here used to leave it to a watcher of a loop about to close."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + _REAP_S
    waiter = asyncio.ensure_future(proc.wait())
    cancelled = False
    while not waiter.done() and (remaining := deadline - loop.time()) > 0:
        try:
            await asyncio.wait((waiter,), timeout=remaining)
        except asyncio.CancelledError:
            cancelled = True
    waiter.cancel()
    if cancelled:
        raise asyncio.CancelledError


async def _pump(stream: asyncio.StreamReader, sink: Callable[[bytes], None]) -> None:
    while chunk := await stream.read(_READ_CHUNK):
        sink(chunk)


async def _pump_lines(stream: asyncio.StreamReader, sink: Callable[[str], None]) -> None:
    pending = b""
    while chunk := await stream.read(_READ_CHUNK):
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            sink(line.decode("utf-8", "replace").rstrip("\r"))
    if pending:
        sink(pending.decode("utf-8", "replace"))


async def _stop_group(proc: asyncio.subprocess.Process) -> None:
    signal_group(proc.pid, signal.SIGTERM)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(proc.wait(), KILL_GRACE_S)
    signal_group(proc.pid, signal.SIGKILL)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(proc.wait(), 5.0)
