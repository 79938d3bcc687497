"""One case's HTTP traffic: forwarded and recorded (record mode) or answered from its cassette.

``CaseTraffic.serve`` is called from the proxy's connection threads, any number at once. In
record mode it forwards the request upstream (``forward``), hands the agent the real answer and
keeps the redacted exchange, in the order the requests arrived. In replay it answers from the
recording or refuses: a 502 whose JSON body names the miss, and the miss is kept for the case's
verdict. A host and port with no recording at all is refused as the network seal refuses it
(``network: sealed: agent tried HOST:PORT``) and is never contacted.
"""

from __future__ import annotations

import http.client
import json
import ssl
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from trialrun.httprec.arrivals import Arrivals
from trialrun.httprec.exchange import (
    HOP_BY_HOP,
    NOT_FORWARDED,
    Exchange,
    Request,
    Response,
    recorded,
)
from trialrun.httprec.matching import Replay, RequestNormalizer

UPSTREAM_TIMEOUT_S = 600.0
"""How long an upstream may stay silent in record mode before the agent gets a 502."""


def sealed_message(address: str) -> str:
    return f"network: sealed: agent tried {address}"


@dataclass(slots=True)
class Miss:
    """A request replay could not answer: the case fails with ``message``."""

    kind: str
    """``network_sealed`` (nothing recorded for its host and port) or ``cassette_mismatch``."""
    message: str


@dataclass(slots=True)
class CaseTraffic:
    """What one case's agent sent through the recorder."""

    mode: str
    """``record`` or ``replay``."""
    cassette: Path
    normalizer: RequestNormalizer
    upstream_tls: ssl.SSLContext | None = None
    replay: Replay | None = None
    tls: bool = True
    """Whether the agent was given the run's authority. Without it (a replay whose recording
    holds no https exchange) every CONNECT is refused before any TLS."""
    exchanges: Arrivals[Exchange] = field(default_factory=Arrivals)
    """Record mode: the redacted exchanges, in the order their requests arrived."""
    served: int = 0
    misses: list[Miss] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def serve(self, request: Request) -> Response:
        if self.mode == "record":
            return self._record(request)
        return self._replay(request)

    def refuse_tunnel(self, host: str, port: int) -> Response | None:
        """The answer to ``CONNECT host:port`` when no tunnel may open, else None."""
        if self.tls:
            return None
        shown = f"[{host}]" if ":" in host else host
        miss = Miss("network_sealed", sealed_message(f"{shown}:{port}"))
        with self._lock:
            self.misses.append(miss)
        return refusal(502, miss.kind, miss.message)

    def _replay(self, request: Request) -> Response:
        assert self.replay is not None
        normalized = self.normalizer.normalized(request.method, request.url, request.body)
        found = self.replay.take(normalized)
        if found is not None:
            with self._lock:
                self.served += 1
            return found.response()
        if not self.replay.knows(request.address):
            miss = Miss("network_sealed", sealed_message(request.address))
        else:
            miss = Miss("cassette_mismatch", self.replay.explain_miss(normalized))
        with self._lock:
            self.misses.append(miss)
        return refusal(502, miss.kind, miss.message)

    def _record(self, request: Request) -> Response:
        slot = self.exchanges.reserve()
        started = time.monotonic()
        try:
            response = forward(request, self.upstream_tls)
        except (OSError, http.client.HTTPException) as exc:
            return refusal(
                502,
                "upstream_error",
                f"the recorder could not reach {request.address}: {exc}",
            )
        self.exchanges.fill(slot, recorded(request, response, (time.monotonic() - started) * 1000))
        with self._lock:
            self.served += 1
        return response

    def recorded_exchanges(self) -> list[Exchange]:
        """Record mode: what is written to the cassette (failed forwards left out)."""
        return self.exchanges.filled()


def forward(request: Request, tls: ssl.SSLContext | None) -> Response:
    """Send ``request`` to its host and read the whole answer (chunked transfer undone)."""
    connection: http.client.HTTPConnection
    if request.scheme == "https":
        context = tls if tls is not None else ssl.create_default_context()
        connection = http.client.HTTPSConnection(
            request.host, request.port, timeout=UPSTREAM_TIMEOUT_S, context=context
        )
    else:
        connection = http.client.HTTPConnection(
            request.host, request.port, timeout=UPSTREAM_TIMEOUT_S
        )
    try:
        connection.putrequest(
            request.method, request.target, skip_host=True, skip_accept_encoding=True
        )
        connection.putheader("Host", request.header("host") or request.authority)
        for name, value in request.headers:
            if name.lower() not in NOT_FORWARDED:
                connection.putheader(name, value)
        # Identity: the recorder stores and redacts text; compressed bytes would be neither.
        connection.putheader("Accept-Encoding", "identity")
        if request.body or request.method.upper() in {"POST", "PUT", "PATCH"}:
            connection.putheader("Content-Length", str(len(request.body)))
        connection.endheaders(request.body or None)
        answer = connection.getresponse()
        body = answer.read()
        headers = [
            (k, v)
            for k, v in answer.getheaders()
            if k.lower() not in HOP_BY_HOP and k.lower() != "content-length"
        ]
        headers.append(("Content-Length", str(len(body))))
        return Response(answer.status, headers, body, answer.reason)
    finally:
        connection.close()


def refusal(status: int, code: str, message: str) -> Response:
    """An answer from trialrun itself: JSON naming what went wrong."""
    body = json.dumps({"error": {"type": code, "message": message, "source": "trialrun"}})
    data = (body + "\n").encode("utf-8")
    headers = [
        ("Content-Type", "application/json"),
        ("Content-Length", str(len(data))),
        ("X-Trialrun-Error", code),
    ]
    return Response(status, headers, data)
