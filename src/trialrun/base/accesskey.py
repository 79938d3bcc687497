"""The key a client of a local service presents: the first two segments of the URL path.

``http://127.0.0.1:PORT/key/<key>/run/<run-id>/...``: the key rides in the base URL, the one
setting every client already takes (``OPENAI_BASE_URL``, ``ANTHROPIC_BASE_URL``, an MCP
server's ``url``), so unmodified SDKs and MCP clients send it with every request. A header
would not do: the OpenAI and Anthropic SDKs read no extra headers from the environment, and the
API key they send must reach the provider unchanged in record mode.

Keys are compared in constant time. The path a handler goes on with has the key taken out, so
nothing that logs or echoes a path can show it.
"""

from __future__ import annotations

KEY_SEGMENT = "key"
_PREFIX = f"/{KEY_SEGMENT}/"


def new_key() -> str:
    """An unguessable key (256 random bits, URL-safe text)."""
    import base64
    import os

    # What secrets.token_urlsafe(32) gives, without importing random and hmac before every
    # run's first agent (each case's recorder credentials take a key).
    return base64.urlsafe_b64encode(os.urandom(32)).rstrip(b"=").decode("ascii")


def split_key(target: str) -> tuple[str | None, str]:
    """``(key, rest)`` of a request target: ``/key/K/run/x`` gives ``("K", "/run/x")``; a target
    without the prefix gives ``(None, target)``."""
    if not target.startswith(_PREFIX):
        return None, target
    key, slash, rest = target[len(_PREFIX) :].partition("/")
    return key, slash + rest


def key_matches(presented: str | None, required: str | None) -> bool:
    """Whether a request may go on: no key required, or the right one presented."""
    if required is None:
        return True
    if presented is None:
        return False
    import hmac

    # Constant time: how much of a guess matched must not show in how long the answer took.
    return hmac.compare_digest(
        presented.encode("utf-8", "surrogateescape"), required.encode("utf-8", "surrogateescape")
    )


def with_key(base_url: str, key: str | None) -> str:
    """``base_url`` with the key's segments after the host (unchanged without a key)."""
    return base_url if key is None else f"{base_url.rstrip('/')}{_PREFIX}{key}"


REFUSED = (
    "this address needs its key: expected a URL of the form http://HOST:PORT/key/<key>/..., "
    "as trialrun hands it to the agent (a standalone server's key is its --token)"
)
"""What a client without the right key is told: nothing about the runs or their recordings."""
