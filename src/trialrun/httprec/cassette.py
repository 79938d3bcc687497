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
it is written (``exchange.recorded``). ``inside_tool`` (only when set) names the agent's tool
whose real body sent the request while recording.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from trialrun.httprec import jsonl
from trialrun.httprec.exchange import Exchange
from trialrun.httprec.jsonl import Fail, kind

FORMAT = "trialrun-http-cassette"
SCHEMA_VERSION = 1
CASSETTE = jsonl.Format(FORMAT, SCHEMA_VERSION, "the exchange")
HEADER = CASSETTE.header
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
    "inside_tool",
    "recorded_at",
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
    if exchange.inside_tool is not None:  # absent otherwise: older files stay byte for byte
        data["inside_tool"] = exchange.inside_tool
    if exchange.recorded_at is not None:
        data["recorded_at"] = exchange.recorded_at
    return data


def dump_cassette(exchanges: Iterable[Exchange]) -> bytes:
    """The file's bytes: the header line, then one sorted-key line per exchange."""
    return CASSETTE.dump(exchange_json(e) for e in exchanges)


def write_cassette(
    path: Path, exchanges: Sequence[Exchange], old_lines: Sequence[str] = ()
) -> None:
    """Replace ``path`` atomically (a temporary file renamed over it). An exchange loaded from
    the file whose lines are ``old_lines`` (update mode) is written as its line was."""
    CASSETTE.write(
        path,
        (old_lines[e.line - 1] if e.line and old_lines else exchange_json(e) for e in exchanges),
    )


def load_cassette(path: Path) -> list[Exchange]:
    """The exchanges of ``path``; ``CassetteError`` (file and line) when it is missing or bad."""
    return jsonl.first(CASSETTE.read(path, _parse_exchange, label="HTTP cassette"))


def parse_cassette(text: str, path: Path) -> list[Exchange]:
    """The exchanges of a cassette's text; ``CassetteError`` at the first bad line."""
    return jsonl.first(CASSETTE.check(text, path, _parse_exchange))


def _parse_exchange(data: Any, fail: Fail) -> Exchange:
    if not isinstance(data, dict):
        raise fail(f"expected a recorded exchange (a JSON object); found {kind(data)}")
    jsonl.known_fields(data, _FIELDS, fail)
    for name in ("method", "url", "status"):
        if name not in data:
            raise fail(f"missing required field {name!r}")
    for name in ("method", "url"):
        if not isinstance(data[name], str) or not data[name]:
            raise fail(f"field {name!r} must be a non-empty string; found {kind(data[name])}")
    if not data["url"].startswith(("http://", "https://")):
        raise fail(f"field 'url' must start with http:// or https://; found {kind(data['url'])}")
    status = jsonl.status_of(data, fail)
    elapsed = jsonl.elapsed_of(data, fail)
    inside_tool = data.get("inside_tool")
    when = data.get("recorded_at")
    if when is not None and not isinstance(when, str):
        raise fail(f"field 'recorded_at' must be an ISO 8601 time (a string); found {kind(when)}")
    if "inside_tool" in data and not isinstance(inside_tool, str):
        raise fail(f"field 'inside_tool' must be a tool name (a string); found {kind(inside_tool)}")
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
        elapsed_ms=elapsed,
        line=fail.line,
        inside_tool=inside_tool,
        recorded_at=when,
    )


def _body(data: dict[str, Any], side: str, fail: Fail) -> bytes:
    text, encoded = data.get(f"{side}_body"), data.get(f"{side}_body_base64")
    if text is not None and encoded is not None:
        raise fail(f"expected one of '{side}_body' and '{side}_body_base64'; found both")
    if encoded is not None:
        if not isinstance(encoded, str):
            raise fail(f"field '{side}_body_base64' must be a string; found {kind(encoded)}")
        try:
            return base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raise fail(f"field '{side}_body_base64' is not valid base64") from None
    if text is None:
        return b""
    if not isinstance(text, str):
        raise fail(f"field '{side}_body' must be a string; found {kind(text)}")
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise fail(f"field '{side}_body' holds a lone surrogate; bytes go in base64") from None
