"""One HTTP exchange as the recorder sees it, and the redacted form in which it is stored.

``Request`` and ``Response`` are what went over the wire (secrets included: the agent gets the
real answer in record mode). ``Exchange`` is what reaches a cassette: the URL with secrets in its
query replaced by ``[REDACTED]``, only the request headers that say what the body is, the
response headers minus the ones that describe one connection, every header named for a secret
(``Authorization``, ``Cookie``, ``Set-Cookie``, ``X-Api-Key``...) redacted, and bodies that are
text passed through ``redact_text``. Bodies that are not UTF-8 are kept as bytes (base64 in
the file) and cannot be redacted: the recorder asks upstreams for ``identity`` encoding so that
compressed text never arrives.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import parse_qsl, quote, urlsplit, urlunsplit

from trialrun.base.recordtime import recorded_at
from trialrun.base.redact import REDACTED, is_sensitive_key, redact_text

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
"""Headers about one connection (RFC 9110 7.6.1): never forwarded, never recorded."""
NOT_FORWARDED = HOP_BY_HOP | {"accept-encoding", "host", "content-length"}
"""The agent's headers a forwarder sets itself (identity encoding: text is stored and redacted,
compressed bytes would be neither) or leaves out."""
_NOT_REPLAYED = HOP_BY_HOP | {"content-length", "date"}
"""Response headers a replay computes again (the length) or that only say when (the date)."""
KEPT_REQUEST_HEADERS = ("content-type", "accept")
"""The request headers stored beside a recording, for the people reading it (not matched)."""


@dataclass(frozen=True, slots=True)
class Request:
    """A request the agent sent through the proxy."""

    method: str
    scheme: str
    host: str
    port: int
    target: str
    """The path and query (origin form: ``/v1/items?page=2``)."""
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""

    @property
    def address(self) -> str:
        """``host:port`` (an IPv6 host in brackets), as the seal's messages name it."""
        return f"{bracketed(self.host)}:{self.port}"

    @property
    def authority(self) -> str:
        """What a ``Host`` header names: the default port left out."""
        return host_header(self.scheme, self.host, self.port)

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.authority.lower()}{self.target}"

    def header(self, name: str) -> str | None:
        wanted = name.lower()
        return next((v for k, v in self.headers if k.lower() == wanted), None)


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    headers: list[tuple[str, str]]
    body: bytes
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Exchange:
    """One recorded exchange. ``line`` is its 1-based line in the cassette (0: not from a file)."""

    method: str
    url: str
    status: int
    request_body: bytes = b""
    response_body: bytes = b""
    request_headers: dict[str, str] = field(default_factory=dict)
    response_headers: list[tuple[str, str]] = field(default_factory=list)
    elapsed_ms: float = 0.0
    line: int = 0
    inside_tool: str | None = None
    """The agent's tool whose real body sent this request while recording (it arrived while
    that tool ran): replay answers the tool from its cassette and never runs the body."""
    recorded_at: str | None = None
    """When it was recorded (ISO 8601, UTC); None in files written before it was kept."""

    @property
    def address(self) -> str:
        """``host:port`` of the URL."""
        return address_of(self.url)

    def response(self) -> Response:
        """The response a replay sends (its length computed again)."""
        headers = [(k, v) for k, v in self.response_headers if k.lower() not in _NOT_REPLAYED]
        headers.append(("Content-Length", str(len(self.response_body))))
        return Response(self.status, headers, self.response_body)


def address_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{bracketed(parts.hostname or '')}:{parts.port or default_port(parts.scheme)}"


def bracketed(host: str) -> str:
    """A host as a URL writes it: an IPv6 address in brackets."""
    return f"[{host}]" if ":" in host else host


def default_port(scheme: str) -> int:
    return 443 if scheme == "https" else 80


def host_header(scheme: str, host: str, port: int) -> str:
    """The ``Host`` header (and a URL's authority): the scheme's default port left out."""
    return bracketed(host) if port == default_port(scheme) else f"{bracketed(host)}:{port}"


def recorded(request: Request, response: Response, elapsed_ms: float) -> Exchange:
    """The exchange as it may be stored: redacted (see the module's docstring)."""
    kept = {
        name: redact_text(value)
        for name in KEPT_REQUEST_HEADERS
        if (value := request.header(name)) is not None
    }
    return Exchange(
        method=request.method.upper(),
        url=redact_url(request.url),
        status=response.status,
        request_body=redact_body(request.body),
        response_body=redact_body(response.body),
        request_headers=kept,
        response_headers=redact_headers(response.headers),
        elapsed_ms=elapsed_ms,
        recorded_at=recorded_at(),
    )


def redact_url(url: str) -> str:
    """``url`` without user info, with secret query values and secret shapes redacted."""
    parts = urlsplit(url)
    netloc = bracketed(parts.hostname or "")
    if parts.port is not None:
        netloc = f"{netloc}:{parts.port}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(is_sensitive_key(name) for name, _ in pairs):
            query = "&".join(
                f"{quote(name, safe='')}="
                + (REDACTED if is_sensitive_key(name) else quote(value, safe=""))
                for name, value in pairs
            )
    path = redact_text(parts.path)
    return urlunsplit((parts.scheme, netloc, path, redact_text(query), ""))


def redact_headers(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    kept: list[tuple[str, str]] = []
    for name, value in headers:
        lowered = name.lower()
        if lowered in _NOT_REPLAYED:
            continue
        kept.append((name, REDACTED if is_sensitive_key(lowered) else redact_text(value)))
    return kept


def redact_body(body: bytes) -> bytes:
    """A UTF-8 body with its secret shapes redacted; any other body unchanged."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return body
    return redact_text(text).encode("utf-8")
