"""Which recording answers a request: normalization, the matching key, and misses explained.

A request and a recording are the same when their method, URL and body are equal after both
were redacted (``exchange.recorded``) and normalized under the suite's ``normalization:`` rules
(``trialrun.config.normalize``): a JSON body is normalized as JSON (``strip_keys``,
``strip_paths``, ``replace_paths``, ``replace_text``) and compared as canonical JSON, so key
order and spacing never matter; any other body and the URL get the ``replace_text`` rules.
Headers are not matched: they carry the volatile parts (dates, request ids, client versions).

Each recording answers once. Recordings with the same key answer in file order, so repeated
identical requests replay their own answers. A miss is explained against the nearest recording
of the same host and port: its line and the first part that differs (the method, the URL, or
the body: ``body.items[2]`` in a JSON one). ``Recordings``, the consume-once core, serves the
model gateway's cassettes too.
"""

from __future__ import annotations

import json
import threading
from collections import Counter, deque
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from trialrun.base import canonjson
from trialrun.base.quoting import shortened
from trialrun.config.normalize import compile_text_rules, normalize
from trialrun.httprec.difference import Difference, describe, first_difference, miss_message
from trialrun.httprec.exchange import Exchange, address_of, redact_body, redact_url

if TYPE_CHECKING:
    from trialrun.config.models import Normalization

_PREVIEW = 80
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Normalized:
    """A request as matching sees it (and its key: equal when the three parts are)."""

    method: str
    url: str
    body: str


class RequestNormalizer:
    """The suite's ``normalization:`` rules over a request; the gateway's adds its defaults
    (``normalize`` is the seam)."""

    def __init__(self, rules: Normalization | None = None) -> None:
        self.rules = rules if rules is not None and not rules.is_empty else None
        if self.rules is not None:
            # Refuse a bad user regex now (ConfigError), not on the first request mid-run.
            compile_text_rules(
                tuple((r.pattern, r.flags, r.replacement) for r in self.rules.replace_text)
            )

    def normalize(self, value: Any) -> Any:
        """A body's JSON value, a body's text or a URL under the rules."""
        return value if self.rules is None else normalize(value, self.rules)

    def normalized(self, method: str, url: str, body: bytes) -> Normalized:
        """``url`` and ``body`` as they were sent; they are redacted here first."""
        return self.of_recorded(method, redact_url(url), redact_body(body))

    def of_recorded(self, method: str, url: str, body: bytes) -> Normalized:
        """A stored (already redacted) request, normalized again under the current rules."""
        return Normalized(method.upper(), self.normalize(url), self._body(body))

    def _body(self, body: bytes) -> str:
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            return "base64:" + body.hex()
        try:
            value = json.loads(text)
        except ValueError:
            return str(self.normalize(text))
        try:
            return "json:" + canonjson.dumps(self.normalize(value))
        except (TypeError, ValueError):  # a float canonical JSON cannot write (nan)
            return str(self.normalize(text))


class Recordings(Generic[T]):
    """Recordings that each answer once (thread-safe), the core of every replay.

    ``keys[i]`` is the request recording ``i`` answers; a key's recordings answer in file order.
    ``groups[i]`` is the recording's place (an address, a provider's endpoint): ``take_next``
    serves the next unused one of a group whatever its key, and a miss looks for the nearest
    recording among its group's unused ones (all of them once every one was used).
    """

    def __init__(
        self, items: Sequence[T], keys: Sequence[Hashable], groups: Sequence[Hashable]
    ) -> None:
        self.items = list(items)
        self.keys = list(keys)
        self._by_key: dict[Hashable, deque[int]] = {}
        self._by_group: dict[Hashable, deque[int]] = {}
        self._of_group: dict[Hashable, list[int]] = {}
        for index, (key, group) in enumerate(zip(self.keys, groups, strict=True)):
            self._by_key.setdefault(key, deque()).append(index)
            self._by_group.setdefault(group, deque()).append(index)
            self._of_group.setdefault(group, []).append(index)
        self._used = [False] * len(self.items)
        self._used_per_key: Counter[Hashable] = Counter()
        self._lock = threading.Lock()

    def knows(self, group: Hashable) -> bool:
        return group in self._of_group

    def take(self, key: Hashable) -> T | None:
        """Consume the first unused recording with this key."""
        return self._take(self._by_key.get(key))

    def take_next(self, group: Hashable) -> T | None:
        """Consume the next unused recording of this group, whatever its key."""
        return self._take(self._by_group.get(group))

    def _take(self, indexes: deque[int] | None) -> T | None:
        with self._lock:
            while indexes:
                index = indexes.popleft()
                if not self._used[index]:  # else consumed through the other index
                    self._used[index] = True
                    self._used_per_key[self.keys[index]] += 1
                    return self.items[index]
        return None

    def unused(self) -> list[T]:
        """Recordings nothing consumed, in file order."""
        with self._lock:
            return [item for item, used in zip(self.items, self._used, strict=True) if not used]

    def used_of(self, key: Hashable) -> int:
        """How many recordings with this key were consumed."""
        with self._lock:
            return self._used_per_key[key]

    def nearest(
        self, group: Hashable, likeness: Callable[[int], Any], *, limit: int | None = None
    ) -> tuple[int, bool] | None:
        """The index of the recording of ``group`` with the largest ``likeness(index)``, the
        unused ones first (the first ``limit`` of them), and whether it was used."""
        with self._lock:
            indexes = self._of_group.get(group)
            if not indexes:
                return None
            unused = [i for i in indexes if not self._used[i]]
            index = max((unused or indexes)[:limit], key=likeness)
            return index, self._used[index]


class Replay(Recordings[Exchange]):
    """A case's recordings, keyed by their ``Normalized`` request and grouped by address."""

    def __init__(self, exchanges: Sequence[Exchange], normalizer: RequestNormalizer) -> None:
        self._requests = [
            normalizer.of_recorded(e.method, e.url, e.request_body) for e in exchanges
        ]
        super().__init__(exchanges, self._requests, [e.address for e in exchanges])
        self.exchanges = self.items

    def explain_miss(self, request: Normalized) -> str:
        """Why no unused recording answers this request; the nearest one and how it differs."""
        address = address_of(request.url)
        found = self.nearest(address, lambda i: _likeness(self._requests[i], request))
        if found is None:
            nearest = f"nothing was recorded for {address}"
        else:
            index, used = found
            difference = _difference(self._requests[index], request)
            nearest = describe(self.exchanges[index].line, difference, used=used)
        return miss_message(
            f"no unused recording of {request.method} {shortened(request.url, _PREVIEW)}",
            used_identical=self.used_of(request),
            nearest=nearest,
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


def _difference(recorded: Normalized, requested: Normalized) -> Difference | None:
    for part in ("method", "url"):
        old, new = getattr(recorded, part), getattr(requested, part)
        if old != new:
            return part, old, new
    return first_difference(_body_value(recorded.body), _body_value(requested.body), "body")


def _body_value(body: str) -> Any:
    """A normalized body as JSON again (a JSON body's parts are named), else its text."""
    if body.startswith("json:"):
        try:
            return json.loads(body.removeprefix("json:"))
        except (ValueError, RecursionError):
            pass
    return body.removeprefix("base64:")
