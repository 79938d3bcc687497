"""verify_receipt: the reference's verdicts on every vector, tamper detection, hostile input."""

from __future__ import annotations

import io
import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from trialrun.base import canonjson
from trialrun.receipt import verify as verify_module
from trialrun.receipt.envelope import ZERO_HASH, event_hash, format_ts
from trialrun.receipt.signing import Ed25519Signer
from trialrun.receipt.verify import REASONS, VerifyResult, verify_receipt
from trialrun.receipt.writer import ReceiptWriter

Event = tuple[str, dict[str, Any]]

RUN_START: Event = (
    "run_start",
    {
        "goal": "demo",
        "verifyCommand": "pytest -q",
        "repoHead": None,
        "branch": "main",
        "tool": {"name": "trialrun", "version": "0"},
    },
)
RUN_END: Event = (
    "run_end",
    {
        "stopReason": "verified",
        "verified": True,
        "totals": {"attempts": 1, "totalTokens": 10, "costUsd": 0.25, "filesChanged": 0},
    },
)
TOOL_CALL: Event = (
    "tool_call",
    {
        "attempt": 1,
        "name": "read_file",
        "argsSummary": 'path="a.py"',
        "redacted": False,
        "durationMs": 3,
        "ok": True,
    },
)


def chain_events(events: list[Event], *, codepoint: bool = False) -> list[dict[str, Any]]:
    """The events of a correctly chained receipt (hashes in the given key order)."""
    chained, prev = [], ZERO_HASH
    for seq, (kind, data) in enumerate(events):
        event = {
            "v": "0",
            "seq": seq,
            "ts": format_ts(1_767_225_600 + seq),
            "type": kind,
            "data": data,
            "prev": prev,
        }
        prev = event["hash"] = event_hash(event, codepoint=codepoint)
        chained.append(event)
    return chained


def receipt_bytes(events: list[dict[str, Any]], *, codepoint: bool = False) -> bytes:
    dumps = canonjson.dumps_codepoint if codepoint else canonjson.dumps
    return "".join(dumps(event) + "\n" for event in events).encode("utf-8")


def build(*middle: Event, codepoint: bool = False) -> bytes:
    events = chain_events([RUN_START, *middle, RUN_END], codepoint=codepoint)
    return receipt_bytes(events, codepoint=codepoint)


def check(data: bytes, **options: Any) -> VerifyResult:
    return verify_receipt(io.BytesIO(data), **options)


# ---- conformance vectors ----------------------------------------------------------------


def test_every_conformance_vector_gives_the_reference_result(conformance: Path) -> None:
    entries = json.loads((conformance / "expected.json").read_text(encoding="utf-8"))
    compared, mismatches = 0, []
    for entry in entries:
        for expected in entry["checks"]:
            opts = expected["opts"]
            options: dict[str, Any] = {}
            if opts == "--require-signature":
                options["require_signature"] = True
            elif opts.startswith("--pubkey "):
                pem = (conformance / opts.split()[1]).read_text(encoding="utf-8")
                options["public_key"] = pem
            else:
                assert opts == "(none)", f"unknown option in expected.json: {opts}"
            got = verify_receipt(conformance / entry["file"], **options).to_json()
            compared += 1
            if got != expected["result"]:
                mismatches.append((entry["file"], opts, got, expected["result"]))
    assert compared == 21  # every (file, options) pair of expected.json
    assert mismatches == []


def test_a_binary_stream_gives_the_same_verdict_as_the_path(conformance: Path) -> None:
    path = conformance / "tamper-edited-field.jsonl"
    with path.open("rb") as stream:
        assert verify_receipt(stream) == verify_receipt(path)


def test_an_attacker_signature_is_valid_but_untrusted_when_a_key_is_pinned(
    conformance: Path, tmp_path: Path
) -> None:
    receipt = tmp_path / "receipt.jsonl"
    with ReceiptWriter(receipt, signer=Ed25519Signer.from_seed(b"\x02" * 32)) as writer:
        writer.emit(*RUN_START)
        writer.close(RUN_END[1])
    assert verify_receipt(receipt).ok
    signer_pem = (conformance / "test-key-signer.pub.pem").read_text(encoding="utf-8")
    pinned = verify_receipt(receipt, public_key=signer_pem)
    assert (pinned.ok, pinned.reason, pinned.first_bad_seq) == (False, "untrusted_key", 1)
    assert pinned.message == "Signature is valid but the signing key is not the expected key"
    assert pinned.signature.valid is True
    attacker_pem = (conformance / "test-key-attacker.pub.pem").read_text(encoding="utf-8")
    assert verify_receipt(receipt, public_key=attacker_pem).ok


