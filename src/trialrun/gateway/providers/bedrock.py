"""Amazon Bedrock runtime (``bedrock-runtime.<region>.amazonaws.com``).

boto3's ``bedrock-runtime`` client (``endpoint_url=`` or ``AWS_ENDPOINT_URL_BEDROCK_RUNTIME``)
calls, POST only::

    /model/<model-id>/converse             /model/<model-id>/converse-stream
    /model/<model-id>/invoke               /model/<model-id>/invoke-with-response-stream

Requests are SigV4-signed: ``Authorization`` holds a signature over the date
(``X-Amz-Date``), the host and the body, and temporary credentials add
``X-Amz-Security-Token``. None of these is matched (the gateway never matches on headers), so
a request signed again a second later, or with other credentials, finds its recording: the
match is the method, the path and the body. A model id arrives percent-encoded
(``anthropic.claude-3-5-sonnet-20240620-v1%3A0``); the path is stored and matched decoded. A
pre-signed URL's ``X-Amz-*`` query parameters are neither stored nor matched.

Usage: Converse's ``usage`` (``inputTokens`` plus the cache reads and writes in, ``outputTokens``
out); InvokeModel's ``X-Amzn-Bedrock-Input-Token-Count`` / ``-Output-Token-Count`` response
headers (kept in the cassette), else the body's own usage (Anthropic's shape for Claude).
The two streams are AWS event streams (binary frames, ``application/vnd.amazon.eventstream``):
Converse's ``metadata`` event holds the usage, an InvokeModel stream's last chunk
``amazon-bedrock-invocationMetrics``. Errors are ``{"message": ...}``.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import struct
import time
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import quote, unquote

from trialrun.base.reported import as_count
from trialrun.gateway.provider import COMMON_RECORDED_HEADERS, Provider, RouteError
from trialrun.gateway.sigv4 import Credentials, region_of, sign
from trialrun.gateway.usage import Usage, extract_usage, json_or_none
from trialrun.httprec.upstream import Upstream

OPERATIONS: tuple[str, ...] = (
    "converse",
    "converse-stream",
    "invoke",
    "invoke-with-response-stream",
)
INPUT_COUNT = "x-amzn-bedrock-input-token-count"
OUTPUT_COUNT = "x-amzn-bedrock-output-token-count"
_SIGNATURE_QUERY = frozenset(
    {
        "x-amz-algorithm",
        "x-amz-credential",
        "x-amz-date",
        "x-amz-expires",
        "x-amz-security-token",
        "x-amz-signature",
        "x-amz-signedheaders",
    }
)
_EVENTSTREAM = "application/vnd.amazon.eventstream"
# What the agent's SDK signed for the gateway's address; replaced when signing again.
_SIGNING_HEADERS = frozenset(
    {"authorization", "x-amz-date", "x-amz-security-token", "x-amz-content-sha256"}
)
SIGNING_NAME = "bedrock"


class Bedrock(Provider):
    name = "bedrock"
    default_upstream = "https://bedrock-runtime.us-east-1.amazonaws.com"
    served = "POST /model/<model-id>/" + "{" + ",".join(OPERATIONS) + "}"
    recorded_headers = COMMON_RECORDED_HEADERS | {
        "x-amzn-requestid",
        "x-amzn-errortype",
        INPUT_COUNT,
        OUTPUT_COUNT,
    }
    dropped_query = _SIGNATURE_QUERY

    def endpoint(self, method: str, path: str) -> str:
        segments = path.split("/")
        # ["", "model", <model-id>, <operation>]
        if (
            len(segments) != 4
            or segments[1] != "model"
            or not segments[2]
            or segments[3] not in OPERATIONS
        ):
            raise self.not_served(path)
        if method != "POST":
            raise self.wrong_method(method, path, "POST")
        return f"/model/{unquote(segments[2])}/{segments[3]}"

    def upstream_path(self, path: str) -> str:
        """The stored (decoded) path as sent to AWS: the model id percent-encoded again."""
        segments = path.split("/")
        if len(segments) == 4 and segments[1] == "model":
            segments[2] = quote(segments[2], safe="")
        return "/".join(segments)

    def requested_model(self, path: str, request: Any) -> str | None:
        segments = path.split("/")
        return segments[2] if len(segments) == 4 and segments[1] == "model" else None

    def upstream_headers(
        self,
        headers: dict[str, str],
        *,
        upstream: Upstream,
        method: str,
        path: str,
        query: str,
        body: bytes,
    ) -> dict[str, str]:
        """Signed again with the gateway's own AWS credentials when its environment has them;
        forwarded as they are to a stand-in that is not AWS; refused (502) for AWS itself."""
        credentials = Credentials.from_env(os.environ)
        region = region_of(upstream.host)
        if credentials is None:
            if region is None:
                return headers
            raise RouteError(
                502,
                "bedrock requests are signed for the gateway's address, which AWS refuses: give "
                "the gateway AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN) "
                "in its environment so it signs them again for "
                f"{upstream.host}",
                provider=self.name,
            )
        kept = {k: v for k, v in headers.items() if k.lower() not in _SIGNING_HEADERS}
        signed_part = {k: v for k, v in kept.items() if k.lower() == "content-type"}
        signed = sign(
            credentials,
            method=method,
            host=kept.pop("Host", upstream.host),
            path=path,
            query=query,
            headers=signed_part,
            body=body,
            region=region
            or os.environ.get("AWS_REGION")
            or os.environ.get("AWS_DEFAULT_REGION", "us-east-1"),
            service=SIGNING_NAME,
            amz_date=time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()),
        )
        return {**kept, **signed}

    def is_stream(self, path: str, query: str, request: Any) -> bool:
        return path.endswith("-stream")

    def usage(
        self, method: str, path: str, content_type: str, body: str, headers: Mapping[str, str]
    ) -> Usage:
        model = self.requested_model(path, None)
        counted_in, counted_out = (
            as_count(headers.get(INPUT_COUNT)),
            as_count(headers.get(OUTPUT_COUNT)),
        )
        if counted_in is not None or counted_out is not None:
            return Usage(model, counted_in, counted_out)
        if content_type.split(";")[0].strip().lower() == _EVENTSTREAM:
            return _stream_usage(model, body.encode("utf-8", "surrogateescape"))
        data = json_or_none(body)
        if isinstance(data, dict) and isinstance(data.get("usage"), dict):
            raw = data["usage"]
            if "inputTokens" in raw or "outputTokens" in raw:
                return _converse_usage(model, raw)
        found = extract_usage("anthropic", path, content_type, body)
        return Usage(found.model or model, found.tokens_in, found.tokens_out, found.tokens_cached)

    def error_body(self, status: int, message: str, *, code: str) -> bytes:
        return json.dumps({"message": message}).encode("ascii")

    def error_message(self, body: Any) -> str | None:
        found = body.get("message") if isinstance(body, dict) else None
        return found if isinstance(found, str) else super().error_message(body)


def _converse_usage(model: str | None, raw: Mapping[str, Any]) -> Usage:
    tokens_in = as_count(raw.get("inputTokens"))
    reads = as_count(raw.get("cacheReadInputTokens"))
    writes = as_count(raw.get("cacheWriteInputTokens"))
    if tokens_in is not None:
        tokens_in += (reads or 0) + (writes or 0)
    return Usage(model, tokens_in, as_count(raw.get("outputTokens")), reads)


def _stream_usage(model: str | None, data: bytes) -> Usage:
    usage = Usage(model)
    for payload in event_payloads(data):
        event = json_or_none(payload.decode("utf-8", "replace"))
        if not isinstance(event, dict):
            continue
        if isinstance(event.get("usage"), dict):  # converse-stream's metadata event
            usage = _converse_usage(model, event["usage"])
        chunk = event.get("bytes")
        if isinstance(chunk, str):  # invoke-with-response-stream: the model's own chunk
            try:
                inner = json_or_none(
                    base64.b64decode(chunk, validate=True).decode("utf-8", "replace")
                )
            except (binascii.Error, ValueError):
                continue
            metrics = (
                inner.get("amazon-bedrock-invocationMetrics") if isinstance(inner, dict) else None
            )
            if isinstance(metrics, dict):
                usage = Usage(
                    model,
                    as_count(metrics.get("inputTokenCount")),
                    as_count(metrics.get("outputTokenCount")),
                )
    return usage


def event_payloads(data: bytes) -> Iterator[bytes]:
    """The payloads of an AWS event stream's frames, until the first frame that does not fit.

    A frame is: total length and headers length (two big-endian uint32), the prelude's CRC,
    the headers, the payload and the frame's CRC. The CRCs are not checked: the recorder reads
    what the provider sent, it does not judge it.
    """
    offset = 0
    while offset + 12 <= len(data):
        total, headers_length = struct.unpack_from(">II", data, offset)
        start = offset + 12 + headers_length
        end = offset + total - 4
        if total < 16 or start > end or offset + total > len(data):
            return
        yield data[start:end]
        offset += total


PROVIDER = Bedrock()
