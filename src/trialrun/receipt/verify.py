"""Verify a Run Receipt v0: hash chain, completeness and the optional Ed25519 signature.

Verdicts, their order and messages are the reference verifier's (conformance README "Facts",
``expected.json``). Where the reference throws or reads the whole file, this one returns a
verdict: a number overflowing a double (``1e400``) or nesting too deep is ``invalid_event``, an
integer too long for Python's parser or a line over ``MAX_LINE_BYTES`` (never read into memory:
memory stays constant) is ``invalid_json``. Bytes that are not UTF-8 become U+FFFD, as in Node.
A chain hashed with keys in code-point order (the spec's wording) also verifies when the whole
chain agrees on that one order; the result then says ``key_order == "codepoint"``. After the chain
breaks, the rest of the file is read without verifying it, for two facts the reference's result
leaves out: whether the file is a receipt at all (``input_error``) and whether its run_end carries
a signature (present, not checked). Stricter than the reference, which verifies them though no
hash or signature covers what they add: a key held twice in an object is ``invalid_json``; a
``signature`` on an event other than run_end, or a member in it beyond alg/publicKey/sig, is
``invalid_event``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, BinaryIO, Final, Literal, get_args

from trialrun.base import canonjson
from trialrun.base.jsonnames import json_type
from trialrun.base.jsonnumbers import refuse_constant
from trialrun.base.redact import redact_text
from trialrun.base.signedjson import DuplicateKeyError
from trialrun.receipt.envelope import SIGNATURE_KEY, ZERO_HASH, signature_problem
from trialrun.receipt.linehash import EventHasher

__all__ = [
    "REASONS",
    "KeyOrder",
    "Reason",
    "SignatureResult",
    "Status",
    "VerifyResult",
    "verify_receipt",
]

Reason = Literal[
    "unreadable",
    "empty",
    "invalid_json",
    "invalid_event",
    "seq_mismatch",
    "prev_mismatch",
    "hash_mismatch",
    "bad_first_event",
    "event_after_run_end",
    "truncated",
    "bad_signature",
    "unsigned",
    "untrusted_key",
]
REASONS: Final[tuple[Reason, ...]] = get_args(Reason)
KeyOrder = Literal["utf16", "codepoint"]
Status = Literal["verified", "incomplete", "unsigned", "untrusted", "tampered", "invalid"]
"""What a verdict means to whoever acts on it (the reason says why, in the reference's words)."""

MAX_LINE_BYTES = 64 * 1024 * 1024
_READ_BUFFER_BYTES = 1 << 20
_MESSAGE_VALUE_CHARS = 200

_HEX_DIGITS = "0123456789abcdef"
_SEQ_LIMIT = 2**63
_DOUBLE_OVERFLOW = 2**1024


class _Absent:
    """Marks a member that is not there (JavaScript's ``undefined``)."""


_ABSENT: Final = _Absent()


@dataclass(frozen=True)
class SignatureResult:
    present: bool
    valid: bool | None = None
    public_key: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"present": self.present}
        if self.valid is not None:
            out["valid"] = self.valid
        if self.public_key is not None:
            out["publicKey"] = self.public_key
        return out


@dataclass(frozen=True)
class VerifyResult:
    ok: bool
    event_count: int
    first_bad_seq: int | None
    reason: Reason | None
    message: str
    signature: SignatureResult
    last_hash: str | None
    key_order: KeyOrder | None
    input_error: str | None = None
    """Why the input is no receipt at all, or None when it is one (valid or not).

    Set when the file cannot be read, is empty, or none of its lines has the shape of a Run
    Receipt v0 event. ``reason`` and ``message`` stay the reference's either way; this tells a
    caller to treat the input as invalid (exit 2), not as a receipt that fails (exit 1). One
    event-shaped line makes a file a receipt: garbage on its other lines is tampering. Not part
    of ``to_json``, which is the reference's object.
    """

    @property
    def status(self) -> Status:
        """``verified``; ``incomplete`` when the chain is intact but has no run_end (a crash, an
        interrupt, a cut tail: nothing in it was changed); ``unsigned`` or ``untrusted`` when a
        required or pinned signature is missing or not the expected key's; ``invalid`` when the
        input is no receipt at all (``input_error``); else ``tampered`` (tampered with or
        invalid: the receipt holds something its chain or signature does not vouch for)."""
        if self.ok:
            return "verified"
        if self.input_error is not None:
            return "invalid"
        return _STATUS_OF.get(self.reason, "tampered")

    def to_json(self) -> dict[str, Any]:
        """The reference verifier's result object (``keyOrder`` only when it is "codepoint")."""
        out: dict[str, Any] = {"ok": self.ok, "eventCount": self.event_count}
        if self.first_bad_seq is not None:
            out["firstBadSeq"] = self.first_bad_seq
        if self.reason is not None:
            out["reason"] = self.reason
        out["message"] = self.message
        out["signature"] = self.signature.to_json()
        if self.last_hash is not None:
            out["lastHash"] = self.last_hash
        if self.key_order == "codepoint":
            out["keyOrder"] = self.key_order
        return out


