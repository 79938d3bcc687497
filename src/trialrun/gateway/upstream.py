"""Forwarding a request to the real provider (record and live modes), stdlib ``http.client`` only.

The response is returned unread so the gateway can pass it on chunk by chunk as it arrives.
Headers go through unchanged (the agent's own ``Authorization`` / ``x-api-key``,
``anthropic-version``, ``anthropic-beta``, ``openai-*``...) except the hop-by-hop ones, and
``Accept-Encoding`` is forced to ``identity``: the gateway records the body as text, and a
gzip-compressed stream would be neither readable nor replayable.

An ``https`` upstream is reached through ``HTTPS_PROXY`` (a CONNECT tunnel) when the environment
names one and ``NO_PROXY`` does not exempt the host.
"""

from __future__ import annotations

import http.client
import ssl
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

from trialrun.errors import ConfigError
from trialrun.httprec.exchange import NOT_FORWARDED, default_port, host_header

DEFAULT_UPSTREAMS: dict[str, str] = {
    "openai": "https://api.openai.com",
    "anthropic": "https://api.anthropic.com",
}
DEFAULT_TIMEOUT_S = 600.0


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
    """The agent's headers as sent upstream (end-to-end ones only, identity encoding)."""
    out: dict[str, str] = {}
    for name, value in headers:
        if name.lower() not in NOT_FORWARDED:
            out[name] = value
    out["Host"] = host_header(upstream.scheme, upstream.host, upstream.port)
    out["Accept-Encoding"] = "identity"
    return out


def open_upstream(
    upstream: Upstream,
    method: str,
    path: str,
    query: str,
    headers: dict[str, str],
    body: bytes,
    *,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
    """Send the request; the caller reads the response and closes the connection.

    Raises ``OSError`` (refused, unreachable, timeout, TLS failure) or ``http.client.HTTPException``
    when no response arrives.
    """
    connection = _connect(upstream, timeout)
    target = upstream.base_path + path + (f"?{query}" if query else "")
    try:
        connection.request(method, target, body=body, headers=headers)
        return connection, connection.getresponse()
    except BaseException:
        connection.close()
        raise


def _connect(upstream: Upstream, timeout: float) -> http.client.HTTPConnection:
    if upstream.scheme == "http":
        return http.client.HTTPConnection(upstream.host, upstream.port, timeout=timeout)
    context = ssl.create_default_context()
    proxy = _https_proxy(upstream.host)
    if proxy is None:
        return http.client.HTTPSConnection(
            upstream.host, upstream.port, timeout=timeout, context=context
        )
    connection = http.client.HTTPSConnection(
        proxy.hostname or "", proxy.port or 80, timeout=timeout, context=context
    )
    connection.set_tunnel(upstream.host, upstream.port)
    return connection


def _https_proxy(host: str) -> SplitResult | None:
    proxy = urllib.request.getproxies().get("https")
    if not proxy or urllib.request.proxy_bypass(host):
        return None
    parts = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    return parts if parts.hostname else None
