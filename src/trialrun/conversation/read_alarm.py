"""One deadline for a session's reads, re-armed across thousands of them."""

from __future__ import annotations

import asyncio

__all__ = ["ReadAlarm"]


class ReadAlarm:
    """The deadline of the session's reads: what an ``asyncio.timeout`` per read does, cheaper.

    A timeout per read costs a Timeout, a timer and a heap entry (~35k instructions), and an
    agent answers thousands of times within one idle period. This alarm keeps one timer across
    reads and re-arms it only when it goes off before the current deadline (the agent answered
    in time) or when the deadline must come sooner. When a read outlives its deadline it
    cancels the reading task; ``stop`` tells that cancellation from any other (Ctrl-C) the way
    ``asyncio.timeout`` does, by the task's count of cancellation requests.
    """

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None, "reads run in the session's task"
        self._task = task
        self._deadline: float | None = None
        """Of the read in progress, on the loop's clock; None between reads."""
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        self._cancelling = 0
        self._expired = False

    def start(self, delay: float) -> None:
        """A read begins; it may take ``delay`` seconds."""
        self._cancelling = self._task.cancelling()
        self._expired = False
        self._set_deadline(self._loop.time() + delay)

    def reschedule(self, delay: float) -> None:
        """The read in progress, if any, now ends ``delay`` seconds from now."""
        if self._deadline is not None and not self._expired:
            self._set_deadline(self._loop.time() + delay)

    def stop(self) -> bool:
        """The read ended. True when the alarm cancelled it: it timed out."""
        self._deadline = None
        if not self._expired:
            return False
        self._expired = False
        return self._task.uncancel() <= self._cancelling

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _set_deadline(self, deadline: float) -> None:
        self._deadline = deadline
        if self._timer is None or self._timer_at > deadline:
            self._arm(deadline)

    def _arm(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._loop.call_at(when, self._ring)
        self._timer_at = when

    def _ring(self) -> None:
        self._timer = None
        deadline = self._deadline
        if deadline is None or self._expired:
            return  # between reads: the next read arms the timer again
        if self._timer_at < deadline:
            self._arm(deadline)  # the deadline moved on since the timer was set
            return
        self._expired = True
        self._task.cancel()
