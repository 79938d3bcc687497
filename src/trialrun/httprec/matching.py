"""Which recording answers a request: normalization, the matching key, and misses explained.

A request and a recording are the same when their method, URL and body are equal after both
were redacted (``exchange.recorded``) and normalized under the suite's ``normalization:`` rules
(``trialrun.config.normalize``): a JSON body is normalized as JSON (``strip_keys``,
``strip_paths``, ``replace_paths``, ``replace_text``) and compared as canonical JSON, so key
order and spacing never matter; any other body and the URL get the ``replace_text`` rules.
Headers are not matched: they carry the volatile parts (dates, request ids, client versions).

Each recording answers once. Recordings with the same key answer in file order, so repeated
identical requests replay their own answers. A miss is explained against the nearest recording
of the same host and port: its line and the first part that differs (method, URL or body).
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from trialrun.base import canonjson
from trialrun.base.quoting import shortened
from trialrun.config.normalize import normalize
from trialrun.httprec.exchange import Exchange, address_of, redact_body, redact_url

if TYPE_CHECKING:
    from trialrun.config.models import Normalization

_PREVIEW = 80


@dataclass(frozen=True, slots=True)
class Normalized:
    """A request as matching sees it."""

    method: str
    url: str
    body: str

    @property
    def key(self) -> str:
        return f"{self.method} {self.url}\n{self.body}"


class RequestNormalizer:
    def __init__(self, rules: Normalization | None = None) -> None:
        self._rules = rules if rules is not None and not rules.is_empty else None

    def normalized(self, method: str, url: str, body: bytes) -> Normalized:
        """``url`` and ``body`` as they were sent; they are redacted here first."""
        return self.of_recorded(method, redact_url(url), redact_body(body))

    def of_recorded(self, method: str, url: str, body: bytes) -> Normalized:
        """A stored (already redacted) request, normalized again under the current rules."""
        return Normalized(method.upper(), self._apply(url), self._body(body))

    def _body(self, body: bytes) -> str:
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            return "base64:" + body.hex()
        try:
            value = json.loads(text)
        except ValueError:
            return str(self._apply(text))
        try:
            return "json:" + canonjson.dumps(self._apply(value))
        except (TypeError, ValueError):  # a float canonical JSON cannot write (nan)
            return str(self._apply(text))

    def _apply(self, value: Any) -> Any:
        return value if self._rules is None else normalize(value, self._rules)


class Replay:
    """A case's recordings and what replay consumed of them (thread-safe)."""

    def __init__(self, exchanges: Sequence[Exchange], normalizer: RequestNormalizer) -> None:
        self.exchanges = list(exchanges)
        self._normalizer = normalizer
        self._requests = [
            normalizer.of_recorded(e.method, e.url, e.request_body) for e in self.exchanges
        ]
        self._by_key: dict[str, deque[int]] = {}
        self._addresses: dict[str, list[int]] = {}
        for index, (exchange, request) in enumerate(
            zip(self.exchanges, self._requests, strict=True)
        ):
            self._by_key.setdefault(request.key, deque()).append(index)
            self._addresses.setdefault(exchange.address, []).append(index)
        self._used = [False] * len(self.exchanges)
        self._lock = threading.Lock()

    def knows(self, address: str) -> bool:
        """Whether anything was recorded for ``host:port``."""
        return address in self._addresses

    def take(self, request: Normalized) -> Exchange | None:
        """Consume the first unused recording of this request."""
        with self._lock:
            queue = self._by_key.get(request.key)
            if not queue:
                return None
            index = queue.popleft()
            self._used[index] = True
            return self.exchanges[index]

    def unused(self) -> list[Exchange]:
        with self._lock:
            return [e for e, used in zip(self.exchanges, self._used, strict=True) if not used]

    def explain_miss(self, request: Normalized) -> str:
        """Why no unused recording answers this request; the nearest one and how it differs."""
        address = address_of(request.url)
        with self._lock:
            indexes = self._addresses.get(address, [])
            unused = [i for i in indexes if not self._used[i]]
            pool = unused or indexes
            text = (
                f"cassette mismatch: no unused recording of {request.method} "
                f"{shortened(request.url, _PREVIEW)}"
            )
            if not pool:
                return f"{text}; nothing was recorded for {address}"
            nearest = max(pool, key=lambda i: _likeness(self._requests[i], request))
            state = "" if nearest in unused else " (already used)"
            line = self.exchanges[nearest].line
            return f"{text}; nearest recording: line {line}{state}; " + _difference(
                self._requests[nearest], request
            )


def _likeness(recorded: Normalized, requested: Normalized) -> tuple[int, int, int]:
    return (
        recorded.method == requested.method,
        _common_prefix(recorded.url, requested.url),
        _common_prefix(recorded.body, requested.body),
    )


def _common_prefix(a: str, b: str) -> int:
    count = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        count += 1
    return count


def _difference(recorded: Normalized, requested: Normalized) -> str:
    for part in ("method", "url", "body"):
        old, new = getattr(recorded, part), getattr(requested, part)
        if old != new:
            return f"it differs in the {part}: recorded {_preview(old)}, requested {_preview(new)}"
    return "it has the same request (already used by an earlier identical request)"


def _preview(text: str) -> str:
    for prefix in ("json:", "base64:"):
        text = text.removeprefix(prefix)
    return repr(shortened(text, _PREVIEW)) if text else "(empty)"