def verify_receipt(
    source: str | Path | BinaryIO,
    *,
    public_key: str | None = None,
    require_signature: bool = False,
) -> VerifyResult:
    """Verify a receipt file (path) or binary stream; never raises.

    ``public_key`` pins the signer (PEM SPKI text or base64 SPKI DER) and, like
    ``require_signature``, makes an unsigned receipt fail.
    """
    if isinstance(source, str | Path):
        try:
            stream = open(source, "rb", buffering=_READ_BUFFER_BYTES)  # noqa: SIM115
        except (OSError, ValueError) as exc:
            return _unreadable(str(source), exc, 0)
        with stream:
            return _verify_stream(stream, str(source), public_key, require_signature)
    name = str(getattr(source, "name", "<stream>"))
    return _verify_stream(source, name, public_key, require_signature)


def _verify_stream(
    stream: BinaryIO, name: str, pinned_key: str | None, require_signature: bool
) -> VerifyResult:
    readline, limit = stream.readline, MAX_LINE_BYTES
    hasher = EventHasher()
    parse = hasher.parse
    prev = ZERO_HASH
    count = 0  # events verified so far, which is also the seq the next line must carry
    signature: object = _ABSENT
    seen_run_end = False
    failure: VerifyResult | None = None
    raw = b""
    while True:
        try:
            raw = readline(limit + 1)
        except (OSError, ValueError) as exc:
            return _unreadable(name, exc, count)
        if not raw:
            break
        if type(raw) is not bytes:
            return _unreadable(name, TypeError("expected a binary stream, got text"), count)
        if len(raw) > limit and raw[-1] != 0x0A:
            too_long = f": longer than {limit} bytes"
            failure = _fail(count, "invalid_json", _NOT_JSON.format(count + 1, count) + too_long)
            break
        text = raw.decode("utf-8", "replace")
        try:
            event = parse(text)
        except DuplicateKeyError as exc:
            # The hash covers the last value only; a reader keeping the first sees unsigned data.
            message = f"{_NOT_JSON.format(count + 1, count)}: {exc}"
            failure = _fail(count, "invalid_json", message)
            break
        except (ValueError, RecursionError):
            failure = _fail(count, "invalid_json", _NOT_JSON.format(count + 1, count))
            break
        if type(event) is not dict:
            failure = _fail(count, "invalid_event", _NOT_OBJECT.format(count + 1, count))
            break
        stored_hash: str = event.get("hash", "")
        try:
            usual_shape = (
                event["v"] == "0"
                and type(event["seq"]) is int
                and type(event["ts"]) is str
                and type(event["type"]) is str
                and type(event["data"]) is dict
                and (event["prev"] == prev or _is_hex64(event["prev"]))
                and _is_hex64(stored_hash)
                and -_SEQ_LIMIT < event["seq"] < _SEQ_LIMIT
                and SIGNATURE_KEY not in event
            )
        except KeyError:
            usual_shape = False
        if not usual_shape:
            # Not the usual shape: name the first problem exactly as the reference does, then
            # what the reference lets through: a signature where nothing checks it.
            problem = _shape_problem(event) or signature_problem(event)
            if problem is not None:
                failure = _fail(count, "invalid_event", f"Event at seq {count}: {problem}")
                break
        if seen_run_end:
            failure = _fail(count, "event_after_run_end", f"Event at seq {count} follows run_end")
            break
        if event["seq"] != count:
            failure = _fail(count, "seq_mismatch", _SEQ.format(count, _js_text(event["seq"])))
            break
        if event["prev"] != prev:
            failure = _fail(count, "prev_mismatch", _PREV.format(count, count - 1))
            break
        del event["hash"]
        event_signature = event.pop("signature", _ABSENT)
        try:
            matches = hasher.matches(event, stored_hash, raw, text)
        except (ValueError, TypeError, OverflowError, RecursionError) as exc:
            failure = _fail(
                count, "invalid_event", f"Event at seq {count}: cannot be hashed: {exc}"
            )
            break
        if not matches:
            failure = _fail(count, "hash_mismatch", _HASH.format(count))
            break
        if count == 0 and event["type"] != "run_start":
            failure = _fail(0, "bad_first_event", f"seq 0 must be run_start, found {event['type']}")
            break
        prev = stored_hash
        count += 1
        if event["type"] == "run_end":
            seen_run_end = True
            signature = event_signature
    if failure is not None:
        return _look_past_break(failure, readline, raw, signature)
    if count == 0:
        empty = _fail(0, "empty", "Receipt is empty: expected a run_start event at seq 0")
        return replace(empty, input_error=f"{_NOT_A_RECEIPT} an empty file")
    key_order: KeyOrder = "utf16" if hasher.utf16_ok else "codepoint"
    if not seen_run_end:
        message = _TRUNCATED.format(count - 1)
        return VerifyResult(False, count, count, "truncated", message, _UNSIGNED, prev, key_order)
    want = require_signature or pinned_key is not None
    return _check_signature(signature, count, prev, key_order, pinned_key, want)


