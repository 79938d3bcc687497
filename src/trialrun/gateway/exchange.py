"""What happens to one model call: answered from the cassette, or forwarded and recorded.

``server.Gateway`` routes a request to its run and builds an ``Exchange``; ``replay`` or
``forward`` answers the agent and returns an ``Outcome``, which the gateway turns into the run's
``ModelCall``. Neither function raises for anything the agent or the provider did: a miss, an
unreachable upstream and a provider error are all answered and reported as outcomes.
"""

from __future__ import annotations

import http.client
import logging
import time
from dataclasses import dataclass
from typing import Any

from trialrun.base.recordtime import recorded_at
from trialrun.base.redact import redact, redact_text
from trialrun.errors import ConfigError
from trialrun.gateway.cassette import Recording
from trialrun.gateway.provider import Provider, Route, error_message, parse_json
from trialrun.gateway.runs import RunState
from trialrun.gateway.usage import Usage, json_or_none
from trialrun.gateway.wire import Handler, send_error, send_whole
from trialrun.httprec.difference import describe, first_difference
from trialrun.httprec.relay import relay
from trialrun.httprec.upstream import SharedTls, Upstream, forward_headers, open_upstream

__all__ = ["Exchange", "Outcome", "error_of", "forward", "parse_json", "replay"]

LOG = logging.getLogger("trialrun.gateway")


@dataclass(frozen=True)
class Exchange:
    """One routed request of an open run, as known before it is answered."""

    state: RunState
    route: Route
    provider: Provider
    method: str
    body: bytes
    request: Any
    """The body as JSON, or its text when it is not JSON."""
    normalized: Any
    key: str
    started: float
    """``time.monotonic()`` when the request arrived."""
    timestamp: float
    """``time.time()`` when the request arrived."""


@dataclass(frozen=True)
class Outcome:
    """How a model call ended, as far as the run's ``ModelCall`` needs it."""

    status: int
    usage: Usage
    replayed: bool
    error: str | None = None
    warning: str | None = None


def replay(handler: Handler, exchange: Exchange, *, lenient: bool) -> Outcome:
    """Answer from the run's cassette; a miss is a 400 ``cassette mismatch`` in provider shape."""
    state, route = exchange.state, exchange.route
    assert state.replay is not None
    warning = miss = None
    with state.lock:
        recording = state.replay.take(exchange.key)
        if recording is None and lenient:
            recording = state.replay.take_next((route.provider, exchange.method, route.path))
            if recording is not None:
                difference = first_difference(recording.request, exchange.normalized)
                served = describe(recording.line, difference, used=False, label="the recording")
                warning = f"drift: no recording of this request, lenient replay served {served}"
        if recording is None:
            miss = state.replay.explain_miss(
                route.provider,
                exchange.method,
                route.path,
                exchange.normalized,
                exchange.key,
                query=exchange.provider.stored_query(route.query),
            )
    if recording is None:
        assert miss is not None
        LOG.warning("run %s: %s", state.run_id, miss)
        send_error(handler, route.provider, 400, miss, code="cassette_mismatch")
        return Outcome(400, Usage(), replayed=True, error=miss)
    if warning is not None:
        LOG.warning("run %s: %s", state.run_id, warning)
    return _answer(handler, exchange, recording, warning)


def answer_kept(handler: Handler, exchange: Exchange) -> Outcome | None:
    """Update mode: answer from an unused old recording of the same request (the match replay
    makes), which takes the request's place in the new cassette as it was; None: no such
    recording, the request is forwarded and recorded."""
    state = exchange.state
    assert state.update is not None
    recording = state.update.take(exchange.key)
    if recording is None:
        return None
    index, _ = state.reserve(exchange.key)
    state.arrivals.fill(index, recording)
    return _answer(handler, exchange, recording, None)


def _answer(
    handler: Handler, exchange: Exchange, recording: Recording, warning: str | None
) -> Outcome:
    route = exchange.route
    body = recording.body_bytes()
    send_whole(handler, recording.status, recording.content_type, recording.headers, body)
    usage = recording.usage or exchange.provider.usage(
        exchange.method, route.path, recording.content_type, recording.body, recording.headers
    )
    error = error_of(recording.status, recording.body, exchange.provider)
    return Outcome(recording.status, usage, replayed=True, error=error, warning=warning)


def forward(
    handler: Handler, exchange: Exchange, upstream: Upstream, *, tls: SharedTls, timeout: float
) -> Outcome:
    """Forward to the provider through the recorder's forwarder and pass the answer on as it
    arrives (``httprec.relay``); in record mode keep it."""
    state, route = exchange.state, exchange.route
    slot = state.reserve(exchange.key) if state.mode == "record" else None
    sent_path = exchange.provider.upstream_path(route.path)
    headers = exchange.provider.upstream_headers(
        forward_headers(handler.headers.items(), upstream),
        upstream=upstream,
        method=exchange.method,
        path=upstream.base_path + sent_path,
        query=route.query,
        body=exchange.body,
    )
    target = sent_path + (f"?{route.query}" if route.query else "")
    request = upstream.request(exchange.method, target, headers.items(), exchange.body)
    try:
        context = tls.get() if upstream.scheme == "https" else None
        connection, response = open_upstream(request, context, timeout=timeout)
    except (OSError, http.client.HTTPException, ConfigError) as exc:
        message = f"the gateway could not reach the {route.provider} upstream {upstream.url}: {exc}"
        LOG.warning("run %s: %s", state.run_id, message)
        send_error(handler, route.provider, 502, message, code="upstream_error", retry=True)
        return Outcome(502, Usage(), replayed=False, error=message)
    try:
        received, complete = relay(handler, response)
    finally:
        connection.close()
    content_type = response.getheader("Content-Type") or ""
    text = received.decode("utf-8", "surrogateescape")
    provider = exchange.provider
    headers = {
        name.lower(): value
        for name, value in response.getheaders()
        if name.lower() in provider.recorded_headers
    }
    usage = provider.usage(exchange.method, route.path, content_type, text, headers)
    if not complete:
        # The agent saw a broken answer too; a replay must not serve it as a whole one.
        error = "the upstream response broke off before its end (not recorded)"
        return Outcome(response.status, usage, replayed=False, error=error)
    if slot is not None:
        index, occurrence = slot
        recording = Recording(
            provider=route.provider,
            method=exchange.method,
            path=route.path,
            query=provider.stored_query(route.query),
            request=exchange.normalized,
            status=response.status,
            content_type=content_type,
            headers={name: redact_text(value) for name, value in headers.items()},
            body=redact(text),
            key=exchange.key,
            occurrence=occurrence,
            elapsed_ms=(time.monotonic() - exchange.started) * 1000,
            usage=usage,
            recorded_at=recorded_at(),
        )
        state.arrivals.fill(index, recording)
    return Outcome(
        response.status, usage, replayed=False, error=error_of(response.status, text, provider)
    )


def error_of(status: int, body: str, provider: Provider | None = None) -> str | None:
    """A failed call's error text, with the provider's own message when its body has one."""
    if status < 400:
        return None
    data = json_or_none(body)
    message = error_message(data) if provider is None else provider.error_message(data)
    text = f"HTTP {status}" + (f": {message}" if message else "")
    return redact_text(text)[:300]
