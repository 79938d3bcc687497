"""The lock that serializes tool-call round trips for threads and event loops alike.

The runner answers one tool call at a time, so a session lets one call at a time use the channel.
Callers come from plain threads (a LangGraph ToolNode runs sync tools in a thread pool) and from
coroutines on any number of event loops. A ``threading.Lock`` would block an event loop while it
waits, and waiting for one in a worker thread leaks the lock when the waiting task is cancelled;
so waiting coroutines park on a future instead, and ownership is handed over directly (first come,
first served) so that concurrent calls keep the order in which they asked.

A thread that runs an event loop must not block waiting for a lock that only a coroutine of that
very loop can release (or is queued to take first): that would hang forever, so ``acquire``
refuses with a ``RuntimeError`` that says what to do instead.
"""

from __future__ import annotations

import sys
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable


@dataclass(eq=False)
class _ThreadWaiter:
    granted: threading.Event = field(default_factory=threading.Event)


@dataclass(eq=False)
class _TaskWaiter:
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[None]


class CallLock:
    """A FIFO lock: ``acquire`` from threads, ``await acquire_async()`` from coroutines."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._locked = False
        self._waiters: deque[_ThreadWaiter | _TaskWaiter] = deque()
        self._owner_loop: asyncio.AbstractEventLoop | None = None

    def locked(self) -> bool:
        return self._locked

    def acquire(self, queued: Callable[[], None] | None = None) -> None:
        """Take the lock, waiting for the callers before this one.

        ``queued`` is called once this caller's place is fixed (it holds the lock or is in the
        queue), before it waits: a caller that starts later is certain to come after it. It must
        not raise.
        """
        loop = _loop_running_here()
        waiter: _ThreadWaiter | None = None
        with self._mutex:
            if not self._locked:
                self._locked = True
                self._owner_loop = None
            elif loop is not None and self._needed_by(loop):
                raise RuntimeError(
                    "a synchronous tool call was made on the thread of a running event loop "
                    "while an asynchronous tool call of that loop holds or waits for the channel; "
                    "waiting would block that call forever. Make the tool async, or run it in a "
                    "thread (asyncio.to_thread)"
                )
            else:
                waiter = _ThreadWaiter()
                self._waiters.append(waiter)
        if queued is not None:
            queued()
        if waiter is not None:
            waiter.granted.wait()  # release() handed the lock to us

    async def acquire_async(self) -> None:
        import asyncio  # here, not at the top: a sync-only agent never pays for asyncio

        loop = asyncio.get_running_loop()
        with self._mutex:
            if not self._locked:
                self._locked = True
                self._owner_loop = loop
                return
            waiter = _TaskWaiter(loop, loop.create_future())
            self._waiters.append(waiter)
        try:
            await waiter.future
        except asyncio.CancelledError:
            with self._mutex:
                granted = waiter.future.done() and not waiter.future.cancelled()
                if not granted and waiter in self._waiters:
                    self._waiters.remove(waiter)
                    raise
            if granted:  # the lock reached us just as we were cancelled: pass it on
                self.release()
            # Otherwise the hand-over is in flight; _grant sees the cancelled future and passes
            # the lock on itself.
            raise

    def release(self) -> None:
        with self._mutex:
            if not self._locked:
                raise RuntimeError("CallLock.release() called on an unlocked lock")
            while self._waiters:
                waiter = self._waiters.popleft()
                if isinstance(waiter, _ThreadWaiter):
                    self._owner_loop = None
                    waiter.granted.set()
                    return
                try:
                    waiter.loop.call_soon_threadsafe(self._grant, waiter.future)
                except RuntimeError:  # its loop is closed: nobody is waiting there any more
                    continue
                self._owner_loop = waiter.loop
                return
            self._locked = False
            self._owner_loop = None

    def _grant(self, future: asyncio.Future[None]) -> None:
        if future.cancelled():
            self.release()
        else:
            future.set_result(None)

    def _needed_by(self, loop: asyncio.AbstractEventLoop) -> bool:
        """Whether a coroutine of ``loop`` holds the lock or is queued for it (mutex held)."""
        return self._owner_loop is loop or any(
            isinstance(w, _TaskWaiter) and w.loop is loop for w in self._waiters
        )


def _loop_running_here() -> asyncio.AbstractEventLoop | None:
    module = sys.modules.get("asyncio")  # no loop can run if asyncio was never imported
    if module is None:
        return None
    try:
        loop: asyncio.AbstractEventLoop = module.get_running_loop()
    except RuntimeError:
        return None
    return loop
