"""The HTTP server under trialrun's local services (model gateway, MCP proxy over HTTP).

The standard library's ``ThreadingHTTPServer`` as it comes listens with a backlog of 5 (500
clients connecting at once left a third of them waiting for the kernel's SYN retries, up to
30 s), never times a connection out, and starts a thread for every connection it accepts, so
idle sockets pile up threads without limit. ``LocalServer`` keeps its thread-per-connection
model (the services' handlers block on upstreams and stream answers as they arrive) and bounds
it:

* the listen backlog is ``LISTEN_BACKLOG`` (the kernel caps it at ``net.core.somaxconn``);
* a connection waiting for its next request, or still sending a request's head, is idle; after
  ``IDLE_TIMEOUT_S`` without a byte from the client the server closes it;
* at most ``MAX_CONNECTIONS`` connections are open at once. A new one at the limit takes the
  place of the connection idle the longest (closing a keep-alive connection between requests
  is ordinary HTTP: clients open another); when every connection is busy with a request, new
  ones wait in the kernel's backlog until one ends.

The choice against an asyncio or h11 server, with the numbers, is in docs/internals.md.
A host with ``:`` is served over IPv6 (``::1``); ``exposure_warning`` words the warning for an
address other machines can reach.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from email.message import Message
from http.server import ThreadingHTTPServer
from typing import Any

from trialrun.base.hangups import AnswerTrackingHandler, QuietServerMixin

LISTEN_BACKLOG = 1024
MAX_CONNECTIONS = 128
IDLE_TIMEOUT_S = 120.0
_HEX_DIGITS = b"0123456789abcdefABCDEF"


class LocalServer(QuietServerMixin, ThreadingHTTPServer):
    """A threaded HTTP server with a real backlog, an idle timeout and a bound on connections.

    Its handler class must derive from ``LocalHandler``, which tells the server when a
    connection is idle.
    """

    daemon_threads = True  # an idle keep-alive connection must not hold up shutdown
    request_queue_size = LISTEN_BACKLOG

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[LocalHandler],
        *,
        max_connections: int | None = None,
        idle_timeout: float | None = None,
        listening: socket.socket | None = None,
    ) -> None:
        """``max_connections`` and ``idle_timeout`` default to the module's constants, read
        when the server is made. ``listening``: a socket already bound and listening (its
        address is the server's), taken over instead of binding ``address``."""
        max_connections = MAX_CONNECTIONS if max_connections is None else max_connections
        idle_timeout = IDLE_TIMEOUT_S if idle_timeout is None else idle_timeout
        if max_connections < 1:
            raise ValueError(f"max_connections must be at least 1; found {max_connections}")
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.max_connections = max_connections
        self.idle_timeout = idle_timeout
        self._slots = threading.Condition()
        # socket -> when it became idle (monotonic), or None while it is busy with a request
        self._open: dict[socket.socket, float | None] = {}
        self._reclaimed: set[socket.socket] = set()
        self._stopping = False
        if listening is None:
            super().__init__(address, handler)
            return
        super().__init__(address, handler, bind_and_activate=False)
        self.socket.close()
        self.socket = listening
        self.server_address = listening.getsockname()
        self.server_name, self.server_port = str(self.server_address[0]), self.server_address[1]

    # ---- admission (the accepting thread) ----------------------------------------------

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._slots:
            while len(self._open) >= self.max_connections and not self._stopping:
                if not self._reclaim_oldest_idle():
                    self._slots.wait(0.5)  # every connection is busy: one ends soon
            if self._stopping:
                admitted = False
            else:
                self._open[request] = time.monotonic()
                admitted = True
        if not admitted:
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def _reclaim_oldest_idle(self) -> bool:
        """Close the connection idle the longest; wait for its thread to release it."""
        idle = [(since, conn) for conn, since in self._open.items() if since is not None]
        if not idle:
            return False
        _since, victim = min(idle, key=lambda pair: pair[0])
        self._open[victim] = None  # never chosen twice
        self._reclaimed.add(victim)
        with contextlib.suppress(OSError):
            victim.shutdown(socket.SHUT_RDWR)  # its handler reads end-of-file and returns
        self._slots.wait(0.5)
        return True

    def shutdown_request(self, request: Any) -> None:
        with self._slots:
            self._open.pop(request, None)
            self._reclaimed.discard(request)
            self._slots.notify_all()
        super().shutdown_request(request)

    # ---- what handlers report ----------------------------------------------------------

    def connection_idle(self, connection: socket.socket) -> None:
        with self._slots:
            if connection in self._open and connection not in self._reclaimed:
                self._open[connection] = time.monotonic()

    def connection_busy(self, connection: socket.socket) -> None:
        with self._slots:
            if connection in self._open:
                self._open[connection] = None

    # ---- stopping ----------------------------------------------------------------------

    def shutdown(self) -> None:
        with self._slots:
            self._stopping = True
            self._slots.notify_all()
        super().shutdown()

    def drop_connections(self) -> None:
        """End every open connection (after ``shutdown``): their threads see end-of-file."""
        with self._slots:
            connections = list(self._open)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

    @property
    def url(self) -> str:
        """``http://HOST:PORT``, an IPv6 host in brackets."""
        host, port = self.server_address[:2]
        text = host.decode() if isinstance(host, bytes) else str(host)
        shown = f"[{text}]" if ":" in text else text
        return f"http://{shown}:{port}"


class LocalHandler(AnswerTrackingHandler):
    """Tells its ``LocalServer`` when the connection waits for the client (idle) and when it
    serves a request (busy), and times out an idle client."""

    protocol_version = "HTTP/1.1"  # keep-alive, as the SDKs expect
    server: LocalServer

    def setup(self) -> None:
        super().setup()
        # Every read and write then gives up after this long without progress; the standard
        # handler answers a timed-out read by closing the connection, quietly.
        self.connection.settimeout(self.server.idle_timeout)

    def handle_one_request(self) -> None:
        # Idle until the request's head is in: a client trickling its headers is as good as
        # idle, and may be closed to make room.
        self.server.connection_idle(self.connection)
        super().handle_one_request()

    def parse_request(self) -> bool:
        accepted = super().parse_request()
        if accepted:
            self.server.connection_busy(self.connection)
        return accepted


class BadLength(ValueError):
    """A request's ``Content-Length`` the server will not read: 400 when malformed, 413 when
    over the limit."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def declared_length(headers: Message, limit: int, *, service: str) -> int | None:
    """The request's ``Content-Length`` (None without one), checked before a byte is read.

    Only decimal digits are a length (``int()`` would take ``+5``, `` 5`` and ``5_0``), and
    two headers must agree: a proxy in front could read the body differently.
    """
    values = headers.get_all("Content-Length") or []
    if not values:
        return None
    distinct = {value.strip(" \t") for value in values}
    if len(distinct) > 1:
        raise BadLength(400, "the request has Content-Length headers that disagree")
    text = distinct.pop()
    if not (text.isascii() and text.isdigit()):
        raise BadLength(
            400, f"Content-Length must be a number of bytes (digits only); found {text[:40]!r}"
        )
    length = int(text[-40:]) if len(text.lstrip("0")) <= 40 else limit + 1
    if length > limit:
        raise BadLength(
            413, f"request body of {text[:40]} bytes is over the {service}'s limit of {limit} bytes"
        )
    return length


def read_body(handler: LocalHandler, limit: int, *, service: str) -> bytes:
    """A request's body, ``Content-Length`` or chunked (chunked wins, as RFC 9112 says);
    ``BadLength`` 400 for a malformed or short body, 413 over ``limit``."""
    if "chunked" in (handler.headers.get("Transfer-Encoding") or "").lower():
        return _read_chunked(handler, limit, service)
    length = declared_length(handler.headers, limit, service=service)
    if length is None:
        return b""
    body = handler.rfile.read(length)
    if len(body) != length:
        raise BadLength(400, "the request body ended before its Content-Length")
    return body


def _read_chunked(handler: LocalHandler, limit: int, service: str) -> bytes:
    parts: list[bytes] = []
    total = 0
    while True:
        size_line = handler.rfile.readline(1024).split(b";")[0].strip()
        # Hex digits only: int(..., 16) also takes "-5", and read(-5) reads to the end.
        if not size_line or len(size_line) > 16 or size_line.strip(_HEX_DIGITS):
            raise BadLength(400, "malformed chunked request body")
        size = int(size_line, 16)
        if size == 0:
            while handler.rfile.readline(1024).strip():  # trailer fields, ignored
                pass
            return b"".join(parts)
        total += size
        if total > limit:
            raise BadLength(
                413, f"request body of {total} bytes is over the {service}'s limit of {limit} bytes"
            )
        part = handler.rfile.read(size)
        if len(part) != size:
            raise BadLength(400, "the chunked request body ended early")
        parts.append(part)
        handler.rfile.readline(1024)  # the CRLF after the chunk


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only (``127.0.0.0/8``, ``::1``,
    ``localhost``)."""
    import ipaddress  # only a command serving on a socket asks

    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def exposure_warning(host: str, command: str, *, has_key: bool) -> str | None:
    """The warning for serving on an address other machines may reach; None on loopback."""
    if is_loopback(host):
        return None
    guard = (
        "only clients that present the key are served"
        if has_key
        else "anyone who can connect can read and use the recordings; set --token"
    )
    return (
        f"warning: {command} listens on {host}, which other machines may reach: {guard} "
        "(traffic is plain HTTP)"
    )