def test_the_writer_and_the_verifier_agree(conformance: Path, tmp_path: Path) -> None:
    receipt = tmp_path / "receipt.jsonl"
    with ReceiptWriter(receipt, signer=Ed25519Signer.from_seed(b"\x01" * 32)) as writer:
        writer.emit(*RUN_START)
        writer.emit("tool_call", {**TOOL_CALL[1], "argsSummary": "token=sk-" + "a" * 30})
        writer.emit("custom_probe", {"text": "é \u2028 \U0001f600", "n": [1e21, 1e-7, 2**64]})
        writer.close(RUN_END[1])
    pem = (conformance / "test-key-signer.pub.pem").read_text(encoding="utf-8")
    result = verify_receipt(receipt, public_key=pem, require_signature=True)
    assert result.to_json()["message"] == "Chain intact, 4 events, run complete, signature valid"
    assert result.ok and result.key_order == "utf16" and result.last_hash == writer.last_hash


# ---- every failure path ------------------------------------------------------------------


def test_reasons_are_the_reference_vocabulary() -> None:
    assert len(REASONS) == 13 and "untrusted_key" in REASONS and "truncated" in REASONS


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda e: e.pop("v"), "unsupported version undefined"),
        (lambda e: e.update(v=0), "unsupported version 0"),
        (lambda e: e.update(v="1"), 'unsupported version "1"'),
        (lambda e: e.update(seq=True), "seq is not an integer"),
        (lambda e: e.update(seq=1.5), "seq is not an integer"),
        (lambda e: e.update(seq="1"), "seq is not an integer"),
        (lambda e: e.update(ts=5), "ts is not a string"),
        (lambda e: e.update(type=None), "type is not a string"),
        (lambda e: e.update(data=[1]), "data is not an object"),
        (lambda e: e.update(prev=e["prev"].upper()), "prev is not a sha256 hex string"),
        (lambda e: e.update(hash="ab"), "hash is not a sha256 hex string"),
        (lambda e: e.pop("hash"), "hash is not a sha256 hex string"),
    ],
)
def test_a_malformed_envelope_is_an_invalid_event(change: Any, problem: str) -> None:
    events = chain_events([RUN_START, TOOL_CALL, RUN_END])
    change(events[1])
    result = check(receipt_bytes(events))
    assert (result.reason, result.first_bad_seq, result.event_count) == ("invalid_event", 1, 1)
    assert result.message == f"Event at seq 1: {problem}"
    assert result.last_hash is None and not result.signature.present


def test_an_integral_float_seq_is_an_integer_as_in_javascript() -> None:
    text = build(TOOL_CALL).decode().replace('"seq":1,', '"seq":1.0,', 1)
    assert check(text.encode()).ok


@pytest.mark.parametrize(
    ("line", "reason", "message"),
    [
        ("[1, 2]", "invalid_event", "Line 2 (seq 1) is not a JSON object"),
        ("null", "invalid_event", "Line 2 (seq 1) is not a JSON object"),
        ('{"a": NaN}', "invalid_json", "Line 2 (seq 1) is not valid JSON"),
        ('{"a": -Infinity}', "invalid_json", "Line 2 (seq 1) is not valid JSON"),
        ('{"a": 1} x', "invalid_json", "Line 2 (seq 1) is not valid JSON"),
        ("", "invalid_json", "Line 2 (seq 1) is not valid JSON"),
        ("\x00", "invalid_json", "Line 2 (seq 1) is not valid JSON"),
        ('{"a": "\x01"}', "invalid_json", "Line 2 (seq 1) is not valid JSON"),
        ("[" * 100_000, "invalid_json", "Line 2 (seq 1) is not valid JSON"),
        ("1" * 5000, "invalid_json", "Line 2 (seq 1) is not valid JSON"),
    ],
)
def test_a_line_that_is_not_an_event_is_reported_at_its_seq(
    line: str, reason: str, message: str
) -> None:
    first = build().split(b"\n")[0]
    result = check(first + b"\n" + line.encode() + b"\n")
    assert (result.ok, result.reason, result.message) == (False, reason, message)
    assert (result.event_count, result.first_bad_seq) == (1, 1)


