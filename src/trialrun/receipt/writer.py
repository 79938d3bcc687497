"""``ReceiptWriter``: appends hash-chained Run Receipt v0 events to a new JSONL file.

The writer sits on the hot path of every tool call, so each event costs one canonical
serialization of its data (hashed, then reused for the line) and one unbuffered ``write``.
Every string in ``data`` is redacted (``trialrun.base.redact``) before it is hashed: a secret never
reaches the file, and the chain covers what is on disk. A ``tool_call`` event says whether
anything was removed in ``data.redacted``.

Failure modes are chosen so that a receipt never claims more than happened:

* the file is created with ``O_EXCL``: an existing receipt is never overwritten or appended to;
* a run that crashes (an exception inside ``with``) or is never ``close()``d has no ``run_end``,
  so it verifies as ``truncated``;
* after ``run_end`` (or a failed write, which may have left half a line) nothing more is written.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, NamedTuple

from trialrun.base import canonjson
from trialrun.base.redact import (
    holds_nothing_to_redact,
    json_holds_nothing_to_redact,
    redact_changed,
)
from trialrun.errors import ReceiptError
from trialrun.receipt.envelope import (
    SPEC_VERSION,
    ZERO_HASH,
    EventText,
    format_ts,
    unsigned_event,
)

if TYPE_CHECKING:
    from trialrun.receipt.signing import Ed25519Signer

__all__ = ["EncodedData", "ReceiptWriter"]

_OPEN_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | getattr(os, "O_BINARY", 0)


class EncodedData(NamedTuple):
    """Event data with the canonical JSON its caller already wrote, for ``emit_each``.

    ``data_json`` must be ``canonjson.dumps(data)`` (for a ``tool_call``, with ``redacted`` a
    bool in ``data``): the text written when it provably holds nothing to redact. Otherwise
    ``data`` is redacted and written as any other data is.
    """

    data_json: str
    data: dict[str, Any]


class ReceiptWriter:
    """Writes one receipt: ``emit`` a ``run_start`` and the run's events, then ``close``."""

    def __init__(
        self,
        path: Path,
        *,
        signer: Ed25519Signer | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._path = Path(path)
        self._signer = signer
        self._clock = clock
        self._seq = 0
        self._last_hash = ZERO_HASH
        self._ended = False
        self._broken: str | None = None
        self._batched: list[bytes] | None = None
        """Lines emitted inside ``batch()``, not written yet."""
        try:
            self._path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ReceiptError(
                f"cannot create the receipt {self._path}: its directory cannot be made "
                f"({exc.strerror or exc})"
            ) from exc
        try:
            self._fd: int | None = os.open(self._path, _OPEN_FLAGS, 0o666)
        except FileExistsError:
            raise ReceiptError(
                f"refusing to overwrite the existing receipt {self._path}: "
                "a receipt is written once; choose a new path"
            ) from None
        except OSError as exc:
            raise ReceiptError(f"cannot create the receipt {self._path}: {exc.strerror}") from exc

    @property
    def path(self) -> Path:
        return self._path

    @property
    def seq(self) -> int:
        """The seq the next event gets, which is also the number of events written."""
        return self._seq

    @property
    def last_hash(self) -> str:
        """The hash of the last event written (64 zeros before the first)."""
        return self._last_hash

    @property
    def ended(self) -> bool:
        """Whether ``run_end`` has been written."""
        return self._ended

    def emit(self, type: str, data: Mapping[str, Any]) -> dict[str, Any]:
        """Append one event and return it as written (with its redacted data and hash).

        The returned data is a copy; where redaction had nothing to change, the values inside it
        may be the caller's own objects.
        """
        if type == "run_end":
            raise ReceiptError(
                f"{self._path}: run_end is written by close(), which also signs it; "
                "emit() takes the other event types"
            )
        return self._append(type, data, sign=False)

    def emit_each(self, type: str, datas: Iterable[Mapping[str, Any] | EncodedData]) -> None:
        """``emit(type, data)`` for each of ``datas`` in turn, without returning the events.

        For the thousands of tool calls of a case: the checks that do not depend on the data
        are made once, and each event costs no more calls than its text needs. An
        ``EncodedData`` whose text provably holds nothing to redact is written as it is. A
        failure stops where ``emit`` would have stopped, with the events before it written.
        """
        if type == "run_end" or not isinstance(type, str) or not type:
            for item in datas:
                self.emit(type, item.data if isinstance(item, EncodedData) else item)  # raises
            return
        for item in datas:
            data_json: str | None = None
            data: Mapping[str, Any]
            if isinstance(item, EncodedData):
                data_json, data = item
                if not json_holds_nothing_to_redact(data_json):
                    data_json = None
            else:
                data = item
            if self._seq == 0 or self._ended or self._broken is not None or self._fd is None:
                self._append(type, data, sign=False)  # the first event, or raises
                continue
            if data_json is None:
                data_json = self._data_json(type, data)
            hash_hex, line = unsigned_event(
                seq=self._seq,
                ts=format_ts(self._clock()),
                type=type,
                data_json=data_json,
                prev=self._last_hash,
            )
            if self._batched is not None:
                self._batched.append(line)
            else:
                self._write(line, self._seq)
            self._seq += 1
            self._last_hash = hash_hex

    def _data_json(self, type: str, data: Mapping[str, Any]) -> str:
        """The canonical JSON of ``data`` redacted, for ``emit_each``; raises as ``emit`` does."""
        if data.__class__ is not dict:
            if not isinstance(data, Mapping):
                self._append(type, data, sign=False)  # raises
            data = dict(data)
        try:
            return _redacted(type, data)[1]
        except (TypeError, ValueError, RecursionError) as exc:
            raise ReceiptError(
                f"{self._path}: data of the {type} event at seq {self._seq} is not JSON: {exc}"
            ) from exc

    def close(self, data: Mapping[str, Any]) -> dict[str, Any]:
        """Write ``run_end`` (signed when the writer has a signer) and close the file."""
        assert self._batched is None, "run_end is written outside a batch"
        event = self._append("run_end", data, sign=True)
        self._release(sync=True)
        return event

    def abandon(self) -> None:
        """Close the file without ``run_end``: the receipt stays truncated, as after a crash."""
        self._release(sync=False)

    def __enter__(self) -> ReceiptWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        # Never write run_end on the way out: only an explicit close() may say the run ended.
        self._release(sync=False)

    def _append(self, type: str, data: Mapping[str, Any], *, sign: bool) -> dict[str, Any]:
        if self._ended or self._broken is not None or self._fd is None:
            self._check_writable(type)  # raises
        if not isinstance(type, str) or not type:
            raise ReceiptError(
                f"{self._path}: event type must be a non-empty string, found {type!r}"
            )
        if data.__class__ is not dict and not isinstance(data, Mapping):  # ABC checks are slow
            raise ReceiptError(
                f"{self._path}: data of a {type} event must be a mapping, found {_type_name(data)}"
            )
        if self._seq == 0 and type != "run_start":
            raise ReceiptError(f"{self._path}: the first event must be run_start, found {type}")
        try:
            clean, data_json = _redacted(type, data if data.__class__ is dict else dict(data))
        except (TypeError, ValueError, RecursionError) as exc:
            raise ReceiptError(
                f"{self._path}: data of the {type} event at seq {self._seq} is not JSON: {exc}"
            ) from exc
        ts = format_ts(self._clock())
        text = EventText(seq=self._seq, ts=ts, type=type, data_json=data_json, prev=self._last_hash)
        hash_hex = text.digest()
        signature = self._signer.sign(hash_hex) if sign and self._signer is not None else None
        line = text.line(hash_hex, signature).encode("utf-8")
        if self._batched is not None:
            self._batched.append(line)
        else:
            self._write(line, self._seq)
        event: dict[str, Any] = {
            "v": SPEC_VERSION,
            "seq": self._seq,
            "ts": ts,
            "type": type,
            "data": clean,
            "prev": self._last_hash,
            "hash": hash_hex,
        }
        if signature is not None:
            event["signature"] = signature
        self._seq += 1
        self._last_hash = hash_hex
        if type == "run_end":
            self._ended = True
        return event

    def _check_writable(self, type: str) -> None:
        if self._ended:
            raise ReceiptError(
                f"{self._path}: cannot write {type}: the receipt already ended with run_end "
                f"at seq {self._seq - 1}"
            )
        if self._broken is not None:
            raise ReceiptError(f"{self._path}: cannot write {type}: {self._broken}")
        if self._fd is None:
            raise ReceiptError(
                f"{self._path}: cannot write {type}: the writer was closed without run_end "
                "(the receipt is truncated)"
            )

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Write the lines of the events emitted inside with one ``write`` when it ends.

        A case's thousands of tool calls then cost one system call, not one each. The events
        are numbered and chained as they are emitted; the ones emitted before an exception
        inside are still written. A failed write breaks the receipt from the first of them on,
        as a failed single write does. Batches do not nest.
        """
        assert self._batched is None, "receipt batches do not nest"
        self._batched = []
        first_seq = self._seq
        try:
            yield
        finally:
            lines, self._batched = self._batched, None
            if lines and self._fd is not None:
                self._write(b"".join(lines), first_seq)

    def _write(self, payload: bytes, seq: int) -> None:
        """Write ``payload``, the line(s) of the events from ``seq`` on."""
        assert self._fd is not None  # _check_writable ran first
        view = memoryview(payload)
        try:
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
        except OSError as exc:
            # Part of the line may be on disk: appending more would hide where it broke.
            self._broken = f"an earlier write failed at seq {seq} ({exc.strerror})"
            self._release(sync=False)
            raise ReceiptError(
                f"{self._path}: writing the event at seq {seq} failed: {exc.strerror}"
            ) from exc

    def _release(self, *, sync: bool) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            if sync:
                os.fsync(fd)
        except OSError as exc:
            raise ReceiptError(
                f"{self._path}: flushing the receipt failed: {exc.strerror}"
            ) from exc
        finally:
            os.close(fd)


def _redacted(type: str, data: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """A redacted copy of ``data`` (``tool_call``: with ``redacted`` set) and its canonical JSON.

    Most events hold no secret: when that is proven the copy is shallow. Raises what
    ``canonjson.dumps`` raises on data that is not JSON.
    """
    if holds_nothing_to_redact(data):
        clean, changed = dict(data), False
    else:
        clean, changed = redact_changed(data)  # a deep copy
    if type == "tool_call":
        clean["redacted"] = changed or clean.get("redacted") is True
    return clean, canonjson.dumps(clean)


def _type_name(value: object) -> str:
    return type(value).__name__
