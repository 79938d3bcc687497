"""ReceiptWriter and the envelope: byte-exact lines, chaining, redaction and refusals."""

from __future__ import annotations

import errno
import hashlib
import itertools
import json
import math
import os
import subprocess
import sys
import types
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trialrun.base import canonjson
from trialrun.errors import ReceiptError
from trialrun.receipt import writer as writer_module
from trialrun.receipt.envelope import ENVELOPE_KEYS, ZERO_HASH, EventText, event_hash, format_ts
from trialrun.receipt.verify import verify_receipt
from trialrun.receipt.writer import ReceiptWriter

EPOCH_2026 = 1767225600  # 2026-01-01T00:00:00Z, the conformance vectors' clock start
SECRET = "sk-proj-abcdefghijklmnopqrstuvwx"
RUN_START = {"goal": "g", "verifyCommand": "pytest", "repoHead": None, "branch": ""}


def ticking_clock(start: float = EPOCH_2026, step: float = 1.0) -> Callable[[], float]:
    ticks = itertools.count()
    return lambda: start + step * next(ticks)


def read_lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines(keepends=True)


def recompute_chain(path: Path) -> str:
    """An independent check of the reference's chain rules; returns the last hash."""
    prev = ZERO_HASH
    for seq, line in enumerate(read_lines(path)):
        event = json.loads(line)
        assert list(event) == sorted(event), "a line is canonical JSON: keys sorted"
        assert line == canonjson.dumps(event) + "\n"
        assert (event["v"], event["seq"], event["prev"]) == ("0", seq, prev)
        hashed = {k: v for k, v in event.items() if k not in ("hash", "signature")}
        digest = hashlib.sha256(canonjson.dumps(hashed).encode("utf-8")).hexdigest()
        assert event["hash"] == digest
        prev = digest
    return prev


def deeply_nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


def replay_conformance_run(
    conformance: Path, target: Path, *, signed: bool, with_secret: bool
) -> list[dict[str, Any]]:
    """Write the events of valid-*.jsonl again with the vectors' clock; returns what emit gave."""
    source = [json.loads(line) for line in read_lines(conformance / "valid-signed.jsonl")]
    signer = None
    if signed:
        from trialrun.receipt.signing import Ed25519Signer

        signer = Ed25519Signer.from_seed(b"\x01" * 32)
    written = []
    with ReceiptWriter(target, signer=signer, clock=ticking_clock()) as writer:
        for event in source[:-1]:
            data = dict(event["data"])
            if with_secret and data.get("redacted") is True:
                # The reference writer saw the key itself; our redact must produce the same text.
                data["argsSummary"] = f'command="OPENAI_API_KEY={SECRET} pytest -q"'
                data["redacted"] = False
            written.append(writer.emit(event["type"], data))
        written.append(writer.close(source[-1]["data"]))
    return written


@pytest.mark.parametrize("name", ["valid-signed.jsonl", "valid-unsigned.jsonl"])
@pytest.mark.parametrize("with_secret", [True, False])
def test_reproduces_the_conformance_receipts_byte_for_byte(
    conformance: Path, tmp_path: Path, name: str, with_secret: bool
) -> None:
    target = tmp_path / name
    replay_conformance_run(
        conformance, target, signed=name == "valid-signed.jsonl", with_secret=with_secret
    )
    expected = read_lines(conformance / name)
    found = read_lines(target)
    assert len(found) == len(expected) == 17
    for seq, (line, reference_line) in enumerate(zip(found, expected, strict=True)):
        assert line == reference_line, f"seq {seq} differs"
    assert SECRET not in target.read_text(encoding="utf-8")


def test_emit_returns_the_event_as_written(conformance: Path, tmp_path: Path) -> None:
    target = tmp_path / "r.jsonl"
    written = replay_conformance_run(conformance, target, signed=True, with_secret=True)
    on_disk = [json.loads(line) for line in read_lines(target)]
    assert written == on_disk
    assert list(written[0]) == list(ENVELOPE_KEYS)
    assert list(written[-1]) == [*ENVELOPE_KEYS, "signature"]
    assert written[4]["data"]["redacted"] is True