@pytest.mark.parametrize("number", ["1e400", "-1e999", "1" + "0" * 400])
def test_a_number_that_overflows_a_double_is_an_invalid_event_not_a_crash(number: str) -> None:
    events = chain_events([RUN_START, TOOL_CALL, RUN_END])
    line = canonjson.dumps(events[1]).replace('"durationMs":3', '"durationMs":' + number)
    data = receipt_bytes(events[:1]) + line.encode() + b"\n"
    result = check(data)
    assert (result.reason, result.first_bad_seq) == ("invalid_event", 1)
    assert result.message.startswith("Event at seq 1: cannot be hashed")


def test_deep_nesting_inside_data_is_a_verdict_not_a_crash() -> None:
    events = chain_events([RUN_START, RUN_END])
    line = canonjson.dumps(events[1]).replace('"data":{', '"data":{"x":' + "[" * 50_000, 1)
    result = check(receipt_bytes(events[:1]) + line.encode() + b"\n")
    assert result.reason == "invalid_json" and result.first_bad_seq == 1


def test_reading_as_javascript_does_bom_blank_line_crlf_and_no_final_newline() -> None:
    data = build(TOOL_CALL)
    assert check(b"\xef\xbb\xbf" + data).to_json()["message"] == (
        "Line 1 (seq 0) is not valid JSON"
    )
    blank = check(data + b"\n")
    assert (blank.reason, blank.first_bad_seq) == ("invalid_json", 3)
    assert check(data.replace(b"\n", b"\r\n")).ok
    assert check(data[:-1]).ok
    assert check(b" " + data).ok  # leading JSON whitespace is allowed by JSON.parse


def test_an_empty_receipt_and_a_lone_newline() -> None:
    empty = check(b"").to_json()
    assert empty == {
        "ok": False,
        "eventCount": 0,
        "firstBadSeq": 0,
        "reason": "empty",
        "message": "Receipt is empty: expected a run_start event at seq 0",
        "signature": {"present": False},
    }
    assert check(b"\n").reason == "invalid_json"


def test_bytes_that_are_not_utf8_become_replacement_characters() -> None:
    data = build(("custom", {"text": "abc"}))
    assert check(data.replace(b'"abc"', b'"a\xffc"')).reason == "hash_mismatch"
    assert check(data.replace(b'"abc"', b'\xff"abc"')).reason == "invalid_json"


def test_lone_surrogates_and_astral_characters_verify() -> None:
    data = build(("custom", {"lone": "\ud800x\udfff", "pair": "\U0001f600", "\udbff": 1}))
    assert b"\\ud800x\\udfff" in data  # written as escapes, as JSON.stringify does
    assert check(data).ok


def test_unknown_types_and_members_are_hashed_and_accepted() -> None:
    events = chain_events([RUN_START, ("case_start", {"case": "c1", "extra": [None]}), RUN_END])
    events[1]["x-unknown"] = {"kept": True}
    events[1]["hash"] = event_hash(events[1])
    for after in events[2:]:
        after["prev"] = events[1]["hash"]
        after["hash"] = event_hash(after)
    assert check(receipt_bytes(events)).ok


def test_the_first_problem_in_reference_order_wins() -> None:
    events = chain_events([RUN_START, TOOL_CALL, RUN_END])
    events[1]["seq"] = 7
    events[1]["prev"] = "f" * 64
    result = check(receipt_bytes(events))
    assert result.reason == "seq_mismatch"
    assert result.message == (
        "Expected seq 1 but found seq 7: events were reordered, or one was deleted or inserted"
    )
    events[1]["seq"] = 1
    prev_result = check(receipt_bytes(events))
    assert prev_result.message == (
        "seq 1: prev does not match the hash of seq 0: the previous event was changed or removed"
    )


