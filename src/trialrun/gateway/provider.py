"""The provider interface of the model gateway: what one API family looks like on the wire.

The gateway has one recorder (``exchange``, ``cassette``) and a provider per API family
(``providers/``: OpenAI, Anthropic, Azure OpenAI, Gemini, Bedrock). A provider says:

* which paths and methods it serves (``endpoint``: anything else is a 404/405 in its shape);
* what of a request is matched (``endpoint_key``: method, path and the query parameters that
  change the answer, never a credential, a signature or a date; ``request_body``: the body as
  matched, a multipart upload as the digests of its parts);
* what of the query is stored (``stored_query``: credentials dropped);
* the model asked for and whether the answer streams (``requested_model``, ``is_stream``);
* the usage a response reports (``usage``), and which response headers are kept;
* its error body shape (``error_body``) and default upstream.

``Provider`` is abstract: each provider must say what it serves (``endpoint``) and what usage
its responses report (``usage``); the rest defaults to a plain JSON-over-HTTP API, errors in
the ``{"error": {"message": ...}}`` shape (``error_message``, also what ``exchange.error_of``
reads when it knows no provider), and each provider overrides what differs. A provider is
registered by name (``providers.register_provider``); the built-ins are loaded on
first use, so a gateway that only sees OpenAI traffic never imports the others.
"""

from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode

from trialrun.base.jsonnumbers import loads_finite
from trialrun.base.nesting import nests_deeper_than
from trialrun.base.quoting import shortened
from trialrun.base.redact import redact
from trialrun.gateway.usage import Usage
from trialrun.httprec.upstream import Upstream

# Response headers worth keeping for every provider: request ids for audit, retry hints the
# SDKs act on. A provider adds its own (``Provider.recorded_headers``).
COMMON_RECORDED_HEADERS = frozenset(
    {"request-id", "x-request-id", "retry-after", "retry-after-ms", "x-should-retry"}
)


@dataclass(frozen=True)
class Route:
    """A request the gateway serves: whose run, which provider, which endpoint."""

    run_id: str
    provider: str
    path: str
    """The provider's own path (``/v1/messages``), without the run prefix or the query."""
    query: str
    """The query string without ``?`` (``beta=true``), or ``""``."""


