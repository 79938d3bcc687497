"""Teardowns.wait_all returns once every teardown is done, however far the loop got."""

from __future__ import annotations

import asyncio
import threading

from trialrun.conversation.teardowns import Teardowns


async def _nothing() -> None:
    return None


async def _done_before_waiting() -> bool:
    teardowns = Teardowns()
    teardowns.start(_nothing())
    # One turn: the task runs and is done; its done callbacks are only queued.
    await asyncio.sleep(0)
    await teardowns.wait_all()
    return True


def test_wait_all_returns_when_a_teardown_finished_with_its_callbacks_still_queued() -> None:
    # Before the fix this spun without ever yielding (Python 3.12's gather of done tasks does
    # not yield), so the loop's own timeouts could not end it: a thread bounds the wait.
    result: list[bool] = []
    worker = threading.Thread(
        target=lambda: result.append(asyncio.run(_done_before_waiting())), daemon=True
    )
    worker.start()
    worker.join(30)
    assert result == [True]


def test_wait_all_waits_for_a_teardown_still_running() -> None:
    async def scenario() -> list[str]:
        seen: list[str] = []
        release = asyncio.Event()

        async def teardown() -> None:
            await release.wait()
            seen.append("torn down")

        teardowns = Teardowns()
        teardowns.start(teardown())
        asyncio.get_running_loop().call_soon(release.set)
        await teardowns.wait_all()
        seen.append("waited")
        return seen

    assert asyncio.run(scenario()) == ["torn down", "waited"]