def test_written_receipts_verify(conformance: Path, tmp_path: Path) -> None:
    target = tmp_path / "r.jsonl"
    replay_conformance_run(conformance, target, signed=True, with_secret=False)
    last_hash = recompute_chain(target)
    result = verify_receipt(target, public_key=str(conformance / "test-key-signer.pub.pem"))
    assert (result.ok, result.event_count, result.last_hash) == (True, 17, last_hash)
    assert result.signature.valid is True


def test_chain_properties_track_the_last_event(tmp_path: Path) -> None:
    writer = ReceiptWriter(tmp_path / "r.jsonl", clock=ticking_clock())
    assert (writer.seq, writer.last_hash) == (0, ZERO_HASH)
    first = writer.emit("run_start", RUN_START)
    assert (writer.seq, writer.last_hash) == (1, first["hash"])
    second = writer.emit("case_start", {"case": "a"})
    assert second["prev"] == first["hash"]
    end = writer.close({"stopReason": "completed"})
    assert (writer.seq, writer.last_hash, writer.ended) == (3, end["hash"], True)
    assert "signature" not in end
    assert recompute_chain(tmp_path / "r.jsonl") == end["hash"]


def test_creates_missing_parent_directories(tmp_path: Path) -> None:
    target = tmp_path / "runs" / "abc" / "receipt.jsonl"
    with ReceiptWriter(target) as writer:
        writer.emit("run_start", RUN_START)
        writer.close({})
    assert verify_receipt(target).ok


# ---- redaction ----------------------------------------------------------------------------


def test_tool_call_secrets_are_redacted_before_hashing(tmp_path: Path) -> None:
    target = tmp_path / "r.jsonl"
    args = {"name": "bash", "argsSummary": f"curl -H 'Authorization: Bearer {SECRET}'", "ok": True}
    with ReceiptWriter(target) as writer:
        writer.emit("run_start", RUN_START)
        event = writer.emit("tool_call", args)
        writer.close({})
    assert event["data"]["redacted"] is True
    assert SECRET not in target.read_text(encoding="utf-8")
    assert args == {"name": "bash", "argsSummary": args["argsSummary"], "ok": True}, "not mutated"
    recompute_chain(target)


def test_redacted_flag_is_false_when_nothing_changed_and_kept_when_caller_set_it(
    tmp_path: Path,
) -> None:
    with ReceiptWriter(tmp_path / "r.jsonl") as writer:
        writer.emit("run_start", RUN_START)
        clean = writer.emit("tool_call", {"name": "read_file", "argsSummary": 'path="a.py"'})
        pre_redacted = writer.emit("tool_call", {"name": "x", "redacted": True})
        not_a_tool_call = writer.emit("log", {"message": "hello"})
    assert clean["data"]["redacted"] is False
    assert pre_redacted["data"]["redacted"] is True
    assert "redacted" not in not_a_tool_call["data"]


def test_every_event_type_is_redacted_including_sensitive_keys(tmp_path: Path) -> None:
    target = tmp_path / "r.jsonl"
    with ReceiptWriter(target) as writer:
        writer.emit("run_start", {"goal": f"use {SECRET}", "env": {"api_key": "plain-value"}})
        writer.emit("custom_thing", {"nested": [{"token": "abc123"}], "token_count": 7})
    text = target.read_text(encoding="utf-8")
    assert SECRET not in text and "plain-value" not in text and "abc123" not in text
    assert '"token_count":7' in text
    assert "redacted" not in text


# ---- refusals -----------------------------------------------------------------------------


def test_an_existing_file_is_never_overwritten(tmp_path: Path) -> None:
    target = tmp_path / "r.jsonl"
    target.write_text("precious\n", encoding="utf-8")
    with pytest.raises(ReceiptError, match="refusing to overwrite the existing receipt"):
        ReceiptWriter(target)
    assert target.read_text(encoding="utf-8") == "precious\n"


def test_a_symlink_is_not_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    link = tmp_path / "r.jsonl"
    link.symlink_to(victim)  # dangling: O_EXCL must still refuse rather than create the target
    with pytest.raises(ReceiptError, match="refusing to overwrite"):
        ReceiptWriter(link)
    assert not victim.exists()


