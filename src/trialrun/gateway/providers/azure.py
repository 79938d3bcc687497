"""Azure OpenAI: the OpenAI API under a resource's own endpoint.

The openai SDK's ``AzureOpenAI`` client (``AZURE_OPENAI_ENDPOINT``, ``OPENAI_API_VERSION``,
``AZURE_OPENAI_API_KEY`` sent as the ``api-key`` header) calls deployment URLs::

    /openai/deployments/<deployment>/chat/completions?api-version=2024-10-21
    /openai/deployments/<deployment>/embeddings?api-version=...

and the newer surface ``/openai/v1/...`` (a plain OpenAI client with ``base_url`` ending in
``/openai/v1``). Everything under ``/openai/`` is served, GET, POST and DELETE. ``api-version``
is kept in the cassette but not matched: it selects the protocol, not the question, and an
upgrade of the SDK's default would otherwise turn every recording into a miss. There is no
default upstream: the endpoint is the user's own resource (``--upstream
azure=https://<resource>.openai.azure.com``). Usage has OpenAI's shape; the model asked for is
the body's ``model`` or else the deployment's name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trialrun.gateway.provider import Provider
from trialrun.gateway.usage import Usage, extract_usage

METHODS: tuple[str, ...] = ("GET", "POST", "DELETE")


class Azure(Provider):
    name = "azure"
    default_upstream = None
    served = (
        "POST /openai/deployments/<deployment>/chat/completions (and the deployment's other "
        "endpoints), /openai/v1/...; GET, POST, DELETE any /openai/... path"
    )
    unmatched_query = frozenset({"api-version"})

    def endpoint(self, method: str, path: str) -> str:
        if not path.startswith("/openai/") or path == "/openai/" or "//" in path:
            raise self.not_served(path)
        if method not in METHODS:
            raise self.wrong_method(method, path, ", ".join(METHODS))
        return path

    def requested_model(self, path: str, request: Any) -> str | None:
        asked = super().requested_model(path, request)
        if asked is not None:
            return asked
        segments = path.split("/")
        # ["", "openai", "deployments", <deployment>, ...]
        if len(segments) > 3 and segments[2] == "deployments" and segments[3]:
            return segments[3]
        return None

    def usage(
        self, method: str, path: str, content_type: str, body: str, headers: Mapping[str, str]
    ) -> Usage:
        found = extract_usage("openai", path, content_type, body)
        return found if method == "POST" else Usage(model=found.model)


PROVIDER = Azure()
