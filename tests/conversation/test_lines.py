"""LineReader: the agent's stdout as lines."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trialrun.conversation.lines import LineReader, MessageTooLargeError, UnterminatedLine


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
