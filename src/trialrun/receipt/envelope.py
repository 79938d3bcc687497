"""The Run Receipt v0 envelope: member names, timestamps and the event hash.

Every receipt line is one event ``{v, seq, ts, type, data, prev, hash}`` (``run_end`` may add
``signature``). ``hash`` is the SHA-256 hex of the canonical JSON (``trialrun.base.canonjson``)
of the event *without* ``hash`` and ``signature``, so a signature can be added or stripped without
touching the chain. The line itself is the canonical JSON of the whole event, which is why the
writer builds it here from the very text it hashed (``canonical_event_text`` / ``event_line``):
one serialization per event, byte for byte what the reference writer produces.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Mapping
from functools import lru_cache
from typing import Any, Final

from trialrun.base import canonjson

__all__ = [
    "ENVELOPE_KEYS",
    "SIGNATURE_KEY",
    "SIGNATURE_MEMBERS",
    "SPEC_VERSION",
    "ZERO_HASH",
    "EventText",
    "event_hash",
    "format_ts",
    "signature_problem",
    "unsigned_event",
]

SPEC_VERSION: Final = "0"
ZERO_HASH: Final = "0" * 64
# In the order an event is built; the line on disk sorts them (canonical JSON).
ENVELOPE_KEYS: Final = ("v", "seq", "ts", "type", "data", "prev", "hash")
SIGNATURE_KEY: Final = "signature"
# A malformed block (a member missing or of the wrong type) is the reference's bad_signature.
SIGNATURE_MEMBERS: Final = frozenset({"alg", "publicKey", "sig"})
_NOT_HASHED: Final = ("hash", SIGNATURE_KEY)


def format_ts(epoch: float) -> str:
    """``YYYY-MM-DDTHH:MM:SS.mmmZ`` in UTC, as JavaScript's ``Date.toISOString`` writes it.

    Milliseconds are truncated like a JavaScript ``Date``, except that an epoch within float noise
    of a whole millisecond counts as that millisecond, so that noise cannot lose one.
    """
    if not math.isfinite(epoch):
        raise ValueError(f"timestamp must be a finite number of seconds, found {epoch!r}")
    # A float epoch near a whole millisecond may sit a few ulps below it (1.001 * 1000 ==
    # 1000.9999999999999); within that float noise it is the millisecond, else truncate.
    exact = epoch * 1000
    nearest = round(exact)
    noise = 4 * math.ulp(epoch) * 1000
    millis = nearest if abs(exact - nearest) <= noise else math.floor(exact)
    try:
        text = _format_millis(millis)
    except (OverflowError, OSError, ValueError) as exc:
        raise ValueError(f"timestamp {epoch!r} is outside the representable dates") from exc
    if text is None:
        raise ValueError(f"timestamp {epoch!r} is outside years 0000-9999")
    return text


@lru_cache(maxsize=64)
def _format_millis(millis: int) -> str | None:
    """``format_ts`` of a whole millisecond. Cached: a case's events share their milliseconds."""
    seconds, ms = divmod(millis, 1000)
    second = _utc_second(seconds)
    return None if second is None else f"{second}.{ms:03d}Z"


@lru_cache(maxsize=16)
def _utc_second(seconds: int) -> str | None:
    """``YYYY-MM-DDTHH:MM:SS`` in UTC, None outside years 0000-9999; raises what gmtime raises.

    Cached: the thousands of events of a case are written within a few seconds.
    """
    t = time.gmtime(seconds)
    if not 0 <= t.tm_year <= 9999:
        return None
    return (
        f"{t.tm_year:04d}-{t.tm_mon:02d}-{t.tm_mday:02d}"
        f"T{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d}"
    )


