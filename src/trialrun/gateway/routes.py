"""Which URLs the model gateway serves, and error bodies in each provider's own shape.

An agent reaches the gateway through its SDK's base URL, so every path carries the run it
belongs to and the provider it speaks to::

    /run/<run-id>/openai/v1/chat/completions      (OPENAI_BASE_URL = .../run/<run-id>/openai/v1)
    /run/<run-id>/openai/v1/responses
    /run/<run-id>/openai/v1/embeddings
    /run/<run-id>/anthropic/v1/messages           (ANTHROPIC_BASE_URL = .../run/<run-id>/anthropic)
    /run/<run-id>/anthropic/v1/messages/count_tokens

A run id is one path segment of URL-safe characters (it also names the run's cassette file, so
it never starts with a dot). Anything else is answered with an error that lists what is served;
the SDKs turn those bodies into clean ``APIStatusError`` exceptions.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from trialrun.base.quoting import shortened

PROVIDERS: tuple[str, ...] = ("openai", "anthropic")
ENDPOINTS: dict[str, tuple[str, ...]] = {
    "openai": ("/v1/chat/completions", "/v1/responses", "/v1/embeddings"),
    "anthropic": ("/v1/messages", "/v1/messages/count_tokens"),
}
RUN_ID_MAX = 128
_RUN_ID = re.compile(r"[A-Za-z0-9_~-][A-Za-z0-9._~-]*")
RUN_ID_RULE = (
    f"1 to {RUN_ID_MAX} of the characters A-Z a-z 0-9 . _ ~ - (no '/', not starting with '.')"
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


def is_valid_run_id(run_id: str) -> bool:
    return len(run_id) <= RUN_ID_MAX and _RUN_ID.fullmatch(run_id) is not None


def served_paths() -> str:
    """One line naming every served path, for error messages."""
    return "; ".join(
        f"/run/<run-id>/{provider}" + "{" + ",".join(ENDPOINTS[provider]) + "}"
        for provider in PROVIDERS
    )


def parse_route(method: str, target: str) -> Route:
    """The route of a request line's target, or ``RouteError`` saying what is served instead."""
    parts = urlsplit(target)
    segments = parts.path.split("/")
    # "/run/<id>/<provider>/v1/..." splits into ["", "run", id, provider, "v1", ...]
    if len(segments) < 4 or segments[0] != "" or segments[1] != "run":
        raise RouteError(
            404,
            f"the gateway serves only {served_paths()}; found {_shown(parts.path)}",
        )
    run_id, provider = segments[2], segments[3]
    if not is_valid_run_id(run_id):
        raise RouteError(400, f"run id must be {RUN_ID_RULE}; found {_shown(run_id)}")
    if provider not in ENDPOINTS:
        raise RouteError(
            404,
            f"unknown provider {_shown(provider)} in run {run_id}: the gateway serves "
            f"{' and '.join(PROVIDERS)} ({served_paths()})",
            run_id=run_id,
        )
    path = "/" + "/".join(segments[4:])
    if path not in ENDPOINTS[provider]:
        raise RouteError(
            404,
            f"{provider} path {_shown(path)} is not served by the gateway; served: "
            f"{', '.join(ENDPOINTS[provider])}",
            run_id=run_id,
            provider=provider,
        )
    if method != "POST":
        raise RouteError(
            405,
            f"{provider} {path} takes POST; found {_shown(method)}",
            run_id=run_id,
            provider=provider,
        )
    return Route(run_id=run_id, provider=provider, path=path, query=parts.query)


def _shown(text: str, limit: int = 120) -> str:
    # Agent-chosen text ends up in logs and terminals: repr() escapes control characters.
    return repr(shortened(text, limit))


_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    413: "request_too_large",
}


def error_body(provider: str | None, status: int, message: str, *, code: str) -> bytes:
    """An error body in the shape the provider's SDK parses (OpenAI's when none is known)."""
    if provider == "anthropic":
        kind = _ANTHROPIC_ERROR_TYPES.get(
            status, "invalid_request_error" if status < 500 else "api_error"
        )
        body: dict[str, object] = {"type": "error", "error": {"type": kind, "message": message}}
    else:
        body = {"error": {"message": message, "type": code, "param": None, "code": code}}
    return json.dumps(body).encode("ascii")
