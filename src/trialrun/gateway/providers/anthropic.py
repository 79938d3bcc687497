"""Anthropic (``api.anthropic.com``): messages and count_tokens, and every other ``/v1/...``
endpoint (models, message batches, files), method-aware like OpenAI's (``providers.openai``).

Errors have Anthropic's shape (``{"type": "error", "error": {"type", "message"}}``), which the
anthropic SDK turns into its own exception classes.
"""

from __future__ import annotations

import json

from trialrun.gateway.providers.openai import ApiFamily

GENERATION_PATHS: tuple[str, ...] = ("/v1/messages", "/v1/messages/count_tokens")
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    413: "request_too_large",
}


class Anthropic(ApiFamily):
    name = "anthropic"
    default_upstream = "https://api.anthropic.com"
    generation_paths = GENERATION_PATHS
    usage_shape = "anthropic"
    served = f"POST {', '.join(GENERATION_PATHS)}; GET, POST, DELETE any other /v1/... path"

    def error_body(self, status: int, message: str, *, code: str) -> bytes:
        kind = _ERROR_TYPES.get(status, "invalid_request_error" if status < 500 else "api_error")
        body = {"type": "error", "error": {"type": kind, "message": message}}
        return json.dumps(body).encode("ascii")


PROVIDER = Anthropic()
