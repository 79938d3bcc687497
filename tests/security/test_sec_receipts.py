"""Receipts accept only what was signed; an incomplete run reads as incomplete, not as tampered.

Each attack starts from a receipt written by the real writer and signed with a real Ed25519 key,
and changes it so that every hash and the signature stay valid: before issue 28 all of these
verified. A duplicate key in an object reads as its last value under JSON.parse and Python (so
the hash matched) and as its first under other readers; a ``signature`` member on an event other
than run_end, and a member inside run_end's signature beyond alg/publicKey/sig, are covered by
no hash and no signature.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import call_cli
from paths import DATA_DIR
from trialrun.base import canonjson
from trialrun.cli import run_cli
from trialrun.receipt.envelope import ZERO_HASH, event_hash
from trialrun.receipt.show import read_receipt, render_view_html
from trialrun.receipt.signing import Ed25519Signer
from trialrun.receipt.verify import VerifyResult, verify_receipt
from trialrun.receipt.writer import ReceiptWriter

SIGNER_SEED = b"\x01" * 32
VECTORS = DATA_DIR / "receipt-v0-strict"
INCOMPLETE = "incomplete (truncated): the run did not finish"

RUN_START = {
    "goal": "fix the divide bug",
    "verifyCommand": "pytest -q",
    "repoHead": None,
    "branch": "main",
    "tool": {"name": "trialrun", "version": "0"},
}
TOOL_CALL = {"attempt": 1, "name": "bash", "argsSummary": 'cmd="rm -rf build"', "ok": False}
VERIFIER = {
    "attempt": 1,
    "command": "pytest -q",
    "exitCode": 1,
    "passed": False,
    "output": "1 failed",
    "failureScore": 1,
}
RUN_END = {
    "stopReason": "verified",
    "verified": True,
    "totals": {"attempts": 1, "totalTokens": 12, "costUsd": 0.5, "filesChanged": 0},
}


def signed_receipt(path: Path) -> list[bytes]:
    """A complete receipt signed with the conformance signer's key; its lines, newline-less."""
    with ReceiptWriter(path, signer=Ed25519Signer.from_seed(SIGNER_SEED)) as writer:
        writer.emit("run_start", RUN_START)
        writer.emit("tool_call", TOOL_CALL)
        writer.emit("verifier_result", VERIFIER)
        writer.close(RUN_END)
    result = verify_receipt(path, require_signature=True)
    assert result.ok and result.signature.valid, result.message
    return path.read_bytes().split(b"\n")[:-1]


def edited(path: Path, seq: int, old: bytes, new: bytes) -> Path:
    lines = signed_receipt(path)
    assert lines[seq].count(old) == 1
    lines[seq] = lines[seq].replace(old, new)
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


def with_member(path: Path, seq: int, change: Callable[[dict[str, Any]], None]) -> Path:
    """The signed receipt with event ``seq`` changed outside its hash (re-serialized)."""
    lines = signed_receipt(path) if not path.exists() else path.read_bytes().split(b"\n")[:-1]
    event = json.loads(lines[seq])
    change(event)
    assert event_hash(event) == event["hash"]  # the chain cannot see the change
    lines[seq] = canonjson.dumps(event).encode()
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


def attack_duplicate_top_level(path: Path) -> Path:
    # A second "type" before the hashed one: first-wins readers see a passing verifier result.
    return edited(path, 2, b'"type":"verifier_result"', b'"type":"x","type":"verifier_result"')


def attack_duplicate_in_data(path: Path) -> Path:
    return edited(path, 1, b'"ok":false', b'"ok":true,"ok":false')


def attack_duplicate_nested_in_signed_event(path: Path) -> Path:
    return edited(path, 3, b'"costUsd":0.5', b'"costUsd":0,"costUsd":0.5')


def attack_duplicate_spelled_as_an_escape(path: Path) -> Path:
    # "\u006f\u006b" is the key "ok": one key twice, however it is spelled.
    return edited(path, 1, b'"ok":false', b'"\\u006f\\u006b":true,"ok":false')


def attack_signature_on_a_tool_call(path: Path) -> Path:
    block = json.loads(signed_receipt(path)[3])["signature"]
    return with_member(path, 1, lambda event: event.update(signature=block))


def attack_extra_member_in_signature(path: Path) -> Path:
    return with_member(path, 3, lambda event: event["signature"].update(approvedBy="security"))


ATTACKS: list[tuple[Callable[[Path], Path], str, int, str]] = [
    (attack_duplicate_top_level, "invalid_json", 2, 'duplicate key "type"'),
    (attack_duplicate_in_data, "invalid_json", 1, 'duplicate key "ok"'),
    (attack_duplicate_nested_in_signed_event, "invalid_json", 3, 'duplicate key "costUsd"'),
    (attack_duplicate_spelled_as_an_escape, "invalid_json", 1, 'duplicate key "ok"'),
    (attack_signature_on_a_tool_call, "invalid_event", 1, "only run_end may carry a signature"),
    (attack_extra_member_in_signature, "invalid_event", 3, 'signature holds "approvedBy"'),
]
ATTACK_IDS = [attack.__name__.removeprefix("attack_") for attack, *_ in ATTACKS]


