"""An agent's channel (stdio pipes or socket) lent to a thread of blocking reads and writes.

Measured on the 5,000-call replay case: a round trip through the event loop (wake from epoll,
read, answer, write) costs about twice the CPU and wall time of the same round trip on a thread
that blocks in ``poll`` on the agent's stdout, and the loop spends that on every message. When a
case's tool calls can be answered without waiting (a cassette), the session lends the pipes to a
thread that answers them (``Session._answer_lent``) until a message needs the loop; the loop
meanwhile keeps draining stderr, noticing exits and running the other cases.

The thread works on duplicates of the pipe descriptors, so the loop closing the originals (the
agent closed its stdin) can never make it write to a recycled descriptor. It reads into the
``LineReader``'s own buffer, whose transport is paused meanwhile, so whatever it did not consume
is read by the loop afterwards as if it had never been lent. While lent, the thread and the
agent share one CPU as long as the agent answers quickly (``cpushare``).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import select
import threading
import time
from collections.abc import Callable
from typing import Literal

from trialrun.conversation.cpushare import RESHARE_S, SHARE_AFTER, SLOW_ANSWER_S, CpuShare
from trialrun.conversation.lines import LineReader

__all__ = ["LentPipes", "run_on_thread"]

_READ_SIZE = 256 * 1024

Waited = Literal["ready", "eof", "woken", "timeout"]
Written = Literal["sent", "closed", "woken", "timeout"]


class LentPipes:
    """The agent's messages (through ``reader``) and its inbox, for one thread at a time: its
    stdout and stdin pipes, or twice its socket."""

    def __init__(
        self, reader: LineReader, messages_fd: int, inbox_fd: int, agent_pid: int | None = None
    ) -> None:
        """``agent_pid``: the agent to share a CPU with (``share_cpu``); None: no sharing."""
        self.reader = reader
        self._share = None if agent_pid is None else CpuShare(agent_pid)
        self._quick_needed = SHARE_AFTER
        """Quick messages still to come in a row before the thread and the agent share a CPU."""
        self.stopping = False
        """Set by ``stop``: the thread must return as soon as it can (the case is cancelled)."""
        self._out = os.dup(messages_fd)
        self._in = os.dup(inbox_fd)
        # Non-blocking already (the loop's transports share these open files): reads and
        # writes wait in poll, where deadlines and wake-ups count.
        os.set_blocking(self._out, False)
        os.set_blocking(self._in, False)
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._readable = select.poll()
        self._readable.register(self._out, select.POLLIN)
        self._readable.register(self._wake_r, select.POLLIN)
        self._writable = select.poll()
        self._writable.register(self._in, select.POLLOUT)
        self._writable.register(self._wake_r, select.POLLIN)

    def wake(self) -> None:
        """Interrupt the thread's wait for stdout (from any thread): something changed."""
        with contextlib.suppress(BlockingIOError):  # a wake-up is pending already
            os.write(self._wake_w, b"!")

    def stop(self) -> None:
        self.stopping = True
        self.wake()

    def fill(self, timeout_s: float) -> Waited:
        """Wait up to ``timeout_s`` for stdout and add what came to the reader's buffer.

        It reads first and waits only if nothing is there: an agent that answers faster than
        trialrun has its next message waiting, and ``poll`` would cost a system call more.
        """
        try:
            data = os.read(self._out, _READ_SIZE)
        except BlockingIOError:
            events = self._wait_readable(timeout_s)
            if not events:
                return "timeout"
            if any(fd == self._wake_r for fd, _ in events):
                self._drain_wakes()
                return "woken"
            try:
                data = os.read(self._out, _READ_SIZE)
            except BlockingIOError:
                return "ready"
            except ConnectionError as exc:
                data = self._lost(exc)
        except ConnectionError as exc:
            data = self._lost(exc)
        else:
            if self._share is not None and not self._share.active:
                self._came_quickly()  # it was waiting already
        if not data:
            self.reader.eof = True
            return "eof"
        self.reader.buffer += data
        return "ready"

    def _wait_readable(self, timeout_s: float) -> list[tuple[int, int]]:
        """``poll`` for the agent's messages, sharing a CPU with it or not (``cpushare``)."""
        share = self._share
        if share is None:
            return self._readable.poll(_poll_ms(timeout_s))
        started = time.monotonic()
        if share.active and started - share.since > RESHARE_S:
            share.step_back()  # the scheduler places both again, during this wait
            self._quick_needed = 1
        elif share.active and timeout_s > SLOW_ANSWER_S:
            events = self._readable.poll(_poll_ms(SLOW_ANSWER_S))
            if events:
                return events
            share.step_back()  # the agent works on its own: its CPUs back
            self._quick_needed = SHARE_AFTER
            timeout_s -= time.monotonic() - started
        events = self._readable.poll(_poll_ms(timeout_s))
        if events and not share.active:
            if time.monotonic() - started <= SLOW_ANSWER_S:
                self._came_quickly()
            else:
                self._quick_needed = SHARE_AFTER
        return events

    def _came_quickly(self) -> None:
        self._quick_needed -= 1
        share = self._share
        if self._quick_needed <= 0 and share is not None:
            share.start()
            if not share.possible:
                self._share = None  # not on this system, or not with this agent

    def _lost(self, error: ConnectionError) -> bytes:
        """The agent reset its socket: the end of its messages, which the loop reports."""
        self.reader.lost = error
        return b""

    def write(self, data: bytes, timeout_s: float) -> Written:
        """Write all of ``data`` to stdin within ``timeout_s``; only ``stop`` interrupts it."""
        try:
            written = os.write(self._in, data)
        except BlockingIOError:
            written = 0
        except (BrokenPipeError, ConnectionResetError):
            return "closed"
        if written == len(data):
            return "sent"  # the common case, without a clock or a view
        # The agent's inbox is full: it has until the deadline to read it.
        deadline = time.monotonic() + timeout_s
        view = memoryview(data)[written:]
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "timeout"
            events = self._writable.poll(_poll_ms(remaining))
            if any(fd == self._wake_r for fd, _ in events):
                self._drain_wakes()
                if self.stopping:
                    return "woken"
            try:
                view = view[os.write(self._in, view) :]
            except BlockingIOError:
                pass
            except (BrokenPipeError, ConnectionResetError):
                return "closed"
            if not view:
                return "sent"

    def close(self) -> None:
        """After the lending thread returned (on the loop)."""
        if self._share is not None:
            self._share.end()
        for fd in (self._out, self._in, self._wake_r, self._wake_w):
            os.close(fd)

    def _drain_wakes(self) -> None:
        with contextlib.suppress(BlockingIOError):
            while os.read(self._wake_r, 64):
                pass


