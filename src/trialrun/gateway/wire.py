"""HTTP plumbing of the gateway: reading requests, writing responses, errors on a connection.

Kept apart from the gateway's logic (``server``) so that module reads as what happens to a model
call, and this one as how bytes move: request bodies (``Content-Length`` or chunked), whole
replayed responses, and error bodies. The listener is the HTTP recorder's (``httprec.front``)
and an upstream answer is passed on by the recorder's ``httprec.relay``.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping

from trialrun.base import localserver
from trialrun.base.hangups import HANG_UPS, describe
from trialrun.base.localserver import BadLength
from trialrun.gateway.routes import RouteError, error_body
from trialrun.httprec.exchange import Response
from trialrun.httprec.proxy import RecorderHandler
from trialrun.httprec.relay import send

LOG = logging.getLogger("trialrun.gateway")
MAX_BODY_BYTES = 64 * 1024 * 1024


Handler = RecorderHandler
"""A connection to the gateway: the gateway's routes are the front door of the HTTP recorder's
listener (``httprec.front``), so its requests arrive on the recorder's handler."""


def guarded(handler: Handler, serve: Callable[[Handler], None]) -> None:
    """``serve(handler)``; a client that hangs up ends its connection without a word, and any
    other error is logged as one line and answered with a 500 while it still can be."""
    try:
        serve(handler)
    except HANG_UPS:  # the client went away mid-request: nothing left to answer
        LOG.info("the client hung up during %s %r", handler.command, handler.path)
        handler.close_connection = True
    except Exception as exc:  # a bug must not end the connection's thread silently
        problem = describe(exc)
        LOG.error("gateway error while serving %s %r: %s", handler.command, handler.path, problem)
        handler.close_connection = True
        if not handler.answered:
            # The client learns that it is a bug, not where: source paths stay in the log.
            _answer_internal_error(
                handler,
                f"trialrun gateway internal error ({type(exc).__name__}); "
                "the gateway's log has the details",
            )


def _answer_internal_error(handler: Handler, message: str) -> None:
    # "/run/<id>/<provider>/...": that provider's error shape (OpenAI's for an unknown one).
    segments = handler.path.split("?")[0].split("/")
    provider = segments[3] if len(segments) > 3 and segments[1] == "run" else None
    body = error_body(provider, 500, message, code="trialrun_gateway_error")
    with contextlib.suppress(OSError):
        handler.send_response(500)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.send_header("Connection", "close")
        handler.end_headers()
        handler.wfile.write(body)


def read_body(handler: Handler, provider: str | None) -> bytes:
    """The request body (``Content-Length`` or chunked); ``RouteError`` 400/413 when bad."""
    try:
        return localserver.read_body(handler, MAX_BODY_BYTES, service="gateway")
    except BadLength as exc:
        raise RouteError(exc.status, exc.message, provider=provider) from None


def send_whole(
    handler: Handler, status: int, content_type: str, headers: Mapping[str, str], body: bytes
) -> None:
    """Send a complete response (replayed recordings, gateway errors)."""
    typed = [("Content-Type", content_type)] if content_type else []
    length = [("Content-Length", str(len(body)))]
    send(handler, Response(status, [*headers.items(), *typed, *length], body))


def send_error(
    handler: Handler,
    provider: str | None,
    status: int,
    message: str,
    *,
    code: str,
    retry: bool = False,
) -> None:
    """An error in the provider's shape; ``x-should-retry: false`` unless ``retry``."""
    headers = {} if retry else {"x-should-retry": "false"}
    if handler.close_connection:
        headers["Connection"] = "close"
    send_whole(
        handler,
        status,
        "application/json",
        headers,
        error_body(provider, status, message, code=code),
    )
