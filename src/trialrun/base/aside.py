"""Work done aside: by a forked copy of this process on another CPU, while this one goes on.

A run's tail is Python on one CPU (the GIL) while the machine's other CPUs wait. A case of
thousands of tool calls spends ~100 ms on its receipt events and about as long on its verdict
and run.jsonl: ``Aside`` hands the first to a child forked for it, which computes the same bytes
with the same code from the same memory while the parent does the rest.

Forking is safe only where no other thread could hold a lock the child needs: work goes aside
only from the main thread of a process that has no other thread (as the kernel counts them, so
native libraries' threads count too), on Linux, with more than one CPU to run on. Anywhere else,
and whenever the child fails for any reason, ``collect`` answers None and the caller does the
work itself with the same code: the bytes, or the exception, are the same either way. The child
closes every descriptor it inherited but stdin, stdout and stderr (a copy of an agent's stdin
would hide its end from the agent), so ``work`` opens what it needs itself.

The child writes its bytes to a file in memory (``memfd_create``) that the parent reads once the
child has exited, not to a pipe: a pipe holds 64 KB, so the ~2 MB of a 5,000-call case's events
crossed it in ~30 turns of the two processes waking each other (~8 ms of the run's tail, which
now takes one read).
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterable

__all__ = ["Aside"]

_STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}


class Aside:
    """``work`` handed to a forked child where that is safe (see ``forked``)."""

    def __init__(self, work: Callable[[], bytes]) -> None:
        self._pid = 0
        self._result_fd = -1
        if _can_fork():
            self._start(work)

    @property
    def forked(self) -> bool:
        """Whether a child is doing the work (until ``collect`` or ``discard``)."""
        return self._pid > 0

    def collect(self) -> bytes | None:
        """What ``work()`` returned in the child, once it is done; None when no child did it
        (none was forked, it raised, it was killed): then do the work yourself."""
        return self._collect() if self._pid > 0 else None

    def discard(self) -> None:
        """The work is not wanted any more: stop the child and reap it."""
        if self._pid > 0:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._pid, signal.SIGKILL)
            self._collect()

    def _start(self, work: Callable[[], bytes]) -> None:
        try:
            result_fd = os.memfd_create("trialrun-aside", os.MFD_CLOEXEC)
        except OSError:  # out of descriptors or memory, or a kernel without it: the caller works
            return
        # Blocked until the child has let go of the parent's handlers: a Ctrl-C arriving in
        # between would run them in the child. The parent gets what came meanwhile afterwards.
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
        try:
            pid = os.fork()
        except OSError:  # no memory or no process slot left: the caller does the work
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
            os.close(result_fd)
            return
        if pid == 0:
            _serve(work, result_fd, blocked)  # never returns
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        self._pid, self._result_fd = pid, result_fd

    def _collect(self) -> bytes | None:
        pid, result_fd = self._pid, self._result_fd
        self._pid, self._result_fd = 0, -1
        try:
            try:
                _, status = os.waitpid(pid, 0)
            except ChildProcessError:  # reaped by someone else: its exit status is unknown
                return None
            except BaseException:  # Ctrl-C while waiting: no child may outlive the wait
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, 0)
                raise
            if os.waitstatus_to_exitcode(status) != 0:
                return None
            # The child writes a marker byte first, so an empty result is told from a failure.
            if os.pread(result_fd, 1, 0) != b"+":
                return None
            return _read_from(result_fd, 1, os.fstat(result_fd).st_size)
        except OSError:
            return None
        finally:
            os.close(result_fd)


def _read_from(fd: int, offset: int, size: int) -> bytes:
    """The bytes of the file ``fd`` from ``offset`` to ``size``, in one piece."""
    chunks: list[bytes] = []
    while offset < size:  # one read, unless the kernel returns less (over ~2 GB)
        chunk = os.pread(fd, size - offset, offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)  # no copy for a single chunk


def _can_fork() -> bool:
    if sys.platform != "linux" or not hasattr(os, "fork"):
        return False
    if threading.current_thread() is not threading.main_thread():
        return False
    try:
        return len(os.sched_getaffinity(0)) > 1 and len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return False


def _serve(work: Callable[[], bytes], result_fd: int, mask: Iterable[int]) -> None:
    """In the child: compute, send, and leave without running anything of the parent's."""
    code = 1
    try:
        # A collection here would walk the parent's whole heap, writing to every object it
        # visits, which copies each page it is on: the child lives a moment, and needs none.
        gc.disable()
        _close_inherited(keep=result_fd)
        # A signal ends the child at once (the parent then does the work itself). The event
        # loop's wake-up descriptor is the parent's: no signal may be reported there.
        signal.set_wakeup_fd(-1)
        for signum in _STOP_SIGNALS:
            signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        result = work()
        _write_all(result_fd, b"+")
        _write_all(result_fd, result)
        code = 0
    except BaseException:  # whatever it is, the parent redoes the work and meets it there
        pass
    finally:
        os._exit(code)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _close_inherited(keep: int) -> None:
    """Close every descriptor but stdin, stdout, stderr and ``keep``: a copy of an agent's stdin
    kept open here would hide its end from the agent until the child exits."""
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2 and fd != keep:
            with contextlib.suppress(OSError):  # the listing's own descriptor, closed already
                os.close(fd)