def test_a_line_over_the_limit_is_refused_without_reading_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data = build(("custom", {"blob": "x" * 5000}))
    monkeypatch.setattr(verify_module, "MAX_LINE_BYTES", 1000)
    result = check(data)
    assert (result.reason, result.first_bad_seq) == ("invalid_json", 1)
    assert result.message == "Line 2 (seq 1) is not valid JSON: longer than 1000 bytes"


def test_a_missing_file_a_directory_and_a_text_stream_are_unreadable(tmp_path: Path) -> None:
    missing = verify_receipt(tmp_path / "nope.jsonl")
    assert (missing.reason, missing.event_count, missing.first_bad_seq) == ("unreadable", 0, 0)
    assert missing.message == f"Cannot read {tmp_path / 'nope.jsonl'}: No such file or directory"
    assert verify_receipt(str(tmp_path)).reason == "unreadable"
    assert verify_receipt("bad\x00name").reason == "unreadable"
    text_stream: Any = io.StringIO(build().decode())
    assert verify_receipt(text_stream).reason == "unreadable"


def test_a_read_error_midway_is_unreadable_at_that_seq() -> None:
    class FailingStream(io.BytesIO):
        def readline(self, size: int | None = -1) -> bytes:
            if self.tell() > 0:
                raise OSError(5, "Input/output error")
            return super().readline(size)

    result = verify_receipt(FailingStream(build(TOOL_CALL)))
    assert (result.reason, result.event_count, result.first_bad_seq) == ("unreadable", 1, 1)
    assert result.message.endswith("Input/output error")


def _signed_receipt(signature: object) -> bytes:
    events = chain_events([RUN_START, RUN_END])
    events[-1]["signature"] = signature
    return receipt_bytes(events)


@pytest.mark.parametrize(
    "signature",
    [
        None,
        "sig",
        {"alg": "rsa", "publicKey": "k", "sig": "s"},
        {"alg": "ed25519", "publicKey": 1, "sig": "s"},
        {"alg": "ed25519", "publicKey": "k"},
    ],
)
def test_a_malformed_signature_block(signature: object) -> None:
    result = check(_signed_receipt(signature)).to_json()
    assert result["reason"] == "bad_signature" and result["firstBadSeq"] == 1
    assert result["message"] == "run_end signature block is malformed"
    assert result["signature"] == {"present": True, "valid": False}
    assert result["lastHash"] == chain_events([RUN_START, RUN_END])[-1]["hash"]


def test_garbage_keys_and_signatures_are_bad_signatures_not_crashes() -> None:
    block = {"alg": "ed25519", "publicKey": "!!!", "sig": "AAAA"}
    result = check(_signed_receipt(block))
    assert (result.reason, result.signature.public_key) == ("bad_signature", "!!!")
    assert result.message == "Signature does not verify against the last hash"


def test_a_pinned_key_that_cannot_be_parsed_is_untrusted(conformance: Path) -> None:
    signed = conformance / "valid-signed.jsonl"
    result = verify_receipt(signed, public_key="-----BEGIN PUBLIC KEY-----\nnope\n")
    assert (result.reason, result.message) == (
        "untrusted_key",
        "The expected public key could not be parsed",
    )
    assert result.signature.valid is True


# ---- key order -----------------------------------------------------------------------------

# U+E000 sorts before U+10000 by code point and after it by UTF-16 code units (D800 DC00).
ORDER_SENSITIVE: Event = ("custom", {"\ue000": 1, "\U00010000": 2})


def test_a_code_point_ordered_chain_verifies_and_says_so() -> None:
    data = build(TOOL_CALL, ORDER_SENSITIVE, codepoint=True)
    assert data != build(TOOL_CALL, ORDER_SENSITIVE)
    result = check(data)
    assert result.ok and result.key_order == "codepoint"
    assert result.to_json()["keyOrder"] == "codepoint"
    escaped = data.decode().replace("\ue000", "\\ue000").encode()
    assert check(escaped).key_order == "codepoint"


def test_a_utf16_chain_does_not_mention_key_order() -> None:
    result = check(build(ORDER_SENSITIVE))
    assert result.ok and result.key_order == "utf16" and "keyOrder" not in result.to_json()


