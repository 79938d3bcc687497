"""HTTP cassettes: the file format, and loading it with file:line errors.

JSONL, UTF-8, one JSON object a line, keys sorted; the first line is the header::

    {"format": "trialrun-http-cassette", "schema_version": 1}
    {"elapsed_ms": 41.2, "method": "GET", "request_body": "",
     "request_headers": {"accept": "*/*"}, "response_body": "{\\"temp\\": 21}",
     "response_headers": [["Content-Type", "application/json"]], "status": 200,
     "url": "https://api.example.com/v1/weather?city=Oslo&key=[REDACTED]"}

Each following line is one exchange, in the order the requests arrived. A body is stored as text
(``request_body``, ``response_body``) when it is UTF-8, else as ``request_body_base64`` /
``response_body_base64``. A streamed answer (chunked, server-sent events) is stored whole, as the
bytes the client received once the transfer coding was taken off. Everything is redacted before
it is written (``exchange.recorded``).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from trialrun.base.fsutil import atomic_write_bytes, dumps_json
from trialrun.base.jsonnumbers import loads_finite
from trialrun.base.nesting import nests_deeper_than, too_deep, unreadable_json
from trialrun.base.quoting import excerpt
from trialrun.base.suggest import did_you_mean
from trialrun.errors import CassetteError
from trialrun.httprec.exchange import Exchange

FORMAT = "trialrun-http-cassette"
SCHEMA_VERSION = 1
HEADER: dict[str, Any] = {"format": FORMAT, "schema_version": SCHEMA_VERSION}
_FIELDS = (
    "method",
    "url",
    "status",
    "request_headers",
    "response_headers",
    "request_body",
    "request_body_base64",
    "response_body",
    "response_body_base64",
    "elapsed_ms",
)


def exchange_json(exchange: Exchange) -> dict[str, Any]:
    data: dict[str, Any] = {
        "method": exchange.method,
        "url": exchange.url,
        "status": exchange.status,
        "request_headers": dict(exchange.request_headers),
        "response_headers": [[k, v] for k, v in exchange.response_headers],
        "elapsed_ms": round(exchange.elapsed_ms, 3),
    }
    for side, body in (("request", exchange.request_body), ("response", exchange.response_body)):
        try:
            data[f"{side}_body"] = body.decode("utf-8")
        except UnicodeDecodeError:
            data[f"{side}_body_base64"] = base64.b64encode(body).decode("ascii")
    return data


def dump_cassette(exchanges: Iterable[Exchange]) -> bytes:
    """The file's bytes: the header line, then one sorted-key line per exchange."""
    lines = [dumps_json(HEADER, indent=None)]
    lines.extend(dumps_json(exchange_json(e), indent=None) for e in exchanges)
    return ("\n".join(lines) + "\n").encode("utf-8")


def write_cassette(path: Path, exchanges: Sequence[Exchange]) -> None:
    """Replace ``path`` atomically (a temporary file renamed over it)."""
    atomic_write_bytes(path, dump_cassette(exchanges))


def load_cassette(path: Path) -> list[Exchange]:
    """The exchanges of ``path``; ``CassetteError`` (file and line) when it is missing or bad."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise CassetteError("HTTP cassette file not found", file=path) from None
    except IsADirectoryError:
        raise CassetteError("expected a cassette file, found a directory", file=path) from None
    except OSError as exc:
        raise CassetteError(f"cannot read cassette: {exc.strerror or exc}", file=path) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise CassetteError(
            f"not valid UTF-8 (byte 0x{raw[exc.start]:02x})", file=path, line=line
        ) from None
    return parse_cassette(text, path)


def parse_cassette(text: str, path: Path) -> list[Exchange]:
    """The exchanges of a cassette's text; ``CassetteError`` at the first bad line."""
    lines = _lines(text)
    header = next(lines, (1, ""))
    _check_header(header[1], path)
    return [_parse_exchange(line, path, number) for number, line in lines if line.strip()]


def _lines(text: str) -> Iterator[tuple[int, str]]:
    return enumerate(text.split("\n"), start=1)


