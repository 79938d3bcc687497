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
            await asyncio.gather(*self._tasks)
