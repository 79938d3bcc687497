"""Gemini (the Gemini Developer API, ``generativelanguage.googleapis.com``).

The google-genai SDK (``GOOGLE_GEMINI_BASE_URL`` or ``http_options={"base_url": ...}``, key in
the ``x-goog-api-key`` header) calls::

    POST /v1beta/models/<model>:generateContent
    POST /v1beta/models/<model>:streamGenerateContent?alt=sse     (server-sent events)
    POST /v1beta/models/<model>:countTokens, :embedContent, ...
    GET  /v1beta/models, /v1beta/files, ...

Every path under a version segment (``/v1beta/``, ``/v1/``, ``/v1alpha/``) or ``/upload/`` is
served, GET, POST, PATCH and DELETE. A key passed the old way, as ``?key=...``, is neither
stored nor matched. The model is in the path; a stream is a ``:streamGenerateContent`` call
(with ``alt=sse`` an event stream, without it one JSON array). Usage is ``usageMetadata``:
``promptTokenCount`` (with any ``toolUsePromptTokenCount``) in, ``candidatesTokenCount`` plus
``thoughtsTokenCount`` out (thinking is billed as output), ``cachedContentTokenCount`` cached;
a stream repeats it with running totals, the last one counts. Errors have Google's shape
(``{"error": {"code", "message", "status"}}``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from trialrun.base.reported import as_count
from trialrun.gateway.provider import Provider
from trialrun.gateway.usage import Usage, iter_sse_data, json_or_none

METHODS: tuple[str, ...] = ("GET", "POST", "PATCH", "DELETE")
_VERSIONED = re.compile(r"/(?:v1|v1beta|v1alpha|v1beta\d*|upload)/[^/]")
_MODEL = re.compile(r"/(?:models|tunedModels)/([^/:]+)")
_STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    405: "UNIMPLEMENTED",
    409: "ABORTED",
    413: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
}


class Gemini(Provider):
    name = "gemini"
    default_upstream = "https://generativelanguage.googleapis.com"
    served = (
        "POST /v1beta/models/<model>:generateContent, :streamGenerateContent?alt=sse, "
        ":countTokens, :embedContent; GET, POST, PATCH, DELETE any /v1beta/..., /v1/..., "
        "/upload/... path"
    )
    dropped_query = frozenset({"key"})

    def endpoint(self, method: str, path: str) -> str:
        if not _VERSIONED.match(path) or "//" in path:
            raise self.not_served(path)
        if method not in METHODS:
            raise self.wrong_method(method, path, ", ".join(METHODS))
        return path

    def requested_model(self, path: str, request: Any) -> str | None:
        found = _MODEL.search(path)
        return found.group(1) if found else None

    def is_stream(self, path: str, query: str, request: Any) -> bool:
        return path.endswith(":streamGenerateContent")

    def usage(
        self, method: str, path: str, content_type: str, body: str, headers: Mapping[str, str]
    ) -> Usage:
        if content_type.split(";")[0].strip().lower() == "text/event-stream":
            pieces: list[Any] = [json_or_none(data) for _, data in iter_sse_data(body)]
        else:
            data = json_or_none(body)
            pieces = data if isinstance(data, list) else [data]
        metadata: dict[str, Any] | None = None
        model: str | None = None
        for piece in pieces:
            if not isinstance(piece, dict):
                continue
            version = piece.get("modelVersion")
            model = version if isinstance(version, str) else model
            found = piece.get("usageMetadata")
            if isinstance(found, dict):
                metadata = found
        if metadata is None or method != "POST":
            return Usage(model=model)
        prompt = as_count(metadata.get("promptTokenCount"))
        tools = as_count(metadata.get("toolUsePromptTokenCount")) or 0
        candidates = as_count(metadata.get("candidatesTokenCount"))
        thoughts = as_count(metadata.get("thoughtsTokenCount")) or 0
        return Usage(
            model=model,
            tokens_in=prompt + tools if prompt is not None else None,
            # An answer cut off before any text reports no candidates: zero, not unknown.
            tokens_out=(candidates or 0) + thoughts if prompt is not None else None,
            tokens_cached=as_count(metadata.get("cachedContentTokenCount")),
        )

    def error_body(self, status: int, message: str, *, code: str) -> bytes:
        state = _STATUS_NAMES.get(status, "INTERNAL" if status >= 500 else "FAILED_PRECONDITION")
        body = {"error": {"code": status, "message": message, "status": state}}
        return json.dumps(body).encode("ascii")


PROVIDER = Gemini()
