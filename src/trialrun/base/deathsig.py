"""Children that die with trialrun, even when trialrun is killed with SIGKILL (Linux).

trialrun stops its children's process groups itself when it ends, and a signal it can catch
(Ctrl-C, SIGTERM) gets them stopped too. A SIGKILL leaves nobody to do it: an agent that does
not read its stdin, or talks over a socket, would run on. ``PR_SET_PDEATHSIG`` asks the kernel
to SIGKILL the child when its parent goes; only the child can ask it for itself, so it is asked
between fork and exec (``preexec_fn``).

The kernel sends it when the *thread* that forked the child ends, not the process: a child must
be started by a thread that lives at least as long as the child (the event loop's thread, or a
thread that waits for the child before it returns). A thread per request (the HTTP servers'
handlers) must not use it.

Why ``preexec_fn`` is safe here although threads run: what it runs in the child touches no lock
another thread may hold. It calls one C function that was looked up beforehand, with integer
arguments, and reads ``getppid``; glibc resets its allocator's locks in a forked child anyway.
The cost is a ``fork`` where ``vfork`` was possible: ~1 ms for a large trialrun process.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["dies_with_us"]

_PR_SET_PDEATHSIG = 1
_prctl: Any = None
_unavailable = sys.platform != "linux"


def dies_with_us() -> Callable[[], None] | None:
    """A ``preexec_fn`` that has the child SIGKILLed when this thread ends; None off Linux."""
    prctl = _load_prctl()
    if prctl is None:
        return None
    parent = os.getpid()

    def in_child() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        # The parent may have died between the fork and the prctl: then no signal would come.
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)

    return in_child


def _load_prctl() -> Any:
    global _prctl, _unavailable
    if _prctl is not None or _unavailable:
        return _prctl
    try:
        import ctypes  # only when a child starts: ~2 ms, never on the quick command lines

        libc = ctypes.CDLL(None, use_errno=True)  # already loaded: no search of the library path
        prctl = libc.prctl
    except (OSError, AttributeError):
        _unavailable = True
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    _prctl = prctl
    return prctl
