"""The recording proxy: one server per run, each case known by the credentials it presents.

Agents reach it through the standard variables (``HTTP_PROXY``, ``HTTPS_PROXY``...), whose URL
carries the case's run id and key as user and password: ``http://<run-id>:<key>@127.0.0.1:P``.
requests, httpx, urllib, curl and Node's proxy agents send them as ``Proxy-Authorization:
Basic ...`` with every request, and with the ``CONNECT`` that opens an HTTPS tunnel. A request
without the right pair gets ``407`` and reaches nothing (docs/security.md: local servers admit
only keyed requests); the key is compared in constant time.

Plain HTTP comes as absolute-form requests (``GET http://host/path``). HTTPS comes as
``CONNECT host:port``; the proxy answers 200, then speaks TLS as ``host`` with a certificate of
the run's authority (``authority.RunAuthority``) and reads the requests inside the tunnel.
A request in origin form (``POST /key/<key>/run/...``) is for the front door the recorder was
given (the model gateway's routes), which checks its own key.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
from typing import TYPE_CHECKING, Any

from trialrun.base.localserver import BadLength, LocalHandler, LocalServer, read_body
from trialrun.httprec.exchange import Request, Response
from trialrun.httprec.relay import send
from trialrun.httprec.traffic import CaseTraffic, refusal

if TYPE_CHECKING:
    from trialrun.httprec.front import HttpRecorder

MAX_BODY_BYTES = 64 * 1024 * 1024
"""The largest request body the recorder reads (a larger one gets 413)."""
REALM = 'Basic realm="trialrun"'
NEEDS_CREDENTIALS = (
    "this proxy needs the credentials trialrun gave the agent in HTTP_PROXY / HTTPS_PROXY "
    "(http://<run-id>:<key>@HOST:PORT); expected a Proxy-Authorization header with them"
)


def recorder_server(front: HttpRecorder, listening: socket.socket) -> LocalServer:
    """The HTTP server of ``front``, on its listening socket."""
    server = _ProxyServer(("", 0), RecorderHandler, listening=listening)
    server.recorder = front
    return server


class _ProxyServer(LocalServer):
    recorder: HttpRecorder

    def report_error(self, line: str) -> None:
        self.recorder.report_error(line)


class RecorderHandler(LocalHandler):
    """A connection to the recorder: proxy requests, tunnels, and the front door's requests."""

    # Each piece of a relayed stream goes out at once, not after the client's delayed ACK.
    disable_nagle_algorithm = True
    server: _ProxyServer
    _tunnel: tuple[str, int, CaseTraffic] | None = None
    _tls: ssl.SSLSocket | None = None

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: what passed through is in the case's recording, not on stderr."""

    # Every method goes the same way; BaseHTTPRequestHandler looks them up by name.
    def do_GET(self) -> None:
        self._serve()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = do_GET

    def do_CONNECT(self) -> None:
        traffic = self._authorized()
        if traffic is None:
            return
        host, port = _split_authority(self.path, 443)
        if not host:
            self._answer(
                refusal(400, "bad_request", f"CONNECT needs host:port; found {self.path!r}")
            )
            return
        if self._tunnel is not None:
            self._answer(refusal(400, "bad_request", "CONNECT inside a tunnel"))
            return
        refused = traffic.refuse_tunnel(host, port)
        if refused is not None:
            self._answer(refused)
            return
        context = self.server.recorder.authority.context_for(host)
        self.send_response(200, "Connection Established")
        self.end_headers()
        self.wfile.flush()
        try:
            tls = context.wrap_socket(self.connection, server_side=True)
        except (ssl.SSLError, OSError):
            # The client did not trust the run's authority (or hung up): nothing to serve.
            self.close_connection = True
            return
        # The requests that follow arrive inside the tunnel; handle() reads them from here.
        self._tls = tls
        self._tunnel = (host, port, traffic)
        # A CONNECT in HTTP/1.0 (urllib sends one) would end the connection after it.
        self.close_connection = False
        self.connection = tls
        self.rfile = tls.makefile("rb")
        self.wfile = tls.makefile("wb")

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            if self._tls is not None:
                with contextlib.suppress(OSError):
                    self._tls.close()

    def _authorized(self) -> CaseTraffic | None:
        traffic = self.server.recorder.traffic_for(self.headers.get("Proxy-Authorization"))
        if traffic is None:
            self._discard_body()
            self._answer(
                refusal(407, "proxy_authentication_required", NEEDS_CREDENTIALS),
                extra=[("Proxy-Authenticate", REALM)],
            )
        return traffic

    def _serve(self) -> None:
        door = self.server.recorder.front_door
        if door is not None and self._tunnel is None and self.path.startswith("/"):
            door(self)
            return
        if self._tunnel is not None:
            host, port, traffic = self._tunnel
            scheme, target = "https", _origin_form(self.path)
        else:
            found = self._authorized()
            if found is None:
                return
            traffic = found
            parsed = _absolute(self.path)
            if parsed is None:
                self._answer(
                    refusal(
                        400,
                        "bad_request",
                        f"expected a proxy request (an absolute http:// URL); found {self.path!r}",
                    )
                )
                return
            scheme, host, port, target = parsed
        try:
            body = self._read_body()
        except BadLength as exc:
            self.close_connection = True
            self._answer(refusal(exc.status, "bad_request", exc.message))
            return
        request = Request(
            method=self.command,
            scheme=scheme,
            host=host,
            port=port,
            target=target,
            headers=list(self.headers.items()),
            body=body,
        )
        traffic.serve(request, self)

    def _read_body(self) -> bytes:
        return read_body(self, MAX_BODY_BYTES, service="HTTP recorder")

    def _discard_body(self) -> None:
        with contextlib.suppress(BadLength, OSError):
            self._read_body()

    def _answer(self, response: Response, *, extra: list[tuple[str, str]] | None = None) -> None:
        send(self, response, extra=extra)


def _origin_form(target: str) -> str:
    """``/path?query`` of a target inside a tunnel, which a client may send in absolute form."""
    if not target.lower().startswith("https://"):
        return target
    rest = target[len("https://") :]
    _authority, slash, path = rest.partition("/")
    return slash + path if slash else "/"


def _absolute(target: str) -> tuple[str, str, int, str] | None:
    """``(scheme, host, port, path?query)`` of an absolute-form ``http://`` target."""
    if not target.lower().startswith("http://"):
        return None
    rest = target[len("http://") :]
    authority, slash, path = rest.partition("/")
    authority = authority.rpartition("@")[2]
    host, port = _split_authority(authority, 80)
    if not host:
        return None
    return "http", host, port, slash + path if slash else "/"


def _split_authority(text: str, default_port: int) -> tuple[str, int]:
    """``host`` and ``port`` of ``host[:port]`` / ``[v6][:port]``; ``("", 0)`` when invalid."""
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port_text = rest.removeprefix(":")
    elif text.count(":") == 1:
        host, _, port_text = text.partition(":")
    else:
        host, port_text = text, ""
    if not port_text:
        return host.lower(), default_port
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        return "", 0
    return host.lower(), int(port_text)
