"""Record mode's order: each request takes its place when it arrives, not when it is answered.

Requests of one case (or one model-gateway run) are answered in parallel and finish in any
order; the cassette keeps the order they were asked in, which is the order replay serves
identical requests in. A request that got no answer to record leaves its place empty.
"""

from __future__ import annotations

import threading
import time
from typing import Generic, TypeVar

T = TypeVar("T")


class Arrivals(Generic[T]):
    """Places reserved in arrival order and filled later (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._slots: list[T | None] = []
        self._times: list[float] = []

    def reserve(self) -> int:
        """The place of a request that just arrived."""
        with self._lock:
            self._slots.append(None)
            self._times.append(time.time())
            return len(self._slots) - 1

    def fill(self, slot: int, item: T) -> None:
        with self._lock:
            self._slots[slot] = item

    def filled(self) -> list[T]:
        """What was recorded, in arrival order."""
        return [item for _, item in self.arrived()]

    def arrived(self) -> list[tuple[float, T]]:
        """``filled()`` with when each request arrived (seconds since the epoch)."""
        with self._lock:
            pairs = zip(self._times, self._slots, strict=True)
            return [(t, item) for t, item in pairs if item is not None]
