"""The recorder's front: its listening socket and its cases, cheap enough for every run.

Every record and replay run has a recorder, but most agents never send it a request. The front
binds the loopback socket (agents get its address in their proxy variables) and keeps the
cases' credentials; the HTTP server (``proxy``, with ``http.server`` and ``email`` under it), a
case's traffic (``traffic``, ``matching``) and the run's certificate authority (``authority``,
with ``cryptography``) are made when something first needs them: the first connection, the
first request of a case, the first CONNECT or CA bundle. Until a client connects, the kernel
holds its connection in the listen queue.
"""

from __future__ import annotations

import base64
import binascii
import select
import socket
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trialrun.base.localserver import LocalHandler, LocalServer
    from trialrun.httprec.authority import RunAuthority
    from trialrun.httprec.traffic import CaseTraffic

LISTEN_BACKLOG = 1024
"""The same listen queue as ``base.localserver.LocalServer`` keeps."""


def credentials(authorization: str | None) -> tuple[str, str] | None:
    """``(run_id, key)`` of a ``Proxy-Authorization: Basic ...`` header, or None."""
    if authorization is None:
        return None
    scheme, _, encoded = authorization.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    run_id, _, key = decoded.partition(":")
    return run_id, key


class _Case:
    """One case's credentials and its traffic, made the first time a request needs it."""

    def __init__(self, key: str, traffic: CaseTraffic | Callable[[], CaseTraffic]) -> None:
        self.key = key
        self._make = traffic if callable(traffic) else None
        self.traffic = None if callable(traffic) else traffic

    def built(self) -> CaseTraffic:
        if self.traffic is None:
            assert self._make is not None
            self.traffic = self._make()
        return self.traffic


class HttpRecorder:
    """The run's recording proxy: start, open a case, close it, stop.

    Its listener is also the front door of the services that are reached by a base URL rather
    than as a proxy (the model gateway): a request in origin form (``POST /key/.../run/...``)
    goes to ``front_door`` when one is set. Proxy requests (an absolute URL, ``CONNECT``) are
    the recorder's own.
    """

    def __init__(
        self,
        authority: RunAuthority | Callable[[], RunAuthority],
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        """``authority``: the run's certificate authority, or what makes it when first needed.
        ``port`` 0: any free port."""
        self.front_door: Callable[[LocalHandler], None] | None = None
        """Answers a request in origin form on its connection (None: refused as a proxy
        request without an absolute URL)."""
        self.report_error: Callable[[str], None] = _print_error
        """Where an unexpected error on a connection is reported, as one line."""
        self._authority = None if callable(authority) else authority
        self._make_authority = authority if callable(authority) else None
        self._cases: dict[str, _Case] = {}
        self._lock = threading.Lock()
        self._stopping = False
        self._server: LocalServer | None = None
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._socket = socket.socket(family, socket.SOCK_STREAM)
        try:
            # A fixed port (``trialrun gateway --listen``) can be bound again at once after a
            # restart, as http.server's own servers allow.
            self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self._socket.bind((host, port))
            self._socket.listen(LISTEN_BACKLOG)
        except OSError:
            self._socket.close()
            raise
        self._wake_read, self._wake_write = socket.socketpair()
        self._thread = threading.Thread(target=self._serve, name="http-recorder", daemon=True)
        self._thread.start()

    @property
    def authority(self) -> RunAuthority:
        """The run's certificate authority, made on first use."""
        with self._lock:
            if self._authority is None:
                assert self._make_authority is not None
                self._authority = self._make_authority()
            return self._authority

    @property
    def has_authority(self) -> bool:
        """Whether the run's authority was made (a case needed it)."""
        return self._authority is not None

    @property
    def address(self) -> tuple[str, int]:
        """Where the proxy listens (what a network seal must let agents reach)."""
        host, port = self._socket.getsockname()[:2]
        return str(host), int(port)

    @property
    def url(self) -> str:
        """``http://HOST:PORT`` (an IPv6 host in brackets): the front door's base URL."""
        host, port = self.address
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}"

    def proxy_url(self, run_id: str, key: str) -> str:
        return self.url.replace("http://", f"http://{run_id}:{key}@", 1)

    def open_case(
        self, run_id: str, key: str, traffic: CaseTraffic | Callable[[], CaseTraffic]
    ) -> str:
        """Serve ``run_id`` to whoever presents ``key``; the proxy URL to give its agent.
        ``traffic`` may be what makes the case's traffic when its first request comes."""
        with self._lock:
            self._cases[run_id] = _Case(key, traffic)
        return self.proxy_url(run_id, key)

    def close_case(self, run_id: str) -> CaseTraffic | None:
        """Stop serving ``run_id``: its credentials open nothing from now on. Its traffic once
        the requests it was serving have ended, or None when no request ever needed it made."""
        with self._lock:
            entry = self._cases.pop(run_id, None)
        if entry is None or entry.traffic is None:
            return None
        entry.traffic.wait_idle()
        return entry.traffic

    def traffic_for(self, authorization: str | None) -> CaseTraffic | None:
        """The case whose credentials ``Proxy-Authorization`` carries, or None."""
        found = credentials(authorization)
        if found is None:
            return None
        run_id, key = found
        from trialrun.base.accesskey import key_matches

        with self._lock:
            entry = self._cases.get(run_id)
            if entry is None or not key_matches(key, entry.key):
                return None
            # Made under the lock: a case closed meanwhile never gets traffic made for it.
            return entry.built()

    def _serve(self) -> None:
        ready, _, _ = select.select([self._socket, self._wake_read], [], [])
        with self._lock:
            if self._stopping or self._socket not in ready:
                return
            try:
                from trialrun.httprec.proxy import recorder_server

                self._server = recorder_server(self, self._socket)
            except BaseException:
                # No server will ever accept: clients are refused rather than left waiting.
                self._socket.close()
                raise
        self._server.serve_forever(poll_interval=0.05)

    def stop(self) -> None:
        with self._lock:
            self._stopping = True
            server = self._server
        if server is None:
            self._wake_write.send(b"x")
        else:
            # The loop notices shutdown() at its next poll: a run's end waits for one interval.
            server.shutdown()
            server.drop_connections()
            server.server_close()
        self._thread.join()
        self._socket.close()
        self._wake_read.close()
        self._wake_write.close()


def _print_error(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