def signature_problem(event: Mapping[str, Any]) -> str | None:
    """What is wrong with where ``event`` carries ``signature`` and what it holds, or None.

    The hash leaves ``signature`` out on every event, and the signature covers only the last
    hash: a ``signature`` member anywhere but on ``run_end``, or a member inside it beyond
    ``alg``, ``publicKey`` and ``sig``, would pass as signed while nothing vouches for it.
    The spec allows neither (only run_end may carry one, and the block has those three).
    """
    if SIGNATURE_KEY not in event:
        return None
    kind = event.get("type")
    if kind != "run_end":
        return f"only run_end may carry a signature, found one on {_quoted(kind)}"
    block = event[SIGNATURE_KEY]
    if type(block) is dict and not block.keys() <= SIGNATURE_MEMBERS:
        extra = ", ".join(_quoted(key) for key in sorted(block.keys() - SIGNATURE_MEMBERS))
        expected = ", ".join(sorted(SIGNATURE_MEMBERS))
        return f"signature holds {extra}, which no signature covers (expected only {expected})"
    return None


def _quoted(value: object) -> str:
    # Text from the receipt, for a message: escaped and short.
    text = json.dumps(value, ensure_ascii=False) if type(value) is str else type(value).__name__
    return text if len(text) <= 80 else text[:77] + "..."


def event_hash(event: Mapping[str, Any], *, codepoint: bool = False) -> str:
    """SHA-256 hex of the canonical JSON of ``event`` minus ``hash`` and ``signature``.

    ``codepoint=True`` sorts keys by code point (the spec's wording) instead of UTF-16 code units
    (the reference's behaviour); only the verifier's fallback uses it.
    """
    if any(key in event for key in _NOT_HASHED):
        event = {key: value for key, value in event.items() if key not in _NOT_HASHED}
    dumps = canonjson.dumps_codepoint if codepoint else canonjson.dumps
    return hashlib.sha256(dumps(event).encode("utf-8")).hexdigest()


@lru_cache(maxsize=64)
def _type_json(type: str) -> str:
    # A receipt has a handful of event types and thousands of events.
    return canonjson.dumps(type)


class EventText:
    """The canonical text of one standard event, split where ``hash``/``signature`` go.

    Canonical key order of the envelope is ``data, hash, prev, seq, signature, ts, type, v``
    (all ASCII, so UTF-16 and code-point order agree). The hashed text lacks ``hash`` and
    ``signature``; the line adds them at their sorted places, reusing the same pieces.
    """

    __slots__ = ("_data_json", "_middle", "_tail")

    # f-strings: each text is built in one allocation, not one per ``+``.
    def __init__(self, *, seq: int, ts: str, type: str, data_json: str, prev: str) -> None:
        self._data_json = data_json
        self._middle = f'"prev":"{prev}","seq":{seq!s},'
        self._tail = f'"ts":"{ts}","type":{_type_json(type)},"v":"0"}}'

    def hashed_text(self) -> str:
        """The canonical JSON of the event without ``hash`` and ``signature``."""
        return f'{{"data":{self._data_json},{self._middle}{self._tail}'

    def digest(self) -> str:
        text = f'{{"data":{self._data_json},{self._middle}{self._tail}'
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def line(self, hash_hex: str, signature: Mapping[str, Any] | None = None) -> str:
        """The file line: canonical JSON of the whole event, newline-terminated."""
        signed = "" if signature is None else f'"signature":{canonjson.dumps(signature)},'
        return (
            f'{{"data":{self._data_json},"hash":"{hash_hex}",{self._middle}{signed}{self._tail}\n'
        )


def unsigned_event(*, seq: int, ts: str, type: str, data_json: str, prev: str) -> tuple[str, bytes]:
    """``(hash, line)`` of an event without ``signature``, the line UTF-8 encoded.

    What ``EventText``'s ``digest()`` and ``line(hash)`` give, in one call: the writer makes
    one of these per tool call, thousands per case.
    """
    middle = f'"prev":"{prev}","seq":{seq!s},'
    tail = f'"ts":"{ts}","type":{_type_json(type)},"v":"0"}}'
    hashed = f'{{"data":{data_json},{middle}{tail}'
    hash_hex = hashlib.sha256(hashed.encode("utf-8")).hexdigest()
    line = f'{{"data":{data_json},"hash":"{hash_hex}",{middle}{tail}\n'
    return hash_hex, line.encode("utf-8")