@pytest.mark.parametrize(("attack", "reason", "seq", "why"), ATTACKS, ids=ATTACK_IDS)
def test_unsigned_content_in_a_signed_receipt_is_rejected_with_its_seq(
    tmp_path: Path, attack: Callable[[Path], Path], reason: str, seq: int, why: str
) -> None:
    path = attack(tmp_path / "receipt.jsonl")
    for options in ({}, {"require_signature": True}):
        result = verify_receipt(path, **options)
        assert (result.ok, result.reason, result.first_bad_seq) == (False, reason, seq)
        assert why in result.message and f"seq {seq}" in result.message
        assert result.status == "tampered" and result.input_error is None


@pytest.mark.parametrize(("attack", "reason", "seq", "why"), ATTACKS, ids=ATTACK_IDS)
def test_the_cli_rejects_unsigned_content(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    attack: Callable[[Path], Path],
    reason: str,
    seq: int,
    why: str,
) -> None:
    path = str(attack(tmp_path / "receipt.jsonl"))
    code, out, err = call_cli(["receipt", "verify", path], capsys)
    assert (code, err) == (1, "")
    assert out.startswith(f"TAMPERED or invalid at seq {seq} ({reason}): ") and why in out
    assert "It does not prove the run happened" not in out  # said only of a valid receipt
    code, out, _ = call_cli(["receipt", "verify", path, "--json"], capsys)
    document = json.loads(out)
    assert code == 1 and (document["reason"], document["firstBadSeq"]) == (reason, seq)
    assert document["ok"] is False and document["status"] == "tampered"
    code, out, _ = call_cli(["receipt", "show", path], capsys)
    assert code == 1
    assert out.splitlines()[1].startswith(f"TAMPERED or invalid at seq {seq} ({reason})")


def test_a_signature_on_any_event_but_run_end_is_rejected(tmp_path: Path) -> None:
    for seq in range(3):
        path = tmp_path / f"{seq}.jsonl"
        block = json.loads(signed_receipt(path)[3])["signature"]
        with_member(path, seq, lambda event, block=block: event.update(signature=block))
        result = verify_receipt(path)
        assert (result.reason, result.first_bad_seq) == ("invalid_event", seq)


# ---- duplicate keys anywhere: a property ---------------------------------------------------

_keys = st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=5)
_leaves = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=5)
_values = st.recursive(
    _leaves,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_keys, inner, max_size=3),
    max_leaves=10,
)
_data = st.dictionaries(_keys, _values, min_size=1, max_size=4)


def _text_with_duplicate(value: Any, target: int, counter: list[int]) -> str:
    """JSON text of ``value`` whose ``target``-th non-empty object (depth first) repeats its
    first key, with another value first: parsing keeps the last, so the value is unchanged."""
    if type(value) is dict and value:
        index = counter[0]
        counter[0] += 1
        pairs = [
            canonjson.dumps(key) + ":" + _text_with_duplicate(item, target, counter)
            for key, item in value.items()
        ]
        if index == target:
            first = next(iter(value))
            pairs.insert(0, canonjson.dumps(first) + ':["shadowed"]')
        return "{" + ",".join(pairs) + "}"
    if type(value) is list:
        return "[" + ",".join(_text_with_duplicate(item, target, counter) for item in value) + "]"
    return canonjson.dumps(value)


def _objects(value: Any) -> int:
    if type(value) is dict:
        return (1 if value else 0) + sum(_objects(item) for item in value.values())
    if type(value) is list:
        return sum(_objects(item) for item in value)
    return 0


@settings(max_examples=150)
@given(data=_data, pick=st.integers(min_value=0), at=st.integers(0, 2))
def test_a_duplicate_key_in_any_object_of_any_event_is_rejected(
    data: dict[str, Any], pick: int, at: int
) -> None:
    kinds = [("run_start", RUN_START), ("custom_probe", data), ("run_end", RUN_END)]
    events, prev = [], ZERO_HASH
    for seq, (kind, payload) in enumerate(kinds):
        event = {"v": "0", "seq": seq, "ts": "2026-01-01T00:00:00.000Z", "type": kind}
        event |= {"data": payload, "prev": prev}
        event["hash"] = prev = event_hash(event)
        events.append(event)
    lines = [canonjson.dumps(event) for event in events]
    target = pick % _objects(events[at])
    lines[at] = _text_with_duplicate(events[at], target, [0])
    assert json.loads(lines[at]) == events[at]  # last-wins parsing sees the hashed event
    result = verify_receipt_bytes(("\n".join(lines) + "\n").encode())
    assert (result.reason, result.first_bad_seq) == ("invalid_json", at)
    assert "duplicate key" in result.message


