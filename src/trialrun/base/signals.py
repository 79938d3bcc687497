"""Signal handlers set for the length of a block, and the old ones put back after it."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

__all__ = ["STOP_SIGNALS", "Handler", "routed_signals", "signal_group"]

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
"""What asks a process to stop: a cancelled CI job (SIGTERM), Ctrl-C (SIGINT)."""

Handler = Callable[[int, FrameType | None], Any] | int | signal.Handlers


@contextmanager
def routed_signals(
    handler: Handler, signums: Collection[signal.Signals] = STOP_SIGNALS
) -> Iterator[None]:
    """Route ``signums`` to ``handler`` for the duration, then restore the old handlers.

    Off the main thread (in-process embedding) nothing changes: only the main thread may set
    signal handlers, and its own caller handles its signals.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, handler) for signum in signums}
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


def signal_group(pgid: int, signum: signal.Signals = signal.SIGKILL) -> None:
    """Send ``signum`` to process group ``pgid``; a group that has ended is no error.

    ``pgid`` is the pid of a child started in a new session and not yet reaped, so the id still
    names that child's group: it cannot have been reused.
    """
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)
