"""One case's HTTP traffic: forwarded and recorded (record mode) or answered from its cassette.

``CaseTraffic.serve`` is called from the proxy's connection threads, any number at once. In
record mode it forwards the request upstream (``upstream.open_upstream``), passes the real
answer on to the agent as it arrives (``relay``: a stream of server-sent events event by event)
and keeps the redacted exchange, in the order the requests arrived (in update mode a request that
matches an unused old recording is answered from it instead, which keeps its place). In replay
it answers from the recording or refuses: a 502 whose JSON body names the miss, and the miss is
kept for the case's verdict. A host and port with no recording at all is refused as the network
seal refuses it (``network: sealed: agent tried HOST:PORT``) and is never contacted.
"""

from __future__ import annotations

import http.client
import json
import ssl
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Generic, TypeVar

from trialrun.httprec.arrivals import Arrivals
from trialrun.httprec.exchange import Exchange, Request, Response, recorded
from trialrun.httprec.matching import Replay, RequestNormalizer
from trialrun.httprec.relay import relay, send
from trialrun.httprec.upstream import open_upstream

if TYPE_CHECKING:
    # Annotations only: the server under it (http.server) loads when a client connects.
    from trialrun.base.localserver import LocalHandler

CLOSE_TIMEOUT_S = 30.0
"""How long a case's end waits for its requests still being answered."""
R = TypeVar("R")


def sealed_message(address: str) -> str:
    return f"network: sealed: agent tried {address}"


@dataclass(slots=True)
class Miss:
    """A request replay could not answer: the case fails with ``message``."""

    kind: str
    """``network_sealed`` (nothing recorded for its host and port) or ``cassette_mismatch``."""
    message: str


@dataclass(slots=True, eq=False)
class Traffic(Generic[R]):
    """One case's side of a recorder, whatever it records: its mode, its recording's path,
    what it recorded in arrival order, and the requests it is serving. The HTTP recorder's
    ``CaseTraffic`` records exchanges; the model gateway's run (``gateway.runs.RunState``)
    records model recordings. Thread-safe."""

    mode: str
    """``record``, ``replay`` (or, for the gateway, ``live``)."""
    cassette: Path
    arrivals: Arrivals[R] = field(default_factory=Arrivals, kw_only=True)
    """Record mode: what was recorded, in the order the requests arrived."""
    served: int = field(default=0, kw_only=True)
    lock: threading.Lock = field(default_factory=threading.Lock, kw_only=True)
    _inflight: int = field(default=0, kw_only=True)
    _idle: threading.Condition = field(init=False)

    def __post_init__(self) -> None:
        self._idle = threading.Condition(self.lock)

    def begin(self) -> None:
        """A request starts being served (``wait_idle`` waits for it)."""
        with self.lock:
            self._inflight += 1

    def end(self) -> None:
        with self.lock:
            self._inflight -= 1
            if not self._inflight:
                self._idle.notify_all()

    def wait_idle(self, timeout: float = CLOSE_TIMEOUT_S) -> bool:
        """Wait until no request is being served (an answer passed on reaches the agent before
        its recording is kept); False when some still were after ``timeout`` seconds."""
        with self.lock:
            return self._idle.wait_for(lambda: not self._inflight, timeout)

    def recordings(self) -> list[R]:
        """Record mode: what is written to the cassette, in arrival order (a request that got
        no whole answer leaves none), once the requests being served have ended."""
        self.wait_idle()
        return self.arrivals.filled()


@dataclass(slots=True, eq=False)
class CaseTraffic(Traffic[Exchange]):
    """What one case's agent sent through the recorder as a proxy."""

    normalizer: RequestNormalizer
    upstream_tls: ssl.SSLContext | None = None
    replay: Replay | None = None
    """Replay: the recordings that answer. Record mode as ``--mode update``: the old ones, which
    answer the requests they match (the others are recorded)."""
    old_lines: list[str] = field(default_factory=list)
    """Update mode: the old file's lines, which the exchanges answered from are written as."""
    tls: bool = True
    """Whether the agent was given the run's authority. Without it (a replay whose recording
    holds no https exchange) every CONNECT is refused before any TLS."""
    misses: list[Miss] = field(default_factory=list)

    def serve(self, request: Request, handler: LocalHandler) -> None:
        """Answer ``request`` on ``handler``'s connection."""
        self.begin()
        try:
            if self.mode == "record":
                kept = None if self.replay is None else self._take_kept(request)
                if kept is None:
                    self._record(request, handler)
                else:
                    send(handler, kept.response(), head=request.method == "HEAD")
            else:
                send(handler, self._replay(request), head=request.method == "HEAD")
        finally:
            self.end()

    def refuse_tunnel(self, host: str, port: int) -> Response | None:
        """The answer to ``CONNECT host:port`` when no tunnel may open, else None."""
        if self.tls:
            return None
        shown = f"[{host}]" if ":" in host else host
        miss = Miss("network_sealed", sealed_message(f"{shown}:{port}"))
        with self.lock:
            self.misses.append(miss)
        return refusal(502, miss.kind, miss.message)

    def _replay(self, request: Request) -> Response:
        assert self.replay is not None
        normalized = self.normalizer.normalized(request.method, request.url, request.body)
        found = self.replay.take(normalized)
        if found is not None:
            with self.lock:
                self.served += 1
            return found.response()
        if not self.replay.knows(request.address):
            miss = Miss("network_sealed", sealed_message(request.address))
        else:
            miss = Miss("cassette_mismatch", self.replay.explain_miss(normalized))
        with self.lock:
            self.misses.append(miss)
        return refusal(502, miss.kind, miss.message)

    def _take_kept(self, request: Request) -> Exchange | None:
        """Update mode (record mode with the old recordings as ``replay``): the unused old
        recording of this request (the match replay makes), which takes the request's place
        in the new cassette as it was; None: the request is forwarded and recorded."""
        assert self.replay is not None
        normalized = self.normalizer.normalized(request.method, request.url, request.body)
        found = self.replay.take(normalized)
        if found is not None:
            self.arrivals.fill(self.arrivals.reserve(), found)
            with self.lock:
                self.served += 1
        return found

    def _record(self, request: Request, handler: LocalHandler) -> None:
        slot = self.arrivals.reserve()
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
        self.arrivals.fill(slot, recorded(request, response, (time.monotonic() - started) * 1000))
        with self.lock:
            self.served += 1

    def recorded_exchanges(self) -> list[Exchange]:
        """Record mode: what is written to the cassette (failed forwards left out)."""
        return self.recordings()


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
