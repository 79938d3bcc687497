"""Sending a request on to its real host: the one forwarder of the recorder and the gateway.

Record mode of the HTTP recorder and record and live modes of the model gateway send requests
here. ``open_upstream`` sends one and returns the answer unread, so the caller passes it on as
it arrives (``relay``). Headers go through unchanged except the ones about one connection, and
``Accept-Encoding`` is forced to ``identity``: text is stored and redacted, compressed bytes
would be neither.

An ``https`` host is reached through ``HTTPS_PROXY`` (a CONNECT tunnel) when trialrun's own
environment names one and ``NO_PROXY`` does not exempt the host; its certificate is checked
against the system's authorities plus the file ``TRIALRUN_HTTP_UPSTREAM_CA`` names (a private
API's own authority). A plain ``http`` host is always reached directly.
"""

from __future__ import annotations

import http.client
import os
import ssl
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import SplitResult, urlsplit

from trialrun.errors import ConfigError
from trialrun.httprec.exchange import NOT_FORWARDED, Request, default_port, host_header

DEFAULT_TIMEOUT_S = 600.0
"""How long an upstream may stay silent before the agent gets a 502."""
UPSTREAM_CA_ENV = "TRIALRUN_HTTP_UPSTREAM_CA"
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


@dataclass(frozen=True)
class Upstream:
    """Where one provider's requests go: ``scheme://host:port`` plus an optional path prefix.

    ``url`` is the URL without any ``user:password@``: it is what messages show (to the
    agent in a 502, on stderr). Credentials in an upstream URL are not sent anywhere.
    """

    url: str
    scheme: str
    host: str
    port: int
    base_path: str

    @classmethod
    def parse(cls, url: str, *, provider: str) -> Upstream:
        parts = urlsplit(url)
        shown = without_userinfo(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(
                f"upstream for {provider} must be an http:// or https:// URL with a host; "
                f"found {shown!r}"
            )
        if parts.query or parts.fragment:
            raise ConfigError(
                f"upstream for {provider} must not have a query or fragment; found {shown!r}"
            )
        try:
            port = parts.port
        except ValueError:
            raise ConfigError(f"upstream for {provider} has an invalid port: {shown!r}") from None
        return cls(
            url=shown,
            scheme=parts.scheme,
            host=parts.hostname,
            port=port if port is not None else default_port(parts.scheme),
            base_path=parts.path.rstrip("/"),
        )

    def request(
        self, method: str, target: str, headers: Iterable[tuple[str, str]], body: bytes
    ) -> Request:
        """The request to send here; ``target``: the path and query after ``base_path``."""
        return Request(
            method, self.scheme, self.host, self.port, self.base_path + target, list(headers), body
        )


def without_userinfo(url: str) -> str:
    """``url`` without ``user:password@`` (the rest as written), for showing it anywhere."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    end = len(rest)
    for stop in "/?#":
        found = rest.find(stop)
        if found != -1:
            end = min(end, found)
    authority = rest[:end]
    if "@" not in authority:
        return url
    return f"{scheme}://{authority.rpartition('@')[2]}{rest[end:]}"


def forward_headers(headers: Iterable[tuple[str, str]], upstream: Upstream) -> dict[str, str]:
    """The agent's headers as sent to ``upstream`` (end-to-end ones only, identity encoding):
    what a provider signs before ``open_upstream`` sends them."""
    out: dict[str, str] = {}
    for name, value in headers:
        if name.lower() not in NOT_FORWARDED:
            out[name] = value
    out["Host"] = host_header(upstream.scheme, upstream.host, upstream.port)
    out["Accept-Encoding"] = "identity"
    return out


def upstream_tls() -> ssl.SSLContext:
    """How upstream certificates are checked: the system's authorities, plus the file named by
    ``TRIALRUN_HTTP_UPSTREAM_CA``; ``ConfigError`` naming the file when it cannot be loaded."""
    context = ssl.create_default_context()
    extra = os.environ.get(UPSTREAM_CA_ENV)
    if extra:
        try:
            context.load_verify_locations(cafile=extra)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                f"{UPSTREAM_CA_ENV} must name a PEM file of certificate authorities; "
                f"cannot load it: {exc}",
                file=Path(extra),
            ) from None
    return context


class SharedTls:
    """One ``upstream_tls()`` context made on first use and kept (loading the system's
    authorities is the costly part of a first forward)."""

    def __init__(self) -> None:
        self._context: ssl.SSLContext | None = None
        self._lock = threading.Lock()

    def get(self) -> ssl.SSLContext:
        with self._lock:
            if self._context is None:
                self._context = upstream_tls()
            return self._context


def open_upstream(
    request: Request, tls: ssl.SSLContext | None = None, *, timeout: float = DEFAULT_TIMEOUT_S
) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
    """Send ``request`` to its host; the caller reads the answer and closes the connection.
    ``tls``: how an https host's certificate is checked (None: the system's authorities).

    Raises ``OSError`` (refused, unreachable, timeout, TLS failure) or
    ``http.client.HTTPException`` when no answer arrives.
    """
    connection = _connect(request, tls, timeout)
    try:
        connection.putrequest(
            request.method, request.target, skip_host=True, skip_accept_encoding=True
        )
        connection.putheader("Host", request.header("host") or request.authority)
        for name, value in request.headers:
            if name.lower() not in NOT_FORWARDED:
                connection.putheader(name, value)
        connection.putheader("Accept-Encoding", "identity")
        if request.body or request.method.upper() in _BODY_METHODS:
            connection.putheader("Content-Length", str(len(request.body)))
        connection.endheaders(request.body or None)
        return connection, connection.getresponse()
    except BaseException:
        connection.close()
        raise


def _connect(
    request: Request, tls: ssl.SSLContext | None, timeout: float
) -> http.client.HTTPConnection:
    if request.scheme != "https":
        return http.client.HTTPConnection(request.host, request.port, timeout=timeout)
    context = tls if tls is not None else ssl.create_default_context()
    proxy = _https_proxy(request.host)
    if proxy is None:
        return http.client.HTTPSConnection(
            request.host, request.port, timeout=timeout, context=context
        )
    connection = http.client.HTTPSConnection(
        proxy.hostname or "", proxy.port or 80, timeout=timeout, context=context
    )
    connection.set_tunnel(request.host, request.port)
    return connection


def _https_proxy(host: str) -> SplitResult | None:
    import urllib.request  # only when an https host is forwarded to

    proxy = urllib.request.getproxies().get("https")
    if not proxy or urllib.request.proxy_bypass(host):
        return None
    parts = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    return parts if parts.hostname else None
