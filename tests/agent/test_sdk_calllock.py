"""CallLock: first come first served across threads and event loops, and cancellation-safe."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from trialrun.agent.calllock import CallLock


def test_threads_get_the_lock_in_the_order_they_asked() -> None:
    lock = CallLock()
    lock.acquire()
    order: list[int] = []

    def take(n: int) -> None:
        lock.acquire()
        order.append(n)
        lock.release()

    threads = []
    for n in range(5):
        thread = threading.Thread(target=take, args=(n,))
        thread.start()
        threads.append(thread)
        while len(lock._waiters) < n + 1:  # wait until it queued, to fix the order
            time.sleep(0.001)
    lock.release()
    for thread in threads:
        thread.join(5)
    assert order == [0, 1, 2, 3, 4]
    assert not lock.locked()


def test_coroutines_wait_without_blocking_their_loop() -> None:
    lock = CallLock()
    order: list[str] = []
    holding, ticked = asyncio.Event(), asyncio.Event()

    async def holder() -> None:
        await lock.acquire_async()
        order.append("holder")
        holding.set()
        await ticked.wait()  # the loop keeps running the others meanwhile
        order.append("holder done")
        lock.release()

    async def waiter(name: str) -> None:
        await holding.wait()  # woken in the order they began to wait: a, then b
        await lock.acquire_async()
        order.append(name)
        lock.release()

    async def ticker() -> None:
        await holding.wait()
        while len(lock._waiters) < 2:  # both waiters queued behind the holder
            await asyncio.sleep(0)
        order.append("tick")
        ticked.set()

    async def main() -> None:
        await asyncio.gather(holder(), waiter("a"), waiter("b"), ticker())

    asyncio.run(main())
    assert order == ["holder", "tick", "holder done", "a", "b"]
    assert not lock.locked()


def test_a_thread_hands_the_lock_to_a_coroutine_on_another_loop() -> None:
    lock = CallLock()
    lock.acquire()
    got: list[str] = []

    def release_once_it_waits() -> None:
        while not lock._waiters:
            time.sleep(0.001)
        lock.release()

    async def main() -> None:
        threading.Thread(target=release_once_it_waits, daemon=True).start()
        await lock.acquire_async()
        got.append("coroutine")
        lock.release()

    asyncio.run(main())
    assert got == ["coroutine"] and not lock.locked()


def test_a_cancelled_waiter_leaves_the_queue_and_the_lock_moves_on() -> None:
    lock = CallLock()

    async def main() -> list[str]:
        await lock.acquire_async()
        got: list[str] = []
        cancelled = asyncio.ensure_future(lock.acquire_async())

        async def later() -> None:
            await lock.acquire_async()
            got.append("later")
            lock.release()

        waiting = asyncio.ensure_future(later())
        await asyncio.sleep(0.01)
        cancelled.cancel()
        await asyncio.sleep(0)
        lock.release()
        await waiting
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        return got

    assert asyncio.run(main()) == ["later"]
    assert not lock.locked()


def test_a_waiter_cancelled_just_as_the_lock_reached_it_passes_it_on() -> None:
    lock = CallLock()

    async def main() -> None:
        await lock.acquire_async()
        unlucky = asyncio.ensure_future(lock.acquire_async())
        await asyncio.sleep(0)  # it is queued now
        lock.release()  # the hand-over is scheduled on the loop...
        unlucky.cancel()  # ...and the waiter is cancelled before it runs
        with pytest.raises(asyncio.CancelledError):
            await unlucky
        await asyncio.wait_for(lock.acquire_async(), 1)  # not leaked
        lock.release()

    asyncio.run(main())
    assert not lock.locked()


def test_a_waiter_whose_loop_closed_is_skipped() -> None:
    lock = CallLock()
    lock.acquire()
    loop = asyncio.new_event_loop()
    task = loop.create_task(lock.acquire_async())
    loop.run_until_complete(asyncio.sleep(0))  # queued on that loop
    loop.close()
    lock.release()  # nobody left to take it
    assert not lock.locked()
    task._log_destroy_pending = False  # it can never finish: its loop is gone


def test_releasing_an_unlocked_lock_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="unlocked"):
        CallLock().release()


def test_blocking_the_loop_that_holds_the_lock_is_refused_not_hung() -> None:
    lock = CallLock()

    async def main() -> None:
        await lock.acquire_async()
        with pytest.raises(RuntimeError, match="running event loop"):
            lock.acquire()  # on the loop's own thread: nothing could ever release it
        lock.release()
        lock.acquire()  # free now: a plain acquire on the loop thread is fine
        lock.release()

    asyncio.run(main())


def test_blocking_behind_a_waiter_of_the_same_loop_is_refused() -> None:
    lock = CallLock()
    lock.acquire()  # held by "another thread"

    async def main() -> None:
        queued = asyncio.ensure_future(lock.acquire_async())
        await asyncio.sleep(0)
        with pytest.raises(RuntimeError, match="running event loop"):
            lock.acquire()
        lock.release()
        await queued
        lock.release()

    asyncio.run(main())
    assert not lock.locked()


def test_queued_is_called_once_the_place_is_taken_so_a_later_caller_comes_after() -> None:
    lock = CallLock()
    order: list[str] = []
    taken = threading.Event()
    lock.acquire(queued=taken.set)  # a free lock: its place is taken at once
    assert taken.is_set() and lock.locked()

    first_queued = threading.Event()

    def take(name: str, queued: threading.Event | None) -> None:
        lock.acquire(queued=None if queued is None else queued.set)
        order.append(name)
        lock.release()

    first = threading.Thread(target=take, args=("first", first_queued))
    first.start()
    assert first_queued.wait(60)  # in the queue: whoever asks now comes after it
    assert len(lock._waiters) == 1
    second = threading.Thread(target=take, args=("second", None))
    second.start()
    while len(lock._waiters) < 2:  # wait until it queued, so the release finds both
        time.sleep(0.001)
    lock.release()
    first.join(60)
    second.join(60)
    assert order == ["first", "second"]
    assert not lock.locked()


def test_queued_is_not_called_when_the_lock_refuses_to_block_a_loop() -> None:
    lock = CallLock()
    called: list[str] = []

    async def main() -> None:
        await lock.acquire_async()
        try:
            with pytest.raises(RuntimeError, match="would block that call forever"):
                lock.acquire(queued=lambda: called.append("queued"))
        finally:
            lock.release()

    asyncio.run(main())
    assert called == [] and not lock.locked()
