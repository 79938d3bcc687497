"""AWS Signature Version 4, to sign a Bedrock request again for the real endpoint.

An SDK pointed at the gateway signs for the gateway's host and path
(``127.0.0.1:PORT/run/<id>/bedrock/model/...``); AWS checks the signature against the host and
path it receives, so the agent's signature can never be forwarded as it is. In record and live
mode the gateway signs the forwarded request again with the credentials of its own environment
(``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``).

The algorithm (AWS's "Create a signed AWS API request"): a canonical request (method, the path
with each segment URI-encoded once more, the query sorted and encoded, the signed headers
lower-cased and sorted, the body's SHA-256), a string to sign over its hash, a key derived by
HMAC-SHA256 from the secret through the date, region, service and ``aws4_request``, and the
signature, the hex HMAC of the string to sign under that key.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import parse_qsl, quote

ALGORITHM = "AWS4-HMAC-SHA256"


@dataclass(frozen=True)
class Credentials:
    access_key: str
    secret_key: str
    session_token: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Credentials | None:
        access, secret = env.get("AWS_ACCESS_KEY_ID"), env.get("AWS_SECRET_ACCESS_KEY")
        if not access or not secret:
            return None
        return cls(access, secret, env.get("AWS_SESSION_TOKEN") or None)


def sign(
    credentials: Credentials,
    *,
    method: str,
    host: str,
    path: str,
    query: str,
    headers: Mapping[str, str],
    body: bytes,
    region: str,
    service: str,
    amz_date: str,
    content_sha256_header: bool = True,
) -> dict[str, str]:
    """The headers to send: ``headers`` plus ``Host``, ``X-Amz-Date``, the payload hash,
    the session token and ``Authorization``. ``path`` is the path as sent (already encoded);
    every header in ``headers`` is signed. ``amz_date``: ``YYYYMMDDTHHMMSSZ``."""
    payload = hashlib.sha256(body).hexdigest()
    out = dict(headers)
    out["Host"] = host
    out["X-Amz-Date"] = amz_date
    if content_sha256_header:
        out["X-Amz-Content-Sha256"] = payload
    if credentials.session_token:
        out["X-Amz-Security-Token"] = credentials.session_token
    canonical_headers = sorted((k.lower(), " ".join(v.split())) for k, v in out.items())
    signed_headers = ";".join(name for name, _ in canonical_headers)
    canonical = "\n".join(
        [
            method,
            quote(path or "/", safe="/~"),
            _canonical_query(query),
            "".join(f"{name}:{value}\n" for name, value in canonical_headers),
            signed_headers,
            payload,
        ]
    )
    scope = f"{amz_date[:8]}/{region}/{service}/aws4_request"
    to_sign = "\n".join(
        [ALGORITHM, amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()]
    )
    key = _hmac(("AWS4" + credentials.secret_key).encode(), amz_date[:8])
    for part in (region, service, "aws4_request"):
        key = _hmac(key, part)
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    out["Authorization"] = (
        f"{ALGORITHM} Credential={credentials.access_key}/{scope}, "
        f"SignedHeaders={signed_headers}, Signature={signature}"
    )
    return out


def region_of(host: str) -> str | None:
    """``us-west-2`` of ``bedrock-runtime.us-west-2.amazonaws.com``; None for other hosts."""
    labels = host.lower().split(".")
    if len(labels) >= 4 and labels[-2:] == ["amazonaws", "com"]:
        return labels[1]
    return None


def _canonical_query(query: str) -> str:
    pairs = parse_qsl(query, keep_blank_values=True)
    return "&".join(f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}" for k, v in sorted(pairs))


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()