class RouteError(Exception):
    """A request the gateway does not serve; becomes an HTTP error response, not a crash."""

    def __init__(
        self, status: int, message: str, *, run_id: str | None = None, provider: str | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.run_id = run_id
        self.provider = provider


def shown(text: str, limit: int = 120) -> str:
    """Agent-chosen text as a message quotes it: short, control characters escaped."""
    return repr(shortened(text, limit))


class Provider(ABC):
    """A JSON-over-HTTP model API. Subclasses set the class attributes, implement ``endpoint``
    and ``usage``, and override the other methods where their API differs."""

    name: str = ""
    default_upstream: str | None = None
    """Where requests go unless ``--upstream`` says otherwise; None: there is no such place
    (Azure's endpoint is the user's own resource) and record/live need ``--upstream``."""
    served: str = ""
    """What it serves, for error messages: ``POST /v1/messages, any /v1/... path``."""
    recorded_headers: frozenset[str] = COMMON_RECORDED_HEADERS
    dropped_query: frozenset[str] = frozenset()
    """Query parameters never stored nor matched (credentials, signatures)."""
    unmatched_query: frozenset[str] = frozenset()
    """Query parameters stored but not matched (a protocol version that does not change the
    question)."""

    # ---- routing ---------------------------------------------------------------------------

    @abstractmethod
    def endpoint(self, method: str, path: str) -> str:
        """The endpoint as stored and matched (``path``, possibly canonicalized), or
        ``RouteError`` 404 / 405 saying what is served."""

    def upstream_path(self, path: str) -> str:
        """The stored endpoint as the provider is sent it (the same path unless ``endpoint``
        canonicalized it)."""
        return path

    def upstream_headers(
        self,
        headers: dict[str, str],
        *,
        upstream: Upstream,
        method: str,
        path: str,
        query: str,
        body: bytes,
    ) -> dict[str, str]:
        """The headers sent upstream (``path``: as sent, upstream prefix included). The agent's
        own, unchanged, unless the provider must sign the request again (Bedrock)."""
        return headers

    def not_served(self, path: str) -> RouteError:
        return RouteError(
            404,
            f"{self.name} path {shown(path)} is not served by the gateway; served: {self.served}",
            provider=self.name,
        )

    def wrong_method(self, method: str, path: str, allowed: str) -> RouteError:
        # The path is the agent's (any path under a served prefix): shown escaped, like the method.
        return RouteError(
            405,
            f"{self.name} {shown(path)} takes {allowed}; found {shown(method)}",
            provider=self.name,
        )

    # ---- matching --------------------------------------------------------------------------

    def stored_query(self, query: str) -> str:
        """The query as the cassette keeps it: dropped parameters out, the rest redacted."""
        if not query:
            return ""
        if self.dropped_query:
            pairs = parse_qsl(query, keep_blank_values=True)
            kept = [(k, v) for k, v in pairs if k.lower() not in self.dropped_query]
            if len(kept) != len(pairs):
                query = urlencode(kept)
        stored: str = redact(query)
        return stored

    def endpoint_key(self, method: str, path: str, query: str) -> str:
        """What the recording key holds besides the body: method, path, the matched query."""
        pairs = sorted(
            (k, v)
            for k, v in parse_qsl(query, keep_blank_values=True)
            if k.lower() not in self.unmatched_query and k.lower() not in self.dropped_query
        )
        return f"{method} {path}" + (f"?{urlencode(pairs)}" if pairs else "")

    def request_body(self, content_type: str, body: bytes) -> Any:
        """The body as matched: JSON, a multipart upload's part digests, or text."""
        if content_type.split(";")[0].strip().lower() == "multipart/form-data":
            parts = multipart_digest(content_type, body)
            if parts is not None:
                return {"multipart": parts}
        return parse_json(body)

    def requested_model(self, path: str, request: Any) -> str | None:
        model = request.get("model") if isinstance(request, dict) else None
        return model if isinstance(model, str) else None

    def is_stream(self, path: str, query: str, request: Any) -> bool:
        return isinstance(request, dict) and request.get("stream") is True

    # ---- responses -------------------------------------------------------------------------

    @abstractmethod
    def usage(
        self, method: str, path: str, content_type: str, body: str, headers: Mapping[str, str]
    ) -> Usage:
        """The tokens and model a response reports; an empty ``Usage`` where it reports none.

        Abstract because a provider that forgot it would report no tokens and no cost, and
        every budget on them would pass."""

    def error_body(self, status: int, message: str, *, code: str) -> bytes:
        body = {"error": {"message": message, "type": code, "param": None, "code": code}}
        return json.dumps(body).encode("ascii")

    def error_message(self, body: Any) -> str | None:
        """The provider's own message in a parsed error body, if it has one."""
        return error_message(body)


def error_message(body: Any) -> str | None:
    """The message of a parsed error body in the ``{"error": {"message": ...}}`` shape that
    OpenAI, Anthropic, Azure and Gemini share; None for any other body."""
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        found: str = error["message"]
        return found
    return None


def parse_json(body: bytes) -> Any:
    """The body as JSON, or as text when it is not strict JSON (it is then matched as text), or
    nests too deeply for the walks over it (``base.nesting``)."""
    text = body.decode("utf-8", "surrogateescape")
    try:
        value = loads_finite(text)
    except (ValueError, RecursionError):
        return text
    return text if nests_deeper_than(value, text=text) else value


def multipart_digest(content_type: str, body: bytes) -> list[dict[str, Any]] | None:
    """A multipart/form-data body as its parts: a field's text (up to 1000 characters), a
    file's name, type, size and SHA-256. The boundary, new on every request, is left out, and a
    file's bytes never reach the cassette. None when the body does not parse as multipart."""
    from email.parser import BytesParser
    from email.policy import HTTP

    head = f"Content-Type: {content_type}\r\n\r\n".encode("latin-1", "replace")
    message = BytesParser(policy=HTTP).parsebytes(head + body)
    if not message.is_multipart():
        return None
    parts: list[dict[str, Any]] = []
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        filename = part.get_filename()
        payload = part.get_payload(decode=True)
        data = payload if isinstance(payload, bytes) else b""
        entry: dict[str, Any] = {"name": name if isinstance(name, str) else None}
        if filename is None:
            entry["value"] = data.decode("utf-8", "replace")[:1000]
        else:
            entry.update(
                filename=filename,
                content_type=part.get_content_type(),
                bytes=len(data),
                sha256=hashlib.sha256(data).hexdigest(),
            )
        parts.append(entry)
    return parts