def test_an_unwritable_location_is_a_receipt_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("", encoding="utf-8")
    with pytest.raises(ReceiptError, match="cannot create the receipt"):
        ReceiptWriter(blocker / "r.jsonl")


def test_nothing_is_written_after_run_end(tmp_path: Path) -> None:
    target = tmp_path / "r.jsonl"
    writer = ReceiptWriter(target)
    writer.emit("run_start", RUN_START)
    writer.close({})
    before = target.read_bytes()
    with pytest.raises(ReceiptError, match="already ended with run_end at seq 1"):
        writer.emit("log", {})
    with pytest.raises(ReceiptError, match="already ended"):
        writer.close({})
    assert target.read_bytes() == before


def test_run_end_only_through_close_and_run_start_first(tmp_path: Path) -> None:
    writer = ReceiptWriter(tmp_path / "r.jsonl")
    with pytest.raises(ReceiptError, match="the first event must be run_start, found log"):
        writer.emit("log", {})
    with pytest.raises(ReceiptError, match="first event must be run_start, found run_end"):
        writer.close({})
    writer.emit("run_start", RUN_START)
    with pytest.raises(ReceiptError, match=r"run_end is written by close\(\)"):
        writer.emit("run_end", {})
    with pytest.raises(ReceiptError, match="non-empty string"):
        writer.emit("", {})
    with pytest.raises(ReceiptError, match="must be a mapping, found list"):
        writer.emit("log", [1, 2])  # type: ignore[arg-type]
    assert writer.seq == 1


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ({"x": math.nan}, "not JSON"),
        ({"x": object()}, "not JSON"),
        ({1: "a"}, "not JSON"),
        ({"x": deeply_nested(5000)}, "not JSON"),
    ],
)
def test_non_json_data_is_refused_without_advancing_the_chain(
    tmp_path: Path, data: dict[Any, Any], problem: str
) -> None:
    target = tmp_path / "r.jsonl"
    writer = ReceiptWriter(target)
    writer.emit("run_start", RUN_START)
    with pytest.raises(ReceiptError, match=f"data of the log event at seq 1 is {problem}"):
        writer.emit("log", data)
    writer.emit("log", {"ok": True})
    writer.close({})
    assert verify_receipt(target).ok


# ---- crashes ------------------------------------------------------------------------------


def test_a_crash_inside_with_leaves_a_truncated_receipt(tmp_path: Path) -> None:
    target = tmp_path / "r.jsonl"
    with pytest.raises(RuntimeError), ReceiptWriter(target) as writer:
        writer.emit("run_start", RUN_START)
        writer.emit("tool_call", {"name": "x"})
        raise RuntimeError("agent crashed")
    result = verify_receipt(target)
    assert (result.ok, result.reason, result.first_bad_seq, result.event_count) == (
        False,
        "truncated",
        2,
        2,
    )
    with pytest.raises(ReceiptError, match="closed without run_end"):
        writer.emit("log", {})


def test_leaving_with_without_close_also_leaves_it_truncated(tmp_path: Path) -> None:
    target = tmp_path / "r.jsonl"
    with ReceiptWriter(target) as writer:
        writer.emit("run_start", RUN_START)
    assert verify_receipt(target).reason == "truncated"
    writer.abandon()  # idempotent


def test_a_failed_write_stops_the_writer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "r.jsonl"
    writer = ReceiptWriter(target)
    writer.emit("run_start", RUN_START)

    def disk_full(fd: int, data: Any) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    fake_os = types.SimpleNamespace(**{**vars(os), "write": disk_full})
    monkeypatch.setattr(writer_module, "os", fake_os)
    with pytest.raises(ReceiptError, match="seq 1 failed: No space left on device"):
        writer.emit("log", {})
    monkeypatch.undo()
    with pytest.raises(ReceiptError, match="an earlier write failed at seq 1"):
        writer.emit("log", {})
    assert verify_receipt(target).reason == "truncated"


