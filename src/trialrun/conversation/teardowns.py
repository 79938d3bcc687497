"""Agents that delivered their final output, finishing their exit while the next case runs."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

__all__ = ["Teardowns"]


class Teardowns:
    """Agents finishing their exit in the background; ``wait_all`` before reading their runs."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self, teardown: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(teardown)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def wait_all(self) -> None:
        while self._tasks:
            waited = list(self._tasks)
            await asyncio.gather(*waited)
            # Not left to the done callbacks: a gather of tasks that are all done returns without
            # yielding to the loop (Python 3.12), so callbacks still queued would never run and
            # this loop would spin.
            self._tasks.difference_update(waited)