_POLL_MS_MAX = 2**31 - 1
"""``poll`` takes a C int of milliseconds (~24 days): a longer wait is waited again."""


def _poll_ms(timeout_s: float) -> int:
    return min(_POLL_MS_MAX, max(0, math.ceil(timeout_s * 1000)))


async def run_on_thread(work: Callable[[], None], stop: Callable[[], None]) -> None:
    """Run ``work`` on a thread of its own and wait for it; re-raise what it raised.

    A thread of its own, not the loop's executor: each case that lends its pipes keeps a thread
    for the whole conversation, and a shared pool would make one case wait for another. When
    the waiting task is cancelled, ``stop`` asks ``work`` to return and the thread is waited for
    before the cancellation goes on: nothing may still use the pipes once they are closed.
    """
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()

    def report(error: BaseException | None) -> None:
        if done.done():
            return
        if error is None:
            done.set_result(None)
        else:
            done.set_exception(error)

    def run() -> None:
        try:
            work()
        except BaseException as exc:  # handed to the waiting task, raised there
            loop.call_soon_threadsafe(report, exc)
        else:
            loop.call_soon_threadsafe(report, None)

    threading.Thread(target=run, name="trialrun-lent-pipes", daemon=True).start()
    try:
        await asyncio.wait((done,))
    except asyncio.CancelledError:
        stop()
        while not done.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait((done,))
        if not done.cancelled():
            done.exception()  # retrieved: the cancellation is what goes on
        raise
    done.result()