def test_a_chain_mixing_both_orders_is_refused() -> None:
    events = chain_events([RUN_START, ORDER_SENSITIVE, ORDER_SENSITIVE, RUN_END])
    events[2]["hash"] = event_hash(events[2], codepoint=True)
    events[3]["prev"] = events[2]["hash"]
    events[3]["hash"] = event_hash(events[3])
    result = check(receipt_bytes(events))
    assert (result.reason, result.first_bad_seq) == ("hash_mismatch", 2)


# ---- properties ----------------------------------------------------------------------------

_text = st.text(st.characters(codec="utf-8", exclude_categories=["Cc"]), max_size=12)
_keys = st.text(st.characters(exclude_categories=["Cc", "Cs"]), max_size=6)
_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _text
    | st.sampled_from(["\ud800", "a\udfffb", "\x1b[0m", "</script>"])
)
_json = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_keys, inner, max_size=4),
    max_leaves=12,
)
_payloads = st.dictionaries(_keys, _json, max_size=5)


@settings(max_examples=150)
@given(payloads=st.lists(_payloads, min_size=0, max_size=4))
def test_any_receipt_built_by_the_canonical_rules_verifies(payloads: list[dict[str, Any]]) -> None:
    # Exercises the verifier's fast path against canonjson on every kind of value.
    result = check(build(*[("custom", payload) for payload in payloads]))
    assert result.ok, result.message


_ascii_payloads = st.dictionaries(
    st.text("abcxyz", min_size=1, max_size=4),
    st.integers(0, 999) | st.text("abc def", max_size=8) | st.booleans(),
    max_size=4,
)
_valid_receipts = st.lists(_ascii_payloads, min_size=1, max_size=5).map(
    lambda payloads: build(*[("tool_call", payload) for payload in payloads])
)


@settings(max_examples=200)
@given(data=_valid_receipts, position=st.integers(min_value=0), new_byte=st.integers(0, 255))
def test_any_single_byte_change_is_detected(data: bytes, position: int, new_byte: int) -> None:
    position %= len(data)
    assume(data[position] != new_byte)
    # The final newline may become other JSON whitespace: the text, not the event, changed.
    assume(not (position == len(data) - 1 and new_byte in b" \t\r"))
    changed = data[:position] + bytes([new_byte]) + data[position + 1 :]
    assert not check(changed).ok


@settings(max_examples=100)
@given(data=_valid_receipts, pick=st.integers(min_value=0))
def test_deleting_any_line_is_detected(data: bytes, pick: int) -> None:
    lines = data.splitlines(keepends=True)
    del lines[pick % len(lines)]
    assert not check(b"".join(lines)).ok


@settings(max_examples=100)
@given(data=_valid_receipts, first=st.integers(min_value=0), second=st.integers(min_value=0))
def test_swapping_any_two_lines_is_detected(data: bytes, first: int, second: int) -> None:
    lines = data.splitlines(keepends=True)
    i, j = first % len(lines), second % len(lines)
    assume(i != j)
    lines[i], lines[j] = lines[j], lines[i]
    assert not check(b"".join(lines)).ok


@settings(max_examples=100)
@given(data=_valid_receipts, cut=st.integers(min_value=0))
def test_any_truncation_is_detected(data: bytes, cut: int) -> None:
    # Cutting only the final newline leaves every event intact, so stop before it.
    truncated = data[: cut % (len(data) - 1)]
    assert not check(truncated).ok


@settings(max_examples=300)
@given(
    junk=st.binary(max_size=300)
    | st.lists(st.sampled_from([b"{", b"}", b'"v":"0"', b",", b"\n", b"1e999", b"\\ud800"])).map(
        b"".join
    ),
    require=st.booleans(),
)
def test_arbitrary_bytes_never_make_the_verifier_raise(junk: bytes, require: bool) -> None:
    prefix = build().split(b"\n")[0] + b"\n"
    for data in (junk, prefix + junk):
        result = check(data, require_signature=require, public_key=None if require else "junk")
        assert not result.ok and result.reason in REASONS
        json.dumps(result.to_json())
        # With a valid first line the file is a receipt, whatever follows.
        assert data == junk or result.input_error is None


# ---- no receipt at all versus a tampered receipt ----------------------------------------------