def verify_receipt_bytes(data: bytes) -> VerifyResult:
    import io

    return verify_receipt(io.BytesIO(data))


# ---- an incomplete run is not a tampered one ------------------------------------------------


def interrupted_receipt(path: Path) -> Path:
    """What Ctrl-C during a run leaves: the writer saw the interrupt and wrote no run_end."""
    signer = Ed25519Signer.from_seed(SIGNER_SEED)
    with pytest.raises(KeyboardInterrupt), ReceiptWriter(path, signer=signer) as writer:
        writer.emit("run_start", RUN_START)
        writer.emit("tool_call", TOOL_CALL)
        raise KeyboardInterrupt
    return path


def test_an_interrupted_run_is_incomplete_through_the_library(tmp_path: Path) -> None:
    result = verify_receipt(interrupted_receipt(tmp_path / "receipt.jsonl"))
    assert (result.ok, result.reason, result.first_bad_seq) == (False, "truncated", 2)
    assert result.status == "incomplete"


def test_verify_says_incomplete_and_no_tampering_words(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(interrupted_receipt(tmp_path / "receipt.jsonl"))
    code, out, err = call_cli(["receipt", "verify", path], capsys)
    assert (code, err) == (1, "")
    head = out.splitlines()[0]
    assert head == f"{INCOMPLETE}: no run_end after seq 1 (the 2 events up to there are intact)"
    assert "TAMPERED" not in out and "tamper" not in out.lower()


def test_verify_json_gives_an_incomplete_status(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(interrupted_receipt(tmp_path / "receipt.jsonl"))
    code, out, _ = call_cli(["receipt", "verify", path, "--json"], capsys)
    document = json.loads(out)
    assert code == 1
    assert (document["reason"], document["firstBadSeq"], document["status"]) == (
        "truncated",
        2,
        "incomplete",
    )


def test_show_says_incomplete_in_the_terminal_and_the_page(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = interrupted_receipt(tmp_path / "receipt.jsonl")
    page_path = tmp_path / "receipt.html"
    code, out, _ = call_cli(["receipt", "show", str(path), "--html", str(page_path)], capsys)
    assert code == 1
    assert out.splitlines()[1].startswith(INCOMPLETE) and "TAMPERED" not in out
    page = page_path.read_text(encoding="utf-8")
    assert INCOMPLETE in page and "TAMPERED" not in page
    assert 'class="verdict incomplete"' in render_view_html(read_receipt(path))


# ---- the project's own conformance vectors for these cases ------------------------------------


def _vector_checks() -> list[tuple[str, str, dict[str, Any], str]]:
    entries = json.loads((VECTORS / "expected.json").read_text(encoding="utf-8"))
    return [
        (entry["file"], check["opts"], check["result"], check["status"])
        for entry in entries
        for check in entry["checks"]
    ]


def _options(opts: str) -> dict[str, Any]:
    if opts == "(none)":
        return {}
    flag, key_file = opts.split()
    assert flag == "--pubkey"
    return {"public_key": (VECTORS / key_file).read_text(encoding="utf-8")}


@pytest.mark.parametrize(("file", "opts", "expected", "status"), _vector_checks())
def test_every_strict_vector_gives_its_result(
    capsys: pytest.CaptureFixture[str], file: str, opts: str, expected: dict[str, Any], status: str
) -> None:
    result = verify_receipt(VECTORS / file, **_options(opts))
    assert (result.to_json(), result.status) == (expected, status)
    args = [] if opts == "(none)" else ["--public-key", str(VECTORS / opts.split()[1])]
    code, out, _ = call_cli(["receipt", "verify", str(VECTORS / file), *args, "--json"], capsys)
    assert (code, json.loads(out)) == (1, {**expected, "status": status})


# ---- other files whose bytes are hashed, or checked against a receipt ---------------------------
# No writer of trialrun's emits a key twice; a file that holds one was made to read one way
# here and another way elsewhere.


def _twice(text: str, member: str, shadow: str) -> str:
    """``text`` with ``shadow`` written before the first ``member`` of it, as the same key."""
    assert member in text
    key = member.split(":", 1)[0]
    return text.replace(member, f"{key}:{shadow},{member}", 1)


def test_a_baseline_holding_a_key_twice_is_refused(tmp_path: Path) -> None:
    from trialrun.artifacts.baseline import load_baseline
    from trialrun.errors import ConfigError

    document = {"schema_version": 1, "cases": [{"id": "a", "status": "fail"}]}
    path = tmp_path / "baseline.json"
    path.write_text(_twice(json.dumps(document), '"status": "fail"', '"pass"'), encoding="utf-8")
    with pytest.raises(ConfigError, match='duplicate key "status"'):
        load_baseline(path)


def test_a_shard_summary_holding_a_key_twice_is_refused_by_the_merge(tmp_path: Path) -> None:
    # The summary's statuses are checked against the receipt's case_end events; a second
    # "status" before the real one passed that check while a first-wins reader saw a failure.
    from builders import make_shard_suite, run_shard
    from trialrun.artifacts.merge import merge_runs
    from trialrun.errors import ConfigError
    from trialrun.running.sharding import ShardSpec

    case_ids = [f"case_{n:03d}" for n in range(3)]
    suite = make_shard_suite(tmp_path, "dup", len(case_ids))
    shards = [run_shard(suite, ShardSpec(i, 2), tmp_path / f"s{i}", case_ids) for i in (1, 2)]
    summary = shards[0] / "summary.json"
    text = summary.read_text(encoding="utf-8")
    summary.write_text(_twice(text, '"status": "pass"', '"fail"'), encoding="utf-8")
    with pytest.raises(ConfigError, match='duplicate key "status"'):
        merge_runs(shards, tmp_path / "merged", baseline=None)


@pytest.fixture(scope="module")
def compare_shards(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    from builders import make_compare_subject

    root = tmp_path_factory.mktemp("compare-dup")
    subject = make_compare_subject(root)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TRIALRUN_HOME", str(root / "home"))
        for name in ("SCRIPTED_FLIP", "SCRIPTED_WAIT_FOR", "TRIALRUN_TEAM"):
            patch.delenv(name, raising=False)
        for index in (1, 2):
            args = ["compare", str(subject), "--shard", f"{index}/2", "--out", str(root / "s")]
            assert run_cli([*args, "--case", "build", "--k", "1"]) == 0
        yield {"root": root, "shards": sorted((root / "s").glob("*-of-2"))}


def test_a_compare_shard_holding_a_key_twice_is_refused(
    compare_shards: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from trialrun.compare.shards import SHARD_FILE

    first, second = (tmp_path / "1", tmp_path / "2")
    shutil.copytree(compare_shards["shards"][0], first)
    shutil.copytree(compare_shards["shards"][1], second)
    text = (first / SHARD_FILE).read_text(encoding="utf-8")
    # A first-wins reader sees no units at all; the merge read the real ones.
    (first / SHARD_FILE).write_text(_twice(text, '"units": [', "[]"), encoding="utf-8")
    capsys.readouterr()
    code = run_cli(["compare", "merge", str(first), str(second), "--no-commit"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(f'error: {first}: cannot read shard.json: duplicate key "units"')


def test_a_compare_receipt_holding_a_key_twice_is_not_scored(
    compare_shards: dict[str, Any], tmp_path: Path
) -> None:
    from trialrun.team.scores import _read_receipt

    assert run_cli(["compare", "merge", *map(str, compare_shards["shards"]), "--no-commit"]) in (
        0,
        1,
    )
    stored = (compare_shards["root"] / "home").glob("evals/local/*/*/receipt.json")
    receipt = max(stored, key=lambda path: path.stat().st_mtime_ns)
    assert _read_receipt(receipt)[0] is not None
    copy = tmp_path / "receipt.json"
    text = receipt.read_text(encoding="utf-8")
    copy.write_text(_twice(text, '"verdict": ', '"PASS"'), encoding="utf-8")
    document, problem = _read_receipt(copy)
    assert document is None and problem is not None and 'duplicate key "verdict"' in problem


def test_check_signature_refuses_a_block_with_a_member_it_does_not_sign(tmp_path: Path) -> None:
    from trialrun.receipt.signing import check_signature

    event = json.loads(signed_receipt(tmp_path / "receipt.jsonl")[3])
    assert check_signature(event["signature"], event["hash"])
    block = {**event["signature"], "approvedBy": "security"}
    assert not check_signature(block, event["hash"])


@pytest.mark.parametrize(
    "hide", [lambda sig: sig + " approved by security", lambda sig: sig[:8] + "!#" + sig[8:]]
)
def test_text_hidden_where_base64_is_not_read_is_refused(
    tmp_path: Path, hide: Callable[[str], str]
) -> None:
    from trialrun.receipt.signing import check_signature

    event = json.loads(signed_receipt(tmp_path / "receipt.jsonl")[3])
    sig = event["signature"]["sig"]
    assert sig.endswith("="), "an Ed25519 signature is 64 bytes: base64 with one '='"
    assert not check_signature({**event["signature"], "sig": hide(sig)}, event["hash"])
    spaced = sig[:10] + "\n " + sig[10:] + "\n"
    assert check_signature({**event["signature"], "sig": spaced}, event["hash"])