# The reference verifier's messages, word for word.
_NOT_JSON = "Line {} (seq {}) is not valid JSON"
_NOT_OBJECT = "Line {} (seq {}) is not a JSON object"
_SEQ = "Expected seq {} but found seq {}: events were reordered, or one was deleted or inserted"
_PREV = "seq {}: prev does not match the hash of seq {}: the previous event was changed or removed"
_HASH = "seq {}: hash does not match the event content: the event was edited"
_TRUNCATED = "No run_end event after seq {}: the receipt is truncated or the run did not finish"


def _shape_problem(event: dict[str, Any]) -> str | None:
    version = event.get("v", _ABSENT)
    if version != "0":
        return f"unsupported version {_js_text(version)}"
    if not _is_integer(event.get("seq")):
        return "seq is not an integer"
    if type(event.get("ts")) is not str:
        return "ts is not a string"
    if type(event.get("type")) is not str:
        return "type is not a string"
    if type(event.get("data")) is not dict:
        return "data is not an object"
    for member in ("prev", "hash"):
        value = event.get(member)
        if not _is_hex64(value):
            return f"{member} is not a sha256 hex string"
    return None


def _is_hex64(value: object) -> bool:
    return type(value) is str and len(value) == 64 and not value.strip(_HEX_DIGITS)


def _is_integer(value: object) -> bool:
    # JavaScript has one number type: 3.0 is an integer, true is not, 1e400 is Infinity.
    if type(value) is float:
        return value.is_integer()
    return type(value) is int and abs(value) < _DOUBLE_OVERFLOW


def _check_signature(
    signature: object, count: int, last_hash: str, order: KeyOrder, pinned: str | None, want: bool
) -> VerifyResult:
    def verdict(reason: Reason | None, message: str, result: SignatureResult) -> VerifyResult:
        bad_seq = None if reason is None else count - 1
        ok = reason is None
        return VerifyResult(ok, count, bad_seq, reason, message, result, last_hash, order)

    if isinstance(signature, _Absent):
        if want:
            message = "Receipt has no signature but one is required"
            return verdict("unsigned", message, SignatureResult(False))
        message = f"Chain intact, {count} events, run complete (unsigned)"
        return verdict(None, message, SignatureResult(False))
    if (
        type(signature) is not dict
        or signature.get("alg") != "ed25519"
        or type(signature.get("publicKey")) is not str
        or type(signature.get("sig")) is not str
    ):
        message = "run_end signature block is malformed"
        return verdict("bad_signature", message, SignatureResult(True, False))
    from trialrun.receipt.signing import check_signature, load_public_key

    embedded_key: str = signature["publicKey"]
    if not check_signature(signature, last_hash):
        message = "Signature does not verify against the last hash"
        return verdict("bad_signature", message, SignatureResult(True, False, embedded_key))
    signed = SignatureResult(True, True, embedded_key)
    if pinned is not None:
        try:
            trusted = load_public_key(pinned)
        except Exception:  # any unusable pinned key gets the same verdict
            message = "The expected public key could not be parsed"
            return verdict("untrusted_key", message, signed)
        if trusted != embedded_key:
            message = "Signature is valid but the signing key is not the expected key"
            return verdict("untrusted_key", message, signed)
    return verdict(None, f"Chain intact, {count} events, run complete, signature valid", signed)


