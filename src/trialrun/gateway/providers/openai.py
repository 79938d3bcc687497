"""OpenAI (``api.openai.com``): chat completions, Responses and embeddings, and every other
``/v1/...`` endpoint (moderations, models, files, batches, ...), method-aware.

The three generation endpoints take POST only and keep the key they always had (path and body:
cassettes recorded before the other endpoints were served still match). Any other ``/v1/...``
path is served for GET, POST and DELETE, its key holding the method and the query as well, so
``GET /v1/files?purpose=batch`` and ``DELETE /v1/files/file-1`` are recordings of their own.
Usage is read from POST answers; a GET or DELETE reports at most a model, never tokens (reading
back a stored response is not a second generation).
"""

from __future__ import annotations

from collections.abc import Mapping

from trialrun.gateway.provider import Provider
from trialrun.gateway.usage import Usage, extract_usage

GENERATION_PATHS: tuple[str, ...] = ("/v1/chat/completions", "/v1/responses", "/v1/embeddings")
OTHER_METHODS: tuple[str, ...] = ("GET", "POST", "DELETE")


class ApiFamily(Provider):
    """OpenAI's and Anthropic's shared rules: POST-only generation paths, any other ``/v1/``."""

    generation_paths: tuple[str, ...] = ()
    usage_shape = "openai"

    def endpoint(self, method: str, path: str) -> str:
        if path in self.generation_paths:
            if method != "POST":
                raise self.wrong_method(method, path, "POST")
            return path
        if not path.startswith("/v1/") or path == "/v1/" or "//" in path:
            raise self.not_served(path)
        if method not in OTHER_METHODS:
            raise self.wrong_method(method, path, ", ".join(OTHER_METHODS))
        return path

    def endpoint_key(self, method: str, path: str, query: str) -> str:
        if method == "POST" and path in self.generation_paths:
            return path  # the query (Claude Code's beta=true) never changed the answer
        return super().endpoint_key(method, path, query)

    def usage(
        self, method: str, path: str, content_type: str, body: str, headers: Mapping[str, str]
    ) -> Usage:
        found = extract_usage(self.usage_shape, path, content_type, body)
        return found if method == "POST" else Usage(model=found.model)


class OpenAI(ApiFamily):
    name = "openai"
    default_upstream = "https://api.openai.com"
    generation_paths = GENERATION_PATHS
    served = f"POST {', '.join(GENERATION_PATHS)}; GET, POST, DELETE any other /v1/... path"


PROVIDER = OpenAI()
