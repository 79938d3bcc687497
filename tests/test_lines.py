"""LineReader (the agent's stdout as lines) and LentPipes (those pipes on a blocking thread)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import threading
import time
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trialrun.conversation.lines import LineReader, MessageTooLargeError, UnterminatedLine
from trialrun.conversation.pump import LentPipes, run_on_thread


class FakeTransport:
    """Records what the reader asks of its transport."""

    def __init__(self) -> None:
        self.reading = True
        self.calls: list[str] = []

    def pause_reading(self) -> None:
        self.reading = False
        self.calls.append("pause")

    def resume_reading(self) -> None:
        self.reading = True
        self.calls.append("resume")

    def is_closing(self) -> bool:
        return False


def reader_with(limit: int) -> tuple[LineReader, FakeTransport]:
    reader = LineReader(limit)
    transport = FakeTransport()
    reader.connection_made(transport)  # type: ignore[arg-type]
    return reader, transport


def read_all(reader: LineReader) -> list[bytes | None]:
    async def scenario() -> list[bytes | None]:
        lines: list[bytes | None] = []
        while True:
            line = await reader.readline()
            lines.append(line)
            if line is None or isinstance(line, UnterminatedLine):
                return lines

    return asyncio.run(scenario())


line_text = st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"."))


@given(
    lines=st.lists(line_text, max_size=12),
    tail=line_text,
    cuts=st.lists(st.integers(min_value=0, max_value=600), max_size=8),
)
def test_lines_come_out_whole_however_the_bytes_were_split(
    lines: list[bytes], tail: bytes, cuts: list[int]
) -> None:
    stream = b"".join(line + b"\n" for line in lines) + tail
    reader, _ = reader_with(limit=64)
    edges = sorted({0, len(stream), *(min(cut, len(stream)) for cut in cuts)})
    for start, end in itertools.pairwise(edges):
        reader.data_received(stream[start:end])
    reader.eof_received()
    found = read_all(reader)
    expected: list[bytes | None] = [*lines, UnterminatedLine(tail) if tail else None]
    assert found == expected
    assert isinstance(found[-1], UnterminatedLine) == bool(tail)


def test_a_line_of_exactly_the_limit_passes_one_byte_more_is_too_large() -> None:
    reader, _ = reader_with(limit=8)
    reader.data_received(b"12345678\n123456789\n")
    assert reader.take_line() == b"12345678"
    with pytest.raises(MessageTooLargeError, match="max_message_bytes=8"):
        reader.take_line()


def test_a_line_without_its_newline_is_too_large_as_soon_as_it_passes_the_limit() -> None:
    reader, _ = reader_with(limit=8)
    reader.data_received(b"12345678")
    assert reader.take_line() is None  # may still end here
    reader.data_received(b"9")
    with pytest.raises(MessageTooLargeError):
        reader.take_line()


def test_a_long_line_is_scanned_once_not_on_every_chunk() -> None:
    reader, _ = reader_with(limit=1 << 20)
    scanned: list[int] = []

    class CountingBuffer(bytearray):
        def find(self, sub: Any, start: Any = 0, *rest: Any) -> int:
            scanned.append(len(self) - start)
            return bytearray.find(self, sub, start, *rest)

    reader.buffer = CountingBuffer()
    for _ in range(100):
        reader.data_received(b"x" * 1000)
        assert reader.take_line() is None
    reader.data_received(b"\n")
    assert reader.take_line() == b"x" * 100_000
    assert sum(scanned) <= 100_000 + 100  # each byte looked at once


def test_reading_pauses_while_more_than_two_lines_worth_wait_and_resumes_once_read() -> None:
    reader, transport = reader_with(limit=10)
    reader.data_received(b"123456789\n" * 3)
    assert transport.calls == ["pause"]
    assert reader.take_line() == b"123456789"
    assert transport.calls == ["pause"]  # 20 bytes left: still more than a line
    assert reader.take_line() == b"123456789"
    assert transport.calls == ["pause", "resume"]


def test_a_lent_reader_stays_paused_until_given_back() -> None:
    reader, transport = reader_with(limit=10)
    reader.lend()
    reader.data_received(b"123456789\n" * 3)  # as the borrowing thread adds to the buffer
    reader.consume(30)
    assert not transport.reading
    reader.give_back()
    assert transport.reading
    reader.lend()
    reader.eof = True  # the borrower read the end of the stream: nothing left to read
    reader.give_back()
    assert not transport.reading


# -- LentPipes ---------------------------------------------------------------------------------


@pytest.fixture
def pipes() -> Any:
    """LentPipes over two real pipes; yields (pipes, agent_stdout_w, agent_stdin_r)."""
    out_r, out_w = os.pipe()
    in_r, in_w = os.pipe()
    for fd in (out_r, in_w):
        os.set_blocking(fd, False)  # as asyncio leaves them
    lent = LentPipes(LineReader(1 << 20), out_r, in_w)
    # LentPipes works on duplicates: the originals may go at any time.
    os.close(out_r)
    os.close(in_w)
    yield lent, out_w, in_r
    lent.close()
    for fd in (out_w, in_r):
        with contextlib.suppress(OSError):
            os.close(fd)


def test_fill_adds_what_came_then_reports_the_end(pipes: Any) -> None:
    lent, out_w, _ = pipes
    os.write(out_w, b'{"type": "log"}\n{"ty')
    assert lent.fill(1.0) == "ready"
    assert lent.reader.take_line() == b'{"type": "log"}'
    assert bytes(lent.reader.buffer) == b'{"ty'
    os.close(out_w)
    assert lent.fill(1.0) == "eof"
    assert lent.reader.eof


def test_fill_times_out_and_a_wake_interrupts_it(pipes: Any) -> None:
    lent, _, _ = pipes
    started = time.monotonic()
    assert lent.fill(0.2) == "timeout"
    assert time.monotonic() - started >= 0.19
    threading.Timer(0.1, lent.wake).start()
    assert lent.fill(300.0) == "woken"  # only the wake can end it: the timeout is far off


def test_waiting_data_is_read_first_even_past_the_deadline_and_keeps_a_wake_for_later(
    pipes: Any,
) -> None:
    lent, out_w, _ = pipes
    os.write(out_w, b'{"type": "log"}\n')
    lent.wake()
    assert lent.fill(0.0) == "ready"
    assert lent.reader.take_line() == b'{"type": "log"}'
    assert lent.fill(5.0) == "woken"  # the wake-up was not lost
    assert lent.fill(0.0) == "timeout"


def test_descriptors_lent_in_blocking_mode_still_time_out() -> None:
    out_r, out_w = os.pipe()
    in_r, in_w = os.pipe()
    lent = LentPipes(LineReader(1 << 20), out_r, in_w)  # left blocking, unlike asyncio's
    outcome: list[str] = []
    waiting = threading.Thread(target=lambda: outcome.append(lent.fill(0.1)), daemon=True)
    waiting.start()
    waiting.join(5)
    try:
        assert outcome == ["timeout"]
    finally:
        lent.close()
        for fd in (out_r, out_w, in_r, in_w):
            os.close(fd)


def test_write_reports_a_closed_inbox(pipes: Any) -> None:
    lent, _, in_r = pipes
    os.close(in_r)
    assert lent.write(b"x\n", 1.0) == "closed"


def test_write_waits_for_a_full_inbox_until_the_deadline_or_a_stop(pipes: Any) -> None:
    lent, _, in_r = pipes
    big = b"x" * (4 << 20)  # far more than a pipe holds
    started = time.monotonic()
    assert lent.write(big, 0.3) == "timeout"
    assert time.monotonic() - started >= 0.29
    threading.Timer(0.1, lent.stop).start()
    assert lent.write(big, 10.0) == "woken"
    # A reader that keeps reading gets every byte.
    tail = b"y" * (2 << 20)
    ys = 0

    def drain() -> None:
        nonlocal ys
        while ys < len(tail):
            ys += os.read(in_r, 1 << 16).count(b"y")

    lent.stopping = False
    reading = threading.Thread(target=drain, daemon=True)
    reading.start()
    assert lent.write(tail, 10.0) == "sent"
    reading.join(10)
    assert ys == len(tail)


def test_run_on_thread_hands_back_what_the_thread_raised() -> None:
    def work() -> None:
        raise LookupError("from the thread")

    with pytest.raises(LookupError, match="from the thread"):
        asyncio.run(run_on_thread(work, lambda: None))


def test_cancelling_run_on_thread_stops_the_thread_before_the_cancellation_goes_on() -> None:
    stop = threading.Event()
    finished: list[float] = []

    def work() -> None:
        stop.wait(10)
        time.sleep(0.2)  # still busy after being told to stop: it must be waited for
        finished.append(time.monotonic())

    async def scenario() -> float:
        task = asyncio.ensure_future(run_on_thread(work, stop.set))
        await asyncio.sleep(0.1)
        task.cancel()
        task.cancel()  # a second Ctrl-C does not cut the wait short either
        with pytest.raises(asyncio.CancelledError):
            await task
        return time.monotonic()

    cancelled_at = asyncio.run(scenario())
    assert finished and finished[0] <= cancelled_at


def test_a_wait_longer_than_poll_can_take_is_no_error(pipes: Any) -> None:
    # poll takes a C int of milliseconds; an idle_timeout_ms of months must not overflow it.
    lent, _, _ = pipes
    threading.Timer(0.1, lent.wake).start()
    assert lent.fill(90 * 24 * 3600.0) == "woken"
    threading.Timer(0.1, lent.stop).start()
    assert lent.write(b"x" * (4 << 20), 90 * 24 * 3600.0) == "woken"
