"""The Host header the gateway sends upstream, shared with the HTTP recorder's."""

from __future__ import annotations

import pytest

from trialrun.httprec.upstream import Upstream, forward_headers


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("https://api.openai.com", "api.openai.com"),
        ("http://127.0.0.1:8080/v1", "127.0.0.1:8080"),
        ("https://example.com:443", "example.com"),
        ("http://[::1]:8080", "[::1]:8080"),
        ("http://[::1]", "[::1]"),
    ],
)
def test_the_host_header_names_the_upstream_as_a_url_does(url: str, host: str) -> None:
    upstream = Upstream.parse(url, provider="openai")
    sent = forward_headers([("Host", "127.0.0.1:9"), ("Accept-Encoding", "gzip")], upstream)
    assert sent == {"Host": host, "Accept-Encoding": "identity"}
