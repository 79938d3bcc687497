"""Answering the agent: an upstream answer passed on as it arrives, or a whole one.

``relay`` is how both the recorder and the gateway hand an agent what the real host sends: each
piece is written and flushed before the next is read, so a stream of server-sent events reaches
the agent event by event while the whole body is kept for the recording. ``send`` writes a
complete ``Response`` (a replayed exchange, an answer of trialrun's own).
"""

from __future__ import annotations

import http.client
from typing import TYPE_CHECKING

from trialrun.httprec.exchange import HOP_BY_HOP, Response

if TYPE_CHECKING:
    # Annotations only: the server under it (http.server) loads when a client connects.
    from trialrun.base.localserver import LocalHandler

_CHUNK_BYTES = 64 * 1024
# Connection headers, and the length and encoding set again for this connection's own framing.
_NOT_PASSED_ON = HOP_BY_HOP | {"host", "content-length", "content-encoding"}


def relay(
    handler: LocalHandler, response: http.client.HTTPResponse, *, head: bool = False
) -> tuple[bytes, bool]:
    """Pass an upstream answer on as it arrives; returns ``(body received, complete)``.

    Each piece is written (as an HTTP chunk when the length is unknown, which is how streams
    come) and flushed before the next is read. If the agent goes away the rest is still read,
    so a recording holds the whole answer. ``head``: the answer to a HEAD, which has no body
    whatever its headers say.
    """
    length = response.getheader("Content-Length")
    no_body = head or response.status in (204, 304) or response.status < 200
    chunked = not no_body and (response.chunked or length is None)
    client_ok = _send_head(handler, response, length, head=head, no_body=no_body, chunked=chunked)
    pieces: list[bytes] = []
    complete = True
    while not no_body:
        try:
            data = response.read1(_CHUNK_BYTES)
        except (OSError, http.client.HTTPException):
            complete = False
            break
        if not data:
            break
        pieces.append(data)
        if client_ok:
            client_ok = _write(handler, b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)
    received = b"".join(pieces)
    if not chunked and not no_body and length is not None and len(received) != int(length):
        complete = False
    if client_ok and complete and chunked:
        client_ok = _write(handler, b"0\r\n\r\n")
    if not (client_ok and complete):
        handler.close_connection = True
    return received, complete


def _send_head(
    handler: LocalHandler,
    response: http.client.HTTPResponse,
    length: str | None,
    *,
    head: bool,
    no_body: bool,
    chunked: bool,
) -> bool:
    """The status line and headers; False when the client already hung up."""
    handler.send_response(response.status, response.reason)
    for name, value in response.getheaders():
        if name.lower() not in _NOT_PASSED_ON:
            handler.send_header(name, value)
    if chunked:
        handler.send_header("Transfer-Encoding", "chunked")
    elif length is not None and (head or not no_body):
        handler.send_header("Content-Length", length)
    try:
        handler.end_headers()
        handler.wfile.flush()
    except OSError:
        return False
    return True


def _write(handler: LocalHandler, data: bytes) -> bool:
    try:
        handler.wfile.write(data)
        handler.wfile.flush()
    except OSError:
        return False
    return True


def send(
    handler: LocalHandler,
    response: Response,
    *,
    extra: list[tuple[str, str]] | None = None,
    head: bool = False,
) -> None:
    """Send a complete ``response`` (``extra``: headers after its own; ``head``: no body)."""
    try:
        handler.send_response(response.status, response.reason or None)
        for name, value in [*response.headers, *(extra or [])]:
            handler.send_header(name, value)
        handler.end_headers()
        if not head and response.body:
            handler.wfile.write(response.body)
        handler.wfile.flush()
    except OSError:
        handler.close_connection = True