@pytest.mark.parametrize(
    ("data", "found"),
    [
        (b"", "an empty file"),
        (b"\x00\xff" * 50, "no event on any line (line 1 is not JSON)"),
        (b"\n\n", "no event on any line (line 1 is not JSON)"),
        (b'{"a": 1}\n{"b": 2}\n', "(line 1 is a JSON object without v, seq, ts, type, data"),
        (b"[1]\n", "no event on any line (line 1 is a JSON array)"),
        (b'"text"\n', "(line 1 is a JSON string)"),
    ],
)
def test_input_with_no_event_on_any_line_is_no_receipt(data: bytes, found: str) -> None:
    result = check(data)
    assert not result.ok and result.reason in ("empty", "invalid_json", "invalid_event")
    assert result.input_error is not None and found in result.input_error
    assert "input_error" not in json.dumps(result.to_json())  # the reference's object is kept


def test_the_reference_verdict_is_kept_for_input_that_is_no_receipt(tmp_path: Path) -> None:
    assert check(b"").to_json()["reason"] == "empty"
    missing = verify_receipt(tmp_path / "nope.jsonl")
    assert missing.input_error == "cannot read the receipt: No such file or directory"
    assert verify_receipt(tmp_path).input_error == "cannot read the receipt: Is a directory"


@pytest.mark.parametrize("position", [0, 1, 2])
def test_one_event_shaped_line_makes_the_file_a_tampered_receipt(position: int) -> None:
    lines = build(TOOL_CALL).split(b"\n")
    lines[position] = b"garbage \xff"
    result = check(b"\n".join(lines))
    assert (result.reason, result.first_bad_seq) == ("invalid_json", position)
    assert result.input_error is None


def test_a_first_line_with_the_envelope_but_a_wrong_hash_is_tampered() -> None:
    line = build().split(b"\n")[0].replace(b'"goal":"demo"', b'"goal":"other"')
    result = check(line + b"\n")
    assert result.reason == "hash_mismatch" and result.input_error is None


def _signed(events: list[Event]) -> list[bytes]:
    chained = chain_events(events)
    chained[-1]["signature"] = Ed25519Signer.from_seed(b"\x01" * 32).sign(chained[-1]["hash"])
    return receipt_bytes(chained).split(b"\n")


@pytest.mark.parametrize("edited", [1, 2])
def test_a_signature_past_a_broken_chain_is_present_and_not_checked(edited: int) -> None:
    lines = _signed([RUN_START, TOOL_CALL, RUN_END])
    signer_key = json.loads(lines[2])["signature"]["publicKey"]
    lines[edited] = (
        lines[edited]
        .replace(b'"ok":true', b'"ok":false')
        .replace(b'"verified":true', b'"verified":false')
    )
    result = check(b"\n".join(lines))
    assert (result.reason, result.first_bad_seq) == ("hash_mismatch", edited)
    assert (result.signature.present, result.signature.valid) == (True, None)
    assert result.to_json()["signature"] == {"present": True, "publicKey": signer_key}


def test_a_signature_before_an_appended_event_is_present_and_not_checked() -> None:
    lines = _signed([RUN_START, RUN_END])
    extra = chain_events([RUN_START, RUN_END, TOOL_CALL])[2]
    extra["prev"] = json.loads(lines[1])["hash"]
    extra["hash"] = event_hash(extra)
    result = check(b"\n".join(lines[:2]) + b"\n" + canonjson.dumps(extra).encode() + b"\n")
    assert result.reason == "event_after_run_end"
    assert (result.signature.present, result.signature.valid) == (True, None)


def test_a_broken_unsigned_chain_reports_no_signature() -> None:
    lines = build(TOOL_CALL).split(b"\n")
    lines[1] = lines[1].replace(b'"ok":true', b'"ok":false')
    assert check(b"\n".join(lines)).signature.present is False


# ---- memory --------------------------------------------------------------------------------


def _peak_bytes_verifying(path: Path) -> int:
    tracemalloc.start()
    try:
        assert verify_receipt(path).ok
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_does_not_grow_with_the_receipt(tmp_path: Path) -> None:
    peaks = []
    for count in (2_000, 20_000):
        path = tmp_path / f"{count}.jsonl"
        path.write_bytes(build(*[TOOL_CALL] * count))
        peaks.append(_peak_bytes_verifying(path))
    small, large = peaks
    assert large < small * 1.25 + 64 * 1024, f"peak {small} B for 2k events, {large} B for 20k"