def _counting_writes(monkeypatch: pytest.MonkeyPatch, fail: bool = False) -> list[int]:
    sizes: list[int] = []

    def write(fd: int, data: Any) -> int:
        if fail:
            raise OSError(errno.ENOSPC, "No space left on device")
        sizes.append(len(data))
        return os.write(fd, data)

    fake_os = types.SimpleNamespace(**{**vars(os), "write": write})
    monkeypatch.setattr(writer_module, "os", fake_os)
    return sizes


def test_a_batch_writes_the_same_receipt_with_one_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def write_receipt(target: Path, batched: bool) -> None:
        with ReceiptWriter(target, clock=ticking_clock()) as writer:
            writer.emit("run_start", RUN_START)
            if batched:
                with writer.batch():
                    for event_type, data in _many_events():
                        writer.emit(event_type, data)
                    assert target.read_bytes().count(b"\n") == 1  # nothing more written yet
            else:
                for event_type, data in _many_events():
                    writer.emit(event_type, data)
            writer.close({"stopReason": "completed"})

    write_receipt(tmp_path / "one_by_one.jsonl", batched=False)
    sizes = _counting_writes(monkeypatch)
    write_receipt(tmp_path / "batched.jsonl", batched=True)
    assert len(sizes) == 3  # run_start, the batch, run_end
    assert (tmp_path / "batched.jsonl").read_bytes() == (tmp_path / "one_by_one.jsonl").read_bytes()
    assert verify_receipt(tmp_path / "batched.jsonl").ok


def test_events_of_a_batch_before_an_error_are_written(tmp_path: Path) -> None:
    target = tmp_path / "r.jsonl"
    writer = ReceiptWriter(target)
    writer.emit("run_start", RUN_START)
    with pytest.raises(ReceiptError, match="not JSON"), writer.batch():
        writer.emit("tool_call", {"name": "x"})
        writer.emit("tool_call", {"name": object()})
    result = verify_receipt(target)
    assert (result.reason, result.event_count) == ("truncated", 2)


def test_a_failed_batch_write_names_its_first_event(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "r.jsonl"
    writer = ReceiptWriter(target)
    writer.emit("run_start", RUN_START)
    _counting_writes(monkeypatch, fail=True)
    with (
        pytest.raises(ReceiptError, match="seq 1 failed: No space left on device"),
        writer.batch(),
    ):
        writer.emit("log", {})
        writer.emit("log", {})
    monkeypatch.undo()
    with pytest.raises(ReceiptError, match="an earlier write failed at seq 1"):
        writer.emit("log", {})
    assert verify_receipt(target).event_count == 1


def test_writing_a_partial_line_is_retried_until_complete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "r.jsonl"

    def short_write(fd: int, data: Any) -> int:
        return os.write(fd, bytes(data[:7]))

    monkeypatch.setattr(
        writer_module, "os", types.SimpleNamespace(**{**vars(os), "write": short_write})
    )
    with ReceiptWriter(target) as writer:
        writer.emit("run_start", RUN_START)
        writer.close({"stopReason": "completed"})
    assert verify_receipt(target).ok


# ---- envelope -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("epoch", "text"),
    [
        (0, "1970-01-01T00:00:00.000Z"),
        (EPOCH_2026 + 5, "2026-01-01T00:00:05.000Z"),
        (1.001, "1970-01-01T00:00:01.001Z"),
        (1.9999, "1970-01-01T00:00:01.999Z"),
        (-0.001, "1969-12-31T23:59:59.999Z"),
        (951782400.5, "2000-02-29T00:00:00.500Z"),
    ],
)
def test_format_ts_matches_to_iso_string(epoch: float, text: str) -> None:
    assert format_ts(epoch) == text


@pytest.mark.parametrize("epoch", [math.nan, math.inf, -math.inf, 1e20])
def test_format_ts_refuses_impossible_times(epoch: float) -> None:
    with pytest.raises(ValueError, match="timestamp"):
        format_ts(epoch)


@given(st.integers(min_value=-62_000_000_000_000, max_value=253_402_300_799_999))
def test_format_ts_keeps_every_millisecond(millis: int) -> None:
    moment = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=millis)
    expected = (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}T{moment.hour:02d}:"
        f"{moment.minute:02d}:{moment.second:02d}.{moment.microsecond // 1000:03d}Z"
    )
    assert format_ts(millis / 1000) == expected


JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=200)
@given(
    data=st.dictionaries(st.text(), JSON_VALUES, max_size=5),
    type=st.text(min_size=1),
    seq=st.integers(min_value=0, max_value=2**40),
    prev=st.text("0123456789abcdef", min_size=64, max_size=64),
)
def test_event_text_is_the_canonical_json_of_the_event(
    data: dict[str, Any], type: str, seq: int, prev: str
) -> None:
    ts = "2026-01-01T00:00:00.000Z"
    text = EventText(seq=seq, ts=ts, type=type, data_json=canonjson.dumps(data), prev=prev)
    event: dict[str, Any] = {"v": "0", "seq": seq, "ts": ts, "type": type, "data": data}
    event["prev"] = prev
    assert text.hashed_text() == canonjson.dumps(event)
    assert text.digest() == event_hash(event)
    signature = {"alg": "ed25519", "publicKey": "k", "sig": "s"}
    full = {**event, "hash": text.digest(), "signature": signature}
    assert text.line(text.digest(), signature) == canonjson.dumps(full) + "\n"
    assert event_hash(full) == text.digest(), "hash and signature are never hashed"


def test_event_hash_of_a_conformance_event(conformance: Path) -> None:
    first = json.loads(read_lines(conformance / "valid-unsigned.jsonl")[0])
    assert event_hash(first) == first["hash"]
    assert event_hash(first, codepoint=True) == first["hash"]  # ASCII keys: both orders agree


# ---- cost ---------------------------------------------------------------------------------


def test_writing_without_a_signer_never_imports_cryptography(tmp_path: Path) -> None:
    script = (
        "import sys, pathlib\n"
        "from trialrun.receipt.writer import ReceiptWriter\n"
        "w = ReceiptWriter(pathlib.Path(sys.argv[1]))\n"
        "w.emit('run_start', {'goal': 'g'})\n"
        "w.close({})\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] == 'cryptography')\n"
        "print(loaded)\n"
    )
    found = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "r.jsonl")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert found.stdout.strip() == "[]"


def _many_events() -> Iterator[tuple[str, dict[str, Any]]]:
    for index in range(2000):
        yield "tool_call", {"attempt": 1, "name": "read_file", "argsSummary": f"path={index}"}


def test_thousands_of_events_stay_cheap(tmp_path: Path) -> None:
    target = tmp_path / "r.jsonl"
    with ReceiptWriter(target) as writer:
        writer.emit("run_start", RUN_START)
        for type, data in _many_events():
            writer.emit(type, data)
        writer.close({})
    result = verify_receipt(target)
    assert (result.ok, result.event_count) == (True, 2002)


# ---- the shortcut for data with nothing to redact ----------------------------------------

_data_text = st.lists(
    st.sampled_from(
        ["sk-abcdefghijklmnopqrstu", "password=x", "Bearer abcdefghijklmnop", "q", "é", "\ud800"]
    )
    | st.text(max_size=4),
    max_size=4,
).map("".join)
_data_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_infinity=False)  # NaN: not JSON, unless under a secret's name
    | _data_text,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["token", "name", "q"]) | _data_text, inner, max_size=3)
    ),
    max_leaves=10,
)
_event_data = st.dictionaries(
    st.sampled_from(["apiKey", "argsSummary", "case", "redacted", "durationMs"]) | _data_text,
    _data_values,
    max_size=5,
)