def _load_line(line: str, path: Path, number: int) -> Any:
    try:
        value = loads_finite(line)
    except (ValueError, RecursionError) as exc:
        raise CassetteError(
            f"not valid JSON: {unreadable_json(exc)}", file=path, line=number
        ) from None
    if nests_deeper_than(value, text=line):
        raise CassetteError(too_deep("the exchange"), file=path, line=number)
    return value


def _check_header(line: str, path: Path) -> None:
    expected = json.dumps(HEADER, sort_keys=True)
    if not line.strip():
        raise CassetteError(
            f"expected the header line {expected}; found an empty line", file=path, line=1
        )
    data = _load_line(line, path, 1)
    if isinstance(data, dict) and data.get("format") == FORMAT:
        version = data.get("schema_version")
        if version == SCHEMA_VERSION:
            return
        raise CassetteError(
            f"schema_version {excerpt(repr(version))} is not supported (this trialrun reads "
            f"{SCHEMA_VERSION}); was it written by a newer trialrun?",
            file=path,
            line=1,
        )
    raise CassetteError(f"expected the header line {expected}", file=path, line=1)


def _parse_exchange(line: str, path: Path, number: int) -> Exchange:
    data = _load_line(line, path, number)

    def fail(message: str) -> CassetteError:
        return CassetteError(message, file=path, line=number)

    if not isinstance(data, dict):
        raise fail(f"expected a recorded exchange (a JSON object); found {_kind(data)}")
    for name in data:
        if name not in _FIELDS:
            raise fail(f"unknown field {excerpt(repr(name))}{did_you_mean(name, _FIELDS)}")
    for name in ("method", "url", "status"):
        if name not in data:
            raise fail(f"missing required field {name!r}")
    for name in ("method", "url"):
        if not isinstance(data[name], str) or not data[name]:
            raise fail(f"field {name!r} must be a non-empty string; found {_kind(data[name])}")
    if not data["url"].startswith(("http://", "https://")):
        raise fail(f"field 'url' must start with http:// or https://; found {_kind(data['url'])}")
    status = data["status"]
    if not (isinstance(status, int) and not isinstance(status, bool) and 100 <= status <= 599):
        raise fail(f"field 'status' must be an HTTP status (100-599); found {_kind(status)}")
    elapsed = data.get("elapsed_ms", 0.0)
    if isinstance(elapsed, bool) or not isinstance(elapsed, int | float) or not elapsed >= 0:
        raise fail(f"field 'elapsed_ms' must be a number >= 0; found {_kind(elapsed)}")
    request_headers = data.get("request_headers", {})
    if not isinstance(request_headers, dict) or not all(
        isinstance(v, str) for v in request_headers.values()
    ):
        raise fail("field 'request_headers' must be a mapping of header names to strings")
    response_headers = data.get("response_headers", [])
    if not isinstance(response_headers, list) or not all(
        isinstance(pair, list) and len(pair) == 2 and all(isinstance(p, str) for p in pair)
        for pair in response_headers
    ):
        raise fail("field 'response_headers' must be a list of [name, value] pairs of strings")
    return Exchange(
        method=data["method"],
        url=data["url"],
        status=status,
        request_body=_body(data, "request", fail),
        response_body=_body(data, "response", fail),
        request_headers=dict(request_headers),
        response_headers=[(k, v) for k, v in response_headers],
        elapsed_ms=float(elapsed),
        line=number,
    )


def _body(data: dict[str, Any], side: str, fail: Any) -> bytes:
    text, encoded = data.get(f"{side}_body"), data.get(f"{side}_body_base64")
    if text is not None and encoded is not None:
        raise fail(f"expected one of '{side}_body' and '{side}_body_base64'; found both")
    if encoded is not None:
        if not isinstance(encoded, str):
            raise fail(f"field '{side}_body_base64' must be a string; found {_kind(encoded)}")
        try:
            return base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raise fail(f"field '{side}_body_base64' is not valid base64") from None
    if text is None:
        return b""
    if not isinstance(text, str):
        raise fail(f"field '{side}_body' must be a string; found {_kind(text)}")
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise fail(f"field '{side}_body' holds a lone surrogate; bytes go in base64") from None


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, int | float):
        return f"number {value}"
    if isinstance(value, str):
        return f"string {excerpt(value)!r}"
    return "a list" if isinstance(value, list) else "an object"
