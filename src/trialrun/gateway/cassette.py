"""Model-call cassettes: the file format, loading with file:line errors, and replay matching.

A cassette holds one run's model calls. JSONL, UTF-8, one JSON object a line, keys sorted::

    {"format": "trialrun-model-cassette", "schema_version": 1}
    {"body": "...", "content_type": "text/event-stream", "elapsed_ms": 812.4, "headers": {...},
     "key": "9f2c...", "method": "POST", "occurrence": 0, "path": "/v1/messages",
     "provider": "anthropic", "query": "beta=true", "request": {...}, "status": 200,
     "usage": {"model": "...", "tokens_cached": 0, "tokens_in": 12, "tokens_out": 30}}

The first line is the header; each following line is a recorded call, in the order the requests
arrived. ``request`` is the normalized, redacted request body (see ``normalize``); ``body`` the
response exactly as received, a stream as its verbatim SSE text (bytes that are not UTF-8
survive as ``\\udcXX`` escapes), redacted; ``headers`` only the few response headers an SDK
acts on (request ids, retry hints). ``key`` and ``occurrence`` are written for people reading the
file: on load the key is computed again from ``request`` under the current rules. ``inside_tool``
(only when set) names the tool whose real body made the call while recording.

Matching consumes each recording once. The key's recordings are served in file order (the 2nd
identical request gets the 2nd recording), so parallel runs and repeated calls replay their own
answers. ``take_next`` serves the next unused recording of an endpoint whatever its key
(``--lenient``). A miss is explained against the nearest recording: its line and the first
place the requests differ (``messages[2].content``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trialrun.base.quoting import excerpt
from trialrun.base.words import counted
from trialrun.errors import CassetteError
from trialrun.gateway.normalize import RequestNormalizer, request_key
from trialrun.gateway.providers import get_provider, provider, provider_names
from trialrun.gateway.usage import Usage
from trialrun.httprec import jsonl
from trialrun.httprec.difference import canonical, describe, first_difference, miss_message
from trialrun.httprec.jsonl import Fail, kind
from trialrun.httprec.matching import Recordings

FORMAT = "trialrun-model-cassette"
SCHEMA_VERSION = 1
CASSETTE = jsonl.Format(FORMAT, SCHEMA_VERSION, "the recording")
HEADER = CASSETTE.header
# How many recordings of one endpoint a miss is compared with (the unused ones first).
MAX_COMPARED = 200


@dataclass(frozen=True, slots=True)
class Recording:
    """One recorded model call. ``line`` is its 1-based line in the file (0: not from a file)."""

    provider: str
    method: str
    path: str
    request: Any
    status: int
    content_type: str
    body: str
    query: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    key: str = ""
    occurrence: int = 0
    elapsed_ms: float = 0.0
    usage: Usage | None = None
    line: int = 0
    inside_tool: str | None = None
    """The tool whose real body made this call while recording (its arrival fell inside that
    tool's run): replay answers the tool from its cassette and never runs the body, so this
    recording is expected to stay unused there."""
    recorded_at: str | None = None
    """When the call was recorded (ISO 8601, UTC); None in files written before it was kept."""

    @property
    def model(self) -> str | None:
        return provider(self.provider).requested_model(self.path, self.request)

    @property
    def stream(self) -> bool:
        return provider(self.provider).is_stream(self.path, self.query, self.request)

    @property
    def endpoint_key(self) -> str:
        """What the recording key holds besides the request body (``Provider.endpoint_key``)."""
        return provider(self.provider).endpoint_key(self.method, self.path, self.query)

    def body_bytes(self) -> bytes:
        """The response body as the provider sent it."""
        return self.body.encode("utf-8", "surrogateescape")

    def to_json(self) -> dict[str, Any]:
        data = {
            "body": self.body,
            "content_type": self.content_type,
            "elapsed_ms": round(self.elapsed_ms, 3),
            "headers": dict(self.headers),
            "key": self.key,
            "method": self.method,
            "occurrence": self.occurrence,
            "path": self.path,
            "provider": self.provider,
            "query": self.query,
            "request": self.request,
            "status": self.status,
            "usage": self.usage.to_json() if self.usage is not None else None,
        }
        if self.inside_tool is not None:  # absent otherwise: older files stay byte for byte
            data["inside_tool"] = self.inside_tool
        if self.recorded_at is not None:
            data["recorded_at"] = self.recorded_at
        return data


def dump_cassette(recordings: Sequence[Recording]) -> bytes:
    """The file's bytes: the header line, then one sorted-key line per recording."""
    return CASSETTE.dump(r.to_json() for r in recordings)


def write_cassette(
    path: Path, recordings: Sequence[Recording], old_lines: Sequence[str] = ()
) -> None:
    """Replace ``path`` atomically (a temporary file renamed over it). A recording loaded from
    the file whose lines are ``old_lines`` (update mode) is written as its line was."""
    CASSETTE.write(
        path, (old_lines[r.line - 1] if r.line and old_lines else r.to_json() for r in recordings)
    )


class ModelCassette(Recordings[Recording]):
    """A loaded cassette and what replay has consumed of it: keyed by ``request_key``, grouped
    by endpoint ``(provider, method, path)`` (``take_next`` for ``--lenient``)."""

    def __init__(
        self, path: Path, recordings: Sequence[Recording], normalizer: RequestNormalizer
    ) -> None:
        self.path = path
        keys = [
            request_key(r.provider, r.endpoint_key, normalizer.normalize(r.request))
            for r in recordings
        ]
        super().__init__(recordings, keys, [(r.provider, r.method, r.path) for r in recordings])
        self.recordings = self.items

    @classmethod
    def load(cls, path: Path, normalizer: RequestNormalizer) -> ModelCassette:
        """Parse ``path``; a missing or corrupt file raises ``CassetteError`` with file and line."""
        return cls(path, jsonl.first(check_cassette_file(path)), normalizer)

    def explain_miss(
        self, provider: str, method: str, path: str, request: Any, key: str, *, query: str = ""
    ) -> str:
        """One line: why no recording answers this request, and the nearest one."""
        found = self.nearest(
            (provider, method, path),
            lambda i: similarity(self.recordings[i].request, request),
            limit=MAX_COMPARED,
        )
        if found is None:
            others = len(self.recordings)
            nearest = f"the cassette holds no recording of {provider} {path}" + (
                f" ({others} of other endpoints)" if others else " (it is empty)"
            )
        else:
            recording = self.recordings[found[0]]
            difference = first_difference(recording.request, request)
            nearest = describe(recording.line, difference, used=found[1])
            served_by = get_provider(provider)
            if served_by is not None and served_by.endpoint_key(
                method, path, recording.query
            ) != served_by.endpoint_key(method, path, query):
                nearest += f"; the query differs: recorded {recording.query!r}, requested {query!r}"
        return miss_message(
            f"{self.path.name} has no unused recording of {method} {provider} {path} for this "
            f"request ({summarize_request(request)})",
            used_identical=self.used_of(key),
            nearest=nearest,
        )


def similarity(recorded: Any, requested: Any) -> tuple[int, int]:
    """(equal leading conversation items, equal top-level fields): larger is nearer."""
    prefix = 0
    for old, new in zip(_conversation(recorded), _conversation(requested), strict=False):
        if canonical(old) != canonical(new):
            break
        prefix += 1
    same = 0
    if isinstance(recorded, dict) and isinstance(requested, dict):
        same = sum(
            1
            for k in recorded.keys() & requested.keys()
            if canonical(recorded[k]) == canonical(requested[k])
        )
    return prefix, same


def summarize_request(request: Any) -> str:
    """``model 'gpt-4o', 3 message(s), streamed``."""
    if request == "":
        return "no body"
    if not isinstance(request, dict):
        return "body is not a JSON object"
    parts = [f"model {request['model']!r}" if isinstance(request.get("model"), str) else "no model"]
    conversation = _conversation(request)
    if conversation:
        parts.append(counted(len(conversation), "message"))
    if request.get("stream") is True:
        parts.append("streamed")
    return ", ".join(parts)


def _conversation(request: Any) -> list[Any]:
    if isinstance(request, dict):
        for name in ("messages", "contents", "input"):
            items = request.get(name)
            if isinstance(items, list):
                return items
    return []


# ---- parsing -----------------------------------------------------------------------------


def check_cassette_file(path: Path) -> tuple[list[Recording], list[CassetteError]]:
    """``check_cassette`` of a file, read one line at a time. ``CassetteError`` when the file
    cannot be read or is not UTF-8 throughout."""
    return CASSETTE.read(path, _parse_recording)


def parse_cassette(text: str, path: Path) -> list[Recording]:
    """The recordings of a cassette's text; ``CassetteError`` at the first bad line."""
    return jsonl.first(check_cassette(text, path))


def check_cassette(text: str, path: Path) -> tuple[list[Recording], list[CassetteError]]:
    """The recordings of a cassette's text and every problem in it (a suite load shows all)."""
    return CASSETTE.check(text, path, _parse_recording)


_REQUIRED = ("provider", "method", "path", "request", "status", "content_type", "body")
_OPTIONAL = (
    "query",
    "headers",
    "key",
    "occurrence",
    "elapsed_ms",
    "usage",
    "inside_tool",
    "recorded_at",
)


def _parse_recording(data: Any, fail: Fail) -> Recording:
    if not isinstance(data, dict):
        raise fail(f"expected a recorded call (a JSON object); found {kind(data)}")
    jsonl.known_fields(data, (*_REQUIRED, *_OPTIONAL), fail)
    for name in _REQUIRED:
        if name not in data:
            raise fail(f"missing required field {name!r}")
    provider = data["provider"]
    if not isinstance(provider, str) or get_provider(provider) is None:
        raise fail(
            f"field 'provider' must be one of {', '.join(provider_names())}; found {kind(provider)}"
        )
    for name in (
        "method",
        "path",
        "content_type",
        "body",
        "query",
        "key",
        "inside_tool",
        "recorded_at",
    ):
        if name in data and not isinstance(data[name], str):
            raise fail(f"field {name!r} must be a string; found {kind(data[name])}")
    if not data["path"].startswith("/"):
        raise fail(f"field 'path' must start with '/'; found {excerpt(data['path'])!r}")
    status = jsonl.status_of(data, fail)
    occurrence = data.get("occurrence", 0)
    if not jsonl.is_int(occurrence) or occurrence < 0:
        raise fail(f"field 'occurrence' must be an integer >= 0; found {kind(occurrence)}")
    elapsed = jsonl.elapsed_of(data, fail)
    headers = data.get("headers", {})
    if not isinstance(headers, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
    ):
        raise fail("field 'headers' must be a mapping of header names to strings")
    usage = data.get("usage")
    if usage is not None and not isinstance(usage, dict):
        raise fail(f"field 'usage' must be a mapping or null; found {kind(usage)}")
    try:
        data["body"].encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raise fail(
            "field 'body' holds an escaped surrogate that is not a byte (\\udc80-\\udcff)"
        ) from None
    return Recording(
        provider=provider,
        method=data["method"],
        path=data["path"],
        request=data["request"],
        status=status,
        content_type=data["content_type"],
        body=data["body"],
        query=data.get("query", ""),
        headers=dict(headers),
        key=data.get("key", ""),
        occurrence=occurrence,
        elapsed_ms=elapsed,
        usage=Usage.from_json(usage) if usage is not None else None,
        line=fail.line,
        inside_tool=data.get("inside_tool"),
        recorded_at=data.get("recorded_at"),
    )
