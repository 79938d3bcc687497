"""The one request-body reader of the local servers (HTTP recorder, model gateway): a
Content-Length or chunked body, refused with 400 / 413 when malformed, short or too large."""

from __future__ import annotations

import io
from email.message import Message
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trialrun.base.localserver import BadLength, read_body

LIMIT = 1000


def handler(headers: dict[str, str], raw: bytes) -> Any:
    message = Message()
    for name, value in headers.items():
        message[name] = value
    return SimpleNamespace(headers=message, rfile=io.BytesIO(raw))


def chunked(parts: list[bytes]) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts if p) + b"0\r\n\r\n"


@given(st.lists(st.binary(min_size=1, max_size=60), max_size=8), st.binary(max_size=20))
def test_a_chunked_body_reads_back_whole_and_stops_at_its_end(
    parts: list[bytes], after: bytes
) -> None:
    reader = handler({"Transfer-Encoding": "chunked"}, chunked(parts) + after)
    assert read_body(reader, LIMIT, service="test") == b"".join(parts)
    assert reader.rfile.read() == after  # the next request on the connection is left alone


@given(st.binary(max_size=200))
def test_a_content_length_body_reads_exactly_that_many_bytes(body: bytes) -> None:
    reader = handler({"Content-Length": str(len(body))}, body + b"GET / HTTP/1.1\r\n")
    assert read_body(reader, LIMIT, service="test") == body


@pytest.mark.parametrize(
    ("headers", "raw", "status", "words"),
    [
        ({"Transfer-Encoding": "chunked"}, b"-5\r\nhello\r\n0\r\n\r\n", 400, "malformed chunked"),
        ({"Transfer-Encoding": "chunked"}, b"zz\r\n", 400, "malformed chunked"),
        ({"Transfer-Encoding": "chunked"}, b"a\r\nshort", 400, "ended early"),
        ({"Transfer-Encoding": "chunked"}, b"3e9\r\n" + b"x" * 1001, 413, "test's limit of 1000"),
        ({"Content-Length": "10"}, b"short", 400, "ended before its Content-Length"),
        ({"Content-Length": "1001"}, b"", 413, "test's limit of 1000"),
        ({"Content-Length": "+5"}, b"hello", 400, "digits only"),
    ],
)
def test_a_bad_body_is_refused_naming_what_is_wrong(
    headers: dict[str, str], raw: bytes, status: int, words: str
) -> None:
    with pytest.raises(BadLength) as caught:
        read_body(handler(headers, raw), LIMIT, service="test")
    assert caught.value.status == status and words in caught.value.message


def test_transfer_encoding_wins_over_content_length() -> None:
    reader = handler({"Transfer-Encoding": "chunked", "Content-Length": "3"}, chunked([b"hello"]))
    assert read_body(reader, LIMIT, service="test") == b"hello"
