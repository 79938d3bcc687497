"""One case's HTTP traffic: forwarded and recorded (record mode) or answered from its cassette.

``CaseTraffic.serve`` is called from the proxy's connection threads, any number at once. In
record mode it forwards the request upstream (``upstream.open_upstream``), passes the real
answer on to the agent as it arrives (``relay``: a stream of server-sent events event by event)
and keeps the redacted exchange, in the order the requests arrived. In replay it answers from the
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

from trialrun.base.localserver import LocalHandler
from trialrun.httprec.arrivals import Arrivals
from trialrun.httprec.exchange import Exchange, Request, Response, recorded
from trialrun.httprec.matching import Replay, RequestNormalizer
from trialrun.httprec.relay import relay, send
from trialrun.httprec.upstream import open_upstream

CLOSE_TIMEOUT_S = 30.0
"""How long a case's end waits for its requests still being answered."""


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
    _inflight: int = 0
    _idle: threading.Condition = field(init=False)

    def __post_init__(self) -> None:
        self._idle = threading.Condition(self._lock)

    def serve(self, request: Request, handler: LocalHandler) -> None:
        """Answer ``request`` on ``handler``'s connection."""
        with self._lock:
            self._inflight += 1
        try:
            if self.mode == "record":
                self._record(request, handler)
            else:
                send(handler, self._replay(request), head=request.method == "HEAD")
        finally:
            with self._lock:
                self._inflight -= 1
                if not self._inflight:
                    self._idle.notify_all()

    def wait_idle(self, timeout: float = CLOSE_TIMEOUT_S) -> bool:
        """Wait until no request is being served (an answer passed on reaches the agent before
        its exchange is kept); False when some still were after ``timeout`` seconds."""
        with self._lock:
            return self._idle.wait_for(lambda: not self._inflight, timeout)

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

    def _record(self, request: Request, handler: LocalHandler) -> None:
        slot = self.exchanges.reserve()
        started = time.monotonic()
        try:
            connection, answer = open_upstream(request, self.upstream_tls)
        except (OSError, http.client.HTTPException) as exc:
            message = f"the recorder could not reach {request.address}: {exc}"
            send(handler, refusal(502, "upstream_error", message))
            return
        try:
            body, complete = relay(handler, answer, head=request.method == "HEAD")
        finally:
            connection.close()
        if not complete:
            # The agent saw a broken answer too; a replay must not serve it as a whole one.
            return
        response = Response(answer.status, answer.getheaders(), body, answer.reason)
        self.exchanges.fill(slot, recorded(request, response, (time.monotonic() - started) * 1000))
        with self._lock:
            self.served += 1

    def recorded_exchanges(self) -> list[Exchange]:
        """Record mode: what is written to the cassette (failed forwards left out), once the
        requests being served have ended."""
        self.wait_idle()
        return self.exchanges.filled()


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
