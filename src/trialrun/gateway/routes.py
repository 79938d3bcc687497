"""Which URLs the model gateway serves, and error bodies in each provider's own shape.

An agent reaches the gateway through its SDK's base URL, so every path carries the run it
belongs to and the provider it speaks to::

    /run/<run-id>/openai/v1/chat/completions      (OPENAI_BASE_URL = .../run/<run-id>/openai/v1)
    /run/<run-id>/anthropic/v1/messages           (ANTHROPIC_BASE_URL = .../run/<run-id>/anthropic)
    /run/<run-id>/azure/openai/deployments/<d>/chat/completions?api-version=...
    /run/<run-id>/gemini/v1beta/models/<m>:generateContent
    /run/<run-id>/bedrock/model/<model-id>/converse

What each provider serves after its prefix is the provider's own business (``provider``,
``providers/``). A run id is one path segment of URL-safe characters (it also names the run's
cassette file, so it never starts with a dot). Anything else is answered with an error that
lists what is served; the SDKs turn those bodies into clean exceptions.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from trialrun.gateway.provider import Route, RouteError, shown
from trialrun.gateway.providers import BUILTIN_PROVIDERS, get_provider, provider_names

__all__ = [
    "PROVIDERS",
    "RUN_ID_MAX",
    "RUN_ID_RULE",
    "Route",
    "RouteError",
    "error_body",
    "is_valid_run_id",
    "parse_route",
    "served_paths",
]

PROVIDERS: tuple[str, ...] = tuple(BUILTIN_PROVIDERS)
"""The built-in providers (``providers.provider_names()`` adds registered ones)."""
RUN_ID_MAX = 128
_RUN_ID = re.compile(r"[A-Za-z0-9_~-][A-Za-z0-9._~-]*")
RUN_ID_RULE = (
    f"1 to {RUN_ID_MAX} of the characters A-Z a-z 0-9 . _ ~ - (no '/', not starting with '.')"
)


def is_valid_run_id(run_id: str) -> bool:
    return len(run_id) <= RUN_ID_MAX and _RUN_ID.fullmatch(run_id) is not None


def served_paths() -> str:
    """One line naming every served prefix, for error messages."""
    return "/run/<run-id>/{" + ",".join(provider_names()) + "}/..."


def parse_route(method: str, target: str) -> Route:
    """The route of a request line's target, or ``RouteError`` saying what is served instead."""
    parts = urlsplit(target)
    segments = parts.path.split("/")
    # "/run/<id>/<provider>/v1/..." splits into ["", "run", id, provider, "v1", ...]
    if len(segments) < 4 or segments[0] != "" or segments[1] != "run":
        raise RouteError(
            404,
            f"the gateway serves only {served_paths()}; found {shown(parts.path)}",
        )
    run_id, name = segments[2], segments[3]
    if not is_valid_run_id(run_id):
        raise RouteError(400, f"run id must be {RUN_ID_RULE}; found {shown(run_id)}")
    provider = get_provider(name)
    if provider is None:
        raise RouteError(
            404,
            f"unknown provider {shown(name)} in run {run_id}: the gateway serves "
            f"{', '.join(provider_names())} ({served_paths()})",
            run_id=run_id,
        )
    try:
        path = provider.endpoint(method, "/" + "/".join(segments[4:]))
    except RouteError as exc:
        exc.run_id, exc.provider = run_id, name
        raise
    return Route(run_id=run_id, provider=name, path=path, query=parts.query)


def error_body(provider: str | None, status: int, message: str, *, code: str) -> bytes:
    """An error body in the shape the provider's SDK parses (OpenAI's when none is known)."""
    found = get_provider(provider or "openai") or get_provider("openai")
    assert found is not None
    return found.error_body(status, message, code=code)
