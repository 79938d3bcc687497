"""A peer that hangs up is ordinary traffic; an unexpected error is one line, not a traceback.

An SDK client closing its keep-alive connection at exit, an agent killed mid-request, an upstream
that resets: each shows up as ``ConnectionResetError``, ``BrokenPipeError`` or
``ConnectionAbortedError`` somewhere inside a server thread. ``socketserver`` prints a traceback
for any exception a handler lets out, which reads as a crash of trialrun. The local HTTP servers
(model gateway, MCP proxy) use ``QuietServerMixin`` instead: a hang-up ends its connection
silently, anything else is reported on one line naming the exception and where it was raised.
"""

from __future__ import annotations

import sys
import traceback
from http.server import BaseHTTPRequestHandler
from typing import Any

HANG_UPS: tuple[type[OSError], ...] = (
    ConnectionResetError,
    BrokenPipeError,
    ConnectionAbortedError,
)
"""What a read or write raises when the peer closed or reset the connection."""


def is_hang_up(exc: BaseException) -> bool:
    return isinstance(exc, HANG_UPS)


def describe(exc: BaseException) -> str:
    """``Type: message (at file:line)``, the line where it was raised: a bug report in one line."""
    where = ""
    frames = traceback.extract_tb(exc.__traceback__)
    if frames:
        last = frames[-1]
        where = f" (at {last.filename}:{last.lineno})"
    text = str(exc).replace("\n", " ")
    return f"{type(exc).__name__}{': ' + text if text else ''}{where}"


class QuietServerMixin:
    """For a ``socketserver`` server: no traceback on stderr for a client that hangs up.

    Put it before the server class (``class S(QuietServerMixin, ThreadingHTTPServer)``) and
    override ``report_error`` to send the line where the server's diagnostics go.
    """

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if exc is None or is_hang_up(exc):
            return
        peer = _peer(client_address)
        self.report_error(f"unexpected error on the connection from {peer}: {describe(exc)}")

    def report_error(self, line: str) -> None:
        print(line, file=sys.stderr, flush=True)


def _peer(address: Any) -> str:
    if isinstance(address, tuple) and len(address) >= 2:
        return f"{address[0]}:{address[1]}"
    return str(address)


class AnswerTrackingHandler(BaseHTTPRequestHandler):
    """A request handler that knows whether the current request's status line went out.

    A bug found before it can still be answered with a 500 that names it (an SDK shows that
    message; a dropped connection it retries, then reports as a network error naming neither
    trialrun nor the bug); after it, closing the connection is all that is left.
    """

    answered = False

    def handle_one_request(self) -> None:
        self.answered = False
        super().handle_one_request()

    def send_response(self, code: int, message: str | None = None) -> None:
        self.answered = True
        super().send_response(code, message)