_UNSIGNED: Final = SignatureResult(False)
_STATUS_OF: Final[dict[Reason | None, Status]] = {
    "truncated": "incomplete",
    "unsigned": "unsigned",
    "untrusted_key": "untrusted",
}


def _fail(seq: int, reason: Reason, message: str) -> VerifyResult:
    # Every failure inside the chain happens at the line after the last verified event.
    return VerifyResult(False, seq, seq, reason, message, _UNSIGNED, None, None)


def _unreadable(name: str, exc: BaseException, count: int) -> VerifyResult:
    detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    where = f" after line {count}" if count else ""
    result = _fail(count, "unreadable", f"Cannot read {name}: {detail}")
    return replace(result, input_error=f"cannot read the receipt{where}: {detail}")


_NOT_A_RECEIPT = "expected a Run Receipt v0 file (JSON Lines, one event per line), found"
_ENVELOPE = ("v", "seq", "ts", "type", "data", "prev", "hash")


def _look_past_break(
    failure: VerifyResult, readline: Callable[[int], bytes], raw: bytes, signature: object
) -> VerifyResult:
    """Read on after the chain broke at ``raw``, verifying nothing, in constant memory.

    The reference stops at the first bad line, so it cannot tell a tampered signed receipt from
    an unsigned one, nor a receipt with a garbage line from a file that is no receipt at all.
    Two facts from the rest of the file settle that: whether any line is event-shaped, and
    whether a run_end line carries a signature (reported as present and not checked).
    """
    first_line = raw
    is_receipt = failure.event_count > 0
    while raw:
        is_receipt = is_receipt or _is_event_shaped(raw)
        if isinstance(signature, _Absent) and b"signature" in raw:
            signature = _run_end_signature(raw)
        if is_receipt and not isinstance(signature, _Absent):
            break
        try:
            raw = readline(MAX_LINE_BYTES + 1)
        except (OSError, ValueError):
            break  # what was read so far still decides; the verdict is the chain's anyway
        if type(raw) is not bytes:
            break
    if not is_receipt:
        found = f"no event on any line ({_first_line_problem(first_line)})"
        return replace(failure, input_error=f"{_NOT_A_RECEIPT} {found}")
    if isinstance(signature, _Absent):
        return failure
    claimed = signature.get("publicKey") if type(signature) is dict else None
    unchecked = SignatureResult(True, None, claimed if type(claimed) is str else None)
    return replace(failure, signature=unchecked)


def _parse_line(raw: bytes) -> Any:
    """The JSON value of one line, or None when it is not JSON (nor a line worth parsing)."""
    if len(raw) > MAX_LINE_BYTES or raw.lstrip(b" \t\r\n")[:1] != b"{":
        return None  # an event line is an object: skip the parser for anything else
    try:
        return STRICT_JSON.decode(raw.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        return None


def _is_event_shaped(raw: bytes) -> bool:
    event = _parse_line(raw)
    return type(event) is dict and _shape_problem(event) is None


def _run_end_signature(raw: bytes) -> object:
    event = _parse_line(raw)
    if type(event) is not dict or event.get("type") != "run_end":
        return _ABSENT
    return event.get("signature", _ABSENT)


def _first_line_problem(raw: bytes) -> str:
    """What line 1 is instead of an event, in words (no line of the file is one)."""
    try:
        value = STRICT_JSON.decode(raw[:MAX_LINE_BYTES].decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        return "line 1 is not JSON"
    if type(value) is not dict:
        return f"line 1 is a JSON {json_type(value)}"
    missing = [member for member in _ENVELOPE if member not in value]
    if missing:
        return f"line 1 is a JSON object without {', '.join(missing)}"
    return f"line 1: {_shape_problem(value)}"


# Parses as JSON.parse does: the same grammar, and NaN/Infinity refused (JSON.parse refuses them;
# Python's parser accepts them unless told not to). 1e400 reads as infinity, as it does there.
STRICT_JSON: Final = json.JSONDecoder(parse_constant=refuse_constant)


def _js_text(value: object) -> str:
    """``JSON.stringify`` of a parsed value for a message, cut to a readable length."""
    if isinstance(value, _Absent):
        return "undefined"
    try:
        text = canonjson.dumps(value) if type(value) not in (dict, list) else json.dumps(value)
    except (ValueError, RecursionError):
        text = "null"
    text = redact_text(text)
    return text if len(text) <= _MESSAGE_VALUE_CHARS else text[:_MESSAGE_VALUE_CHARS] + "..."