def _redacted_the_long_way(type: str, data: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """What the writer did before the shortcut: always a redacted deep copy."""
    from trialrun.base.redact import redact_changed

    clean, changed = redact_changed(data)
    if type == "tool_call":
        clean["redacted"] = changed or clean.get("redacted") is True
    return clean, canonjson.dumps(clean)


@given(st.sampled_from(["tool_call", "log"]), _event_data)
def test_event_data_is_what_a_full_redaction_gives(event: str, data: dict[str, Any]) -> None:
    try:
        expected = _redacted_the_long_way(event, data)
    except (TypeError, ValueError) as exc:
        with pytest.raises(type(exc)):
            writer_module._redacted(event, data)
        return
    clean, text = writer_module._redacted(event, data)
    assert text == expected[1]
    assert canonjson.dumps(clean) == canonjson.dumps(expected[0])


def test_a_nan_is_refused_unless_redacted() -> None:
    with pytest.raises(ValueError):
        writer_module._redacted("log", {"x": math.nan})
    assert writer_module._redacted("log", {"token": math.nan})[1] == '{"token":"[REDACTED]"}'


@given(_data_values)
def test_the_args_summary_is_what_a_full_redaction_gives(args: Any) -> None:
    from trialrun.base.redact import redact_changed
    from trialrun.receipt.args_summary import SUMMARY_LIMIT, summarize_args

    clean, redacted = redact_changed({} if args is None else args)
    try:
        text = canonjson.dumps(clean)
    except (TypeError, ValueError):
        text = json.dumps(clean, ensure_ascii=False, sort_keys=True, default=repr)
    if len(text) > SUMMARY_LIMIT:
        text = text[: SUMMARY_LIMIT - 1] + "…"
    assert summarize_args(args) == (text, redacted)


@settings(max_examples=200)
@given(
    data=st.dictionaries(st.text(), JSON_VALUES, max_size=5),
    type=st.text(min_size=1),
    seq=st.integers(min_value=0, max_value=2**40),
    prev=st.text("0123456789abcdef", min_size=64, max_size=64),
)
def test_an_unsigned_event_is_what_event_text_gives(
    data: dict[str, Any], type: str, seq: int, prev: str
) -> None:
    from trialrun.receipt.envelope import unsigned_event

    ts = "2026-01-01T00:00:00.000Z"
    fields: dict[str, Any] = {"seq": seq, "ts": ts, "type": type, "prev": prev}
    text = EventText(data_json=canonjson.dumps(data), **fields)
    hash_hex, line = unsigned_event(data_json=canonjson.dumps(data), **fields)
    assert hash_hex == text.digest()
    assert line == text.line(hash_hex).encode("utf-8")


def _ticking_clock() -> Callable[[], float]:
    ticks = itertools.count()
    return lambda: 1_800_000_000 + next(ticks) * 0.0004


class _Mapping(dict[str, Any]):
    pass


def test_emit_each_writes_what_emit_writes_one_by_one(tmp_path: Path) -> None:
    datas: list[Any] = [
        {"name": "a", "argsSummary": "{}", "durationMs": 1.5, "ok": True},
        {"name": "b", "argsSummary": '{"api_key":"sk-abcdefghijklmnopqrstu"}', "redacted": 1},
        _Mapping(name="c", nested={"token": [1, 2]}),
        {"name": "d", "bad": math.nan},  # not JSON: stops here, the events before written
        {"name": "e"},
    ]
    written = []
    for mode in ("one by one", "each"):
        writer = ReceiptWriter(tmp_path / f"{mode}.jsonl", clock=_ticking_clock())
        with writer:
            writer.emit("run_start", RUN_START)
            with (
                pytest.raises(ReceiptError, match="at seq 4 is not JSON") as raised,
                writer.batch(),
            ):
                if mode == "each":
                    writer.emit_each("tool_call", iter(datas))
                else:
                    for data in datas:
                        writer.emit("tool_call", data)
            message = str(raised.value).split(".jsonl: ", 1)[1]
            written.append(((tmp_path / f"{mode}.jsonl").read_bytes(), message))
            assert writer.seq == 4
    assert written[0] == written[1]
    assert written[0][0].count(b"\n") == 4


def test_emit_each_refuses_what_emit_refuses(tmp_path: Path) -> None:
    writer = ReceiptWriter(tmp_path / "r.jsonl")
    with writer:
        with pytest.raises(ReceiptError, match="first event must be run_start"):
            writer.emit_each("tool_call", [{"name": "a"}])
        writer.emit("run_start", RUN_START)
        with pytest.raises(ReceiptError, match="run_end is written by close"):
            writer.emit_each("run_end", [{}])
        with pytest.raises(ReceiptError, match="must be a mapping"):
            writer.emit_each("tool_call", [{"name": "a"}, ["not", "a", "mapping"]])  # type: ignore[list-item]
        assert writer.seq == 2
        writer.emit_each("tool_call", [])
        assert writer.seq == 2
