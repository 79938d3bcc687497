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

_READ_CHUNK = 1 << 20
_STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}


class Aside:
    """``work`` handed to a forked child where that is safe (see ``forked``)."""

    def __init__(self, work: Callable[[], bytes]) -> None:
        self._pid = 0
        self._read_fd = -1
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
            read_fd, write_fd = os.pipe()
        except OSError:  # out of descriptors: the caller does the work
            return
        # Blocked until the child has let go of the parent's handlers: a Ctrl-C arriving in
        # between would run them in the child. The parent gets what came meanwhile afterwards.
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
        try:
            pid = os.fork()
        except OSError:  # no memory or no process slot left: the caller does the work
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
            os.close(read_fd)
            os.close(write_fd)
            return
        if pid == 0:
            _serve(work, write_fd, blocked)  # never returns
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        os.close(write_fd)
        self._pid, self._read_fd = pid, read_fd

    def _collect(self) -> bytes | None:
        pid, read_fd = self._pid, self._read_fd
        self._pid, self._read_fd = 0, -1
        chunks: list[bytes] = []
        try:
            while chunk := os.read(read_fd, _READ_CHUNK):
                chunks.append(chunk)
        except OSError:
            chunks = []
        finally:
            os.close(read_fd)
        try:
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:  # reaped by someone else: its exit status is unknown
            return None
        payload = b"".join(chunks)
        # The child writes a marker byte first, so an empty result is told from a failure.
        if os.waitstatus_to_exitcode(status) != 0 or payload[:1] != b"+":
            return None
        return payload[1:]


def _can_fork() -> bool:
    if sys.platform != "linux" or not hasattr(os, "fork"):
        return False
    if threading.current_thread() is not threading.main_thread():
        return False
    try:
        return len(os.sched_getaffinity(0)) > 1 and len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return False


def _serve(work: Callable[[], bytes], write_fd: int, mask: Iterable[int]) -> None:
    """In the child: compute, send, and leave without running anything of the parent's."""
    code = 1
    try:
        # A collection here would walk the parent's whole heap, writing to every object it
        # visits, which copies each page it is on: the child lives a moment, and needs none.
        gc.disable()
        _close_inherited(keep=write_fd)
        # A signal ends the child at once (the parent then does the work itself). The event
        # loop's wake-up descriptor is the parent's: no signal may be reported there.
        signal.set_wakeup_fd(-1)
        for signum in _STOP_SIGNALS:
            signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        view = memoryview(b"+" + work())
        while view:
            view = view[os.write(write_fd, view) :]
        code = 0
    except BaseException:  # whatever it is, the parent redoes the work and meets it there
        pass
    finally:
        os._exit(code)


def _close_inherited(keep: int) -> None:
    """Close every descriptor but stdin, stdout, stderr and ``keep``: a copy of an agent's stdin
    kept open here would hide its end from the agent until the child exits."""
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2 and fd != keep:
            with contextlib.suppress(OSError):  # the listing's own descriptor, closed already
                os.close(fd)
