"""``trialrun receipt``: verify over every conformance vector, sign, keygen, show, exit codes."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import call_cli
from paths import SRC_DIR
from trialrun.base import canonjson
from trialrun.cli import run_cli
from trialrun.receipt.envelope import ZERO_HASH, event_hash

SIGNER_PUBLIC_B64 = "MCowBQYDK2VwAyEAiojj3XQJ8ZX9UtstPLpdcspnCb8dlBIb83SIAbQPb1w="


def private_pem(seed: bytes) -> bytes:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    return Ed25519PrivateKey.from_private_bytes(seed).private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


@pytest.fixture
def signer_key(tmp_path: Path) -> Path:
    """The conformance signer's private key (seed 0x01 * 32), as keygen would write it."""
    path = tmp_path / "signer.pem"
    path.write_bytes(private_pem(b"\x01" * 32))
    return path


@pytest.fixture
def unsigned(tmp_path: Path, conformance: Path) -> Path:
    path = tmp_path / "receipt.jsonl"
    shutil.copyfile(conformance / "valid-unsigned.jsonl", path)
    return path


def option_args(opts: str, conformance: Path) -> list[str]:
    if opts == "(none)":
        return []
    if opts == "--require-signature":
        return ["--require-signature"]
    flag, key_file = opts.split()
    assert flag == "--pubkey"
    return ["--public-key", str(conformance / key_file)]


NOT_RECEIPTS = {"invalid-empty.jsonl"}
"""Conformance vectors with no event on any line: invalid input (exit 2), not a failed check."""


def expected_exit(file: str, result: dict[str, Any]) -> int:
    if file in NOT_RECEIPTS:
        return 2
    return 0 if result["ok"] else 1


def expected_head(result: dict[str, Any]) -> str:
    """The first line of the text verdict; signature verdicts name no seq."""
    reason, message = result.get("reason"), result["message"]
    if result["ok"]:
        return f"Verified: {message}"
    if reason == "unsigned":
        return (
            "NOT SIGNED (unsigned): the receipt is not signed, but one is required; its chain is "
            f"intact ({result['eventCount']} events, run complete)"
        )
    if reason == "untrusted_key":
        return f"UNTRUSTED SIGNER (untrusted_key): {message}"
    if reason == "bad_signature":
        return f"TAMPERED or invalid signature (bad_signature): {message}"
    if reason == "truncated":
        count = result["eventCount"]
        return (
            f"incomplete (truncated): the run did not finish: no run_end after seq {count - 1} "
            f"(the {count} events up to there are intact)"
        )
    return f"TAMPERED or invalid at seq {result['firstBadSeq']} ({reason}): {message}"


def expected_status(file: str, result: dict[str, Any]) -> str:
    """What ``--json`` adds to the reference's object: what the verdict means."""
    if file in NOT_RECEIPTS:
        return "invalid"
    if result["ok"]:
        return "verified"
    statuses = {"truncated": "incomplete", "unsigned": "unsigned", "untrusted_key": "untrusted"}
    return statuses.get(result["reason"], "tampered")


def test_verify_json_matches_every_conformance_result(
    conformance: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = json.loads((conformance / "expected.json").read_text(encoding="utf-8"))
    mismatches: list[tuple[str, str, Any]] = []
    checked = 0
    for entry in expected:
        for check in entry["checks"]:
            args = option_args(check["opts"], conformance)
            code, out, err = call_cli(
                ["receipt", "verify", str(conformance / entry["file"]), *args, "--json"], capsys
            )
            result = {**check["result"], "status": expected_status(entry["file"], check["result"])}
            code_wanted = expected_exit(entry["file"], result)
            err_wanted = code_wanted == 2  # one error line beside the JSON, as for any exit 2
            if (code, json.loads(out)) != (code_wanted, result) or bool(err) != err_wanted:
                mismatches.append((entry["file"], check["opts"], (code, out, err)))
            checked += 1
    assert mismatches == []
    assert checked >= 20


def test_verify_human_output_matches_every_conformance_verdict(
    conformance: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = json.loads((conformance / "expected.json").read_text(encoding="utf-8"))
    for entry in expected:
        for check in entry["checks"]:
            args = option_args(check["opts"], conformance)
            path = conformance / entry["file"]
            code, out, err = call_cli(["receipt", "verify", str(path), *args], capsys)
            result = check["result"]
            if entry["file"] in NOT_RECEIPTS:
                assert (code, out) == (2, "") and err.startswith(f"error: {path}: ")
                continue
            assert (code, out.splitlines()[0]) == (
                expected_exit(entry["file"], result),
                expected_head(result),
            ), entry["file"]
            if result["ok"]:
                assert "It does not prove the run happened." in out


def test_verify_unreadable_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = call_cli(["receipt", "verify", str(tmp_path / "missing.jsonl")], capsys)
    assert (code, out) == (2, "")
    missing = tmp_path / "missing.jsonl"
    assert err == f"error: {missing}: cannot read the receipt: No such file or directory\n"
    code, out, err = call_cli(["receipt", "verify", str(tmp_path), "--json"], capsys)
    assert code == 2 and json.loads(out)["reason"] == "unreadable"
    assert err == f"error: {tmp_path}: cannot read the receipt: Is a directory\n"


def test_verify_public_key_as_base64_text(
    conformance: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    signed = str(conformance / "valid-signed.jsonl")
    code, out, _ = call_cli(
        ["receipt", "verify", signed, "--public-key", SIGNER_PUBLIC_B64], capsys
    )
    assert code == 0 and out.startswith("Verified:")
    attacker = str(conformance / "test-key-attacker.pub.pem")
    code, out, _ = call_cli(
        ["receipt", "verify", signed, "--public-key", attacker, "--json"], capsys
    )
    assert code == 1 and json.loads(out)["reason"] == "untrusted_key"


@pytest.mark.parametrize("key", ["no-such-key.pem", "not base64 !", "AAAA"])
def test_verify_bad_public_key_exits_2(
    conformance: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str
) -> None:
    code, out, err = call_cli(
        ["receipt", "verify", str(conformance / "valid-signed.jsonl"), "--public-key", key], capsys
    )
    assert (code, out) == (2, "")
    assert err.startswith("error: ") and err.endswith(" (--public-key)\n") and err.count("\n") == 1


def test_verify_public_key_file_that_is_not_a_key_exits_2(
    conformance: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    junk = tmp_path / "junk.pem"
    junk.write_text("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n")
    code, _, err = call_cli(
        ["receipt", "verify", str(conformance / "valid-signed.jsonl"), "--public-key", str(junk)],
        capsys,
    )
    assert code == 2 and "junk.pem" in err


def test_verify_schema_flag(
    conformance: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = call_cli(
        ["receipt", "verify", str(conformance / "valid-unsigned.jsonl"), "--schema"], capsys
    )
    assert code == 0 and "Schema: valid" in out
    # A perfectly chained receipt whose run_start lacks the members the spec requires.
    prev, lines = ZERO_HASH, []
    for seq, (kind, data) in enumerate([("run_start", {"goal": 1}), ("run_end", {})]):
        event: dict[str, Any] = {"v": "0", "seq": seq, "ts": "2026-01-01T00:00:00.000Z"}
        event |= {"type": kind, "data": data, "prev": prev}
        event["hash"] = prev = event_hash(event)
        lines.append(canonjson.dumps(event) + "\n")
    odd = tmp_path / "odd.jsonl"
    odd.write_text("".join(lines), encoding="utf-8")
    code, out, _ = call_cli(["receipt", "verify", str(odd)], capsys)
    assert code == 0
    code, out, _ = call_cli(["receipt", "verify", str(odd), "--schema"], capsys)
    assert code == 1 and re.search(r"Schema: \d+ problems?\n", out) and "line 1" in out
    code, out, _ = call_cli(["receipt", "verify", str(odd), "--schema", "--json"], capsys)
    payload = json.loads(out)
    assert code == 1 and payload["ok"] is True and payload["schemaProblems"]


def test_sign_reproduces_the_reference_signed_receipt(
    unsigned: Path, signer_key: Path, conformance: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mode = stat.S_IMODE(unsigned.stat().st_mode)
    code, out, _ = call_cli(["receipt", "sign", str(unsigned), "--key", str(signer_key)], capsys)
    assert code == 0 and SIGNER_PUBLIC_B64 in out
    # Ed25519 is deterministic and the run_end line is canonical JSON: byte-identical.
    assert unsigned.read_bytes() == (conformance / "valid-signed.jsonl").read_bytes()
    assert stat.S_IMODE(unsigned.stat().st_mode) == mode
    pinned = str(conformance / "test-key-signer.pub.pem")
    code, out, _ = call_cli(["receipt", "verify", str(unsigned), "--public-key", pinned], capsys)
    assert code == 0 and "signature valid" in out


def test_sign_refuses_an_already_signed_receipt(
    unsigned: Path, signer_key: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert call_cli(["receipt", "sign", str(unsigned), "--key", str(signer_key)], capsys)[0] == 0
    before = unsigned.read_bytes()
    other = tmp_path / "other.pem"
    other.write_bytes(private_pem(b"\x02" * 32))
    code, out, err = call_cli(["receipt", "sign", str(unsigned), "--key", str(other)], capsys)
    assert (code, out) == (2, "")
    assert err.startswith(f"error: {unsigned}: cannot sign it: it is already signed")
    assert SIGNER_PUBLIC_B64 in err and err.count("\n") == 1
    assert unsigned.read_bytes() == before


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("tamper-edited-field.jsonl", "hash_mismatch"),
        ("tamper-truncated-tail.jsonl", "truncated"),
        ("tamper-event-after-run-end.jsonl", "event_after_run_end"),
        ("tamper-signed-rehashed-after-signing.jsonl", "bad_signature"),
    ],
)
def test_sign_refuses_an_invalid_receipt(
    conformance: Path,
    tmp_path: Path,
    signer_key: Path,
    capsys: pytest.CaptureFixture[str],
    name: str,
    reason: str,
) -> None:
    target = tmp_path / name
    shutil.copyfile(conformance / name, target)
    code, _, err = call_cli(["receipt", "sign", str(target), "--key", str(signer_key)], capsys)
    assert code == 2 and err.count("\n") == 1
    assert err.startswith(f"error: {target}: cannot sign it: it does not verify ({reason})")
    assert target.read_bytes() == (conformance / name).read_bytes()


def test_sign_keeps_crlf_and_a_missing_final_newline(
    unsigned: Path, signer_key: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = unsigned.read_bytes().splitlines()
    unsigned.write_bytes(b"\r\n".join(lines))  # CRLF, no newline after run_end
    assert call_cli(["receipt", "sign", str(unsigned), "--key", str(signer_key)], capsys)[0] == 0
    signed = unsigned.read_bytes()
    assert signed.count(b"\r\n") == len(lines) - 1 and not signed.endswith(b"\n")
    assert signed.split(b"\r\n")[:-1] == lines[:-1]
    code, out, _ = call_cli(["receipt", "verify", str(unsigned), "--require-signature"], capsys)
    assert code == 0, out


def test_sign_with_unusable_inputs_exits_2(
    unsigned: Path, signer_key: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = call_cli(
        ["receipt", "sign", str(tmp_path / "none.jsonl"), "--key", str(signer_key)], capsys
    )
    assert code == 2 and err.startswith("error: ") and "cannot read the receipt" in err
    public = tmp_path / "pub.pem"
    public.write_text("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n")
    code, _, err = call_cli(["receipt", "sign", str(unsigned), "--key", str(public)], capsys)
    assert code == 2 and err.startswith("error: ")
    code, _, err = call_cli(
        ["receipt", "sign", str(unsigned), "--key", str(tmp_path / "missing.pem")], capsys
    )
    assert code == 2 and "missing.pem" in err
    code, _, _ = call_cli(["receipt", "sign", str(unsigned)], capsys)
    assert code == 2  # --key is required


def test_keygen_then_sign_and_verify_with_the_new_pair(
    unsigned: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    keys = tmp_path / "keys"
    code, out, _ = call_cli(["receipt", "keygen", str(keys)], capsys)
    private, public = keys / "receipt-key.pem", keys / "receipt-key.pub.pem"
    assert code == 0 and str(private) in out and str(public) in out
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert call_cli(["receipt", "sign", str(unsigned), "--key", str(private)], capsys)[0] == 0
    code, out, _ = call_cli(
        ["receipt", "verify", str(unsigned), "--public-key", str(public), "--json"], capsys
    )
    assert code == 0 and json.loads(out)["signature"]["valid"] is True
    der = base64.b64decode(json.loads(out)["signature"]["publicKey"])
    assert len(der) == 44


def test_keygen_refuses_to_overwrite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert call_cli(["receipt", "keygen", str(tmp_path)], capsys)[0] == 0
    before = (tmp_path / "receipt-key.pem").read_bytes()
    code, out, err = call_cli(["receipt", "keygen", str(tmp_path)], capsys)
    assert (code, out) == (2, "") and "refusing to overwrite" in err
    assert (tmp_path / "receipt-key.pem").read_bytes() == before


def test_keygen_into_a_file_says_it_is_not_a_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "notes.txt"
    target.write_text("mine", encoding="utf-8")
    code, out, err = call_cli(["receipt", "keygen", str(target)], capsys)
    assert (code, out) == (2, "")
    assert err == f"error: {target}: expected a directory for the key pair, found a file\n"
    assert target.read_text(encoding="utf-8") == "mine"


def test_show_exit_codes_and_html(
    conformance: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = call_cli(["receipt", "show", str(conformance / "valid-unsigned.jsonl")], capsys)
    assert code == 0 and "Attempt 2 (claude-sonnet-4-5): verified" in out
    page = tmp_path / "out" / "receipt.html"
    code, out, _ = call_cli(
        ["receipt", "show", str(conformance / "tamper-deleted-middle.jsonl"), "--html", str(page)],
        capsys,
    )
    assert code == 1 and "(seq_mismatch)" in out and out.rstrip().endswith(f"Wrote {page}")
    assert "seq_mismatch" in page.read_text(encoding="utf-8")
    assert not [p for p in page.parent.iterdir() if p.name.endswith(".tmp")]
    code, out, err = call_cli(["receipt", "show", str(tmp_path / "missing.jsonl")], capsys)
    assert (code, out) == (2, "") and err.startswith("error: ")


def test_receipt_help_does_not_import_cryptography(conformance: Path) -> None:
    probe = (
        "import sys\n"
        "from trialrun.cli import run_cli\n"
        "codes = [run_cli(['receipt', '--help']), run_cli(['receipt', 'verify', '--help'])]\n"
        "codes.append(run_cli(['receipt', 'verify', sys.argv[1]]))\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'cryptography', 'jinja2'})\n"
        "print(codes, heavy)\n"
    )
    target = conformance / "valid-unsigned.jsonl"
    env = dict(os.environ, PYTHONPATH=str(SRC_DIR))
    proc = subprocess.run(
        [sys.executable, "-c", probe, str(target)], capture_output=True, text=True, env=env
    )
    assert proc.returncode == 0, proc.stderr
    assert "verify" in proc.stdout and "keygen" in proc.stdout
    assert proc.stdout.strip().splitlines()[-1] == "[0, 0, 0] []"


def test_trialrun_help_lists_receipt(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["--help"]) == 0
    assert "receipt" in capsys.readouterr().out


def test_show_never_fails_on_a_conformance_vector(
    conformance: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from trialrun.receipt.verify import verify_receipt

    for path in sorted(conformance.glob("*.jsonl")):
        code, out, err = call_cli(["receipt", "show", str(path)], capsys)
        if path.name in NOT_RECEIPTS:
            assert (code, out) == (2, "") and err.startswith(f"error: {path}: "), path.name
            continue
        assert (code, err) == (0 if verify_receipt(path).ok else 1, ""), path.name
        assert out.startswith(f"Receipt: {path}")


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=40)
@given(payload=st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=4), crlf=st.booleans())
def test_signing_any_receipt_changes_only_the_run_end_line(
    tmp_path_factory: pytest.TempPathFactory, payload: dict[str, Any], crlf: bool
) -> None:
    from trialrun.cli.receipt_cmd import sign_receipt
    from trialrun.receipt.signing import Ed25519Signer
    from trialrun.receipt.verify import verify_receipt

    prev, lines = ZERO_HASH, []
    events = [("run_start", {"goal": "g"}), ("probe", payload), ("run_end", {"extra": payload})]
    for seq, (kind, data) in enumerate(events):
        event: dict[str, Any] = {"v": "0", "seq": seq, "ts": "2026-01-01T00:00:00.000Z"}
        event |= {"type": kind, "data": data, "prev": prev}
        event["hash"] = prev = event_hash(event)
        lines.append(canonjson.dumps(event).encode("utf-8"))
    path = tmp_path_factory.mktemp("example") / "prop.jsonl"
    newline = b"\r\n" if crlf else b"\n"
    path.write_bytes(newline.join(lines) + newline)
    signer = Ed25519Signer.from_seed(b"\x03" * 32)
    assert sign_receipt(path, signer) is None
    signed = path.read_bytes().split(newline)
    assert signed[:2] == lines[:2] and signed[3] == b""
    result = verify_receipt(path, public_key=signer.public_key_b64)
    assert result.ok and result.last_hash == prev, result.message
    assert sign_receipt(path, signer) == (
        f"it is already signed (public key {signer.public_key_b64})"
    )


# ---- input that is no receipt versus a receipt that was tampered with -----------------------

NOT_A_RECEIPT: dict[str, bytes | None] = {
    "empty": b"",
    "binary": bytes(range(256)) * 4,
    "text": b"hello\nworld\n",
    "json-object": b'{"cases": []}\n',
    "json-array": b"[1, 2]\n",
    "pretty-json": b'{\n  "v": "0"\n}\n',
    "directory": None,
}


def not_a_receipt(tmp_path: Path, kind: str) -> Path:
    content = NOT_A_RECEIPT[kind]
    if content is None:
        return tmp_path
    path = tmp_path / f"{kind}.jsonl"
    path.write_bytes(content)
    return path


@pytest.mark.parametrize("kind", [*NOT_A_RECEIPT, "missing"])
@pytest.mark.parametrize("command", ["verify", "verify --json", "sign", "show"])
def test_input_that_is_no_receipt_is_invalid_input(
    tmp_path: Path, signer_key: Path, capsys: pytest.CaptureFixture[str], kind: str, command: str
) -> None:
    path = tmp_path / "missing.jsonl" if kind == "missing" else not_a_receipt(tmp_path, kind)
    extra = ["--key", str(signer_key)] if command == "sign" else []
    code, out, err = call_cli(["receipt", *command.split(), str(path), *extra], capsys)
    assert code == 2, (out, err)
    assert err.startswith(f"error: {path}: ") and err.count("\n") == 1, err
    assert "TAMPERED" not in out + err and "Traceback" not in err
    if command == "verify --json":
        assert json.loads(out)["ok"] is False  # the verdict object is still printed
    else:
        assert out == ""


def test_the_error_says_what_was_found(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    found = {}
    for kind in ("empty", "binary", "json-object", "json-array"):
        found[kind] = call_cli(["receipt", "verify", str(not_a_receipt(tmp_path, kind))], capsys)[2]
    expected = "expected a Run Receipt v0 file (JSON Lines, one event per line), found"
    assert all(expected in err for err in found.values())
    assert found["empty"].rstrip().endswith("found an empty file")
    assert "(line 1 is not JSON)" in found["binary"]
    assert (
        "(line 1 is a JSON object without v, seq, ts, type, data, prev, hash)"
        in (found["json-object"])
    )
    assert "(line 1 is a JSON array)" in found["json-array"]


@pytest.mark.parametrize("line", [0, 4, 16])
@pytest.mark.parametrize("junk", [b"garbage", b"\x00\xff\xfe binary", b"[1, 2]", b""])
def test_a_receipt_with_a_garbage_line_is_tampered_not_invalid_input(
    unsigned: Path, capsys: pytest.CaptureFixture[str], line: int, junk: bytes
) -> None:
    lines = unsigned.read_bytes().split(b"\n")
    lines[line] = junk
    unsigned.write_bytes(b"\n".join(lines))
    code, out, err = call_cli(["receipt", "verify", str(unsigned)], capsys)
    assert (code, err) == (1, "")
    assert out.startswith(f"TAMPERED or invalid at seq {line} (")
    assert call_cli(["receipt", "show", str(unsigned)], capsys)[0] == 1


@pytest.mark.parametrize(
    ("key", "misspelled"), [("prev", "perv"), ("type", "tpye"), ("seq", "sqe")]
)
def test_a_misspelled_key_in_an_event_is_tampering_not_invalid_input(
    unsigned: Path, capsys: pytest.CaptureFixture[str], key: str, misspelled: str
) -> None:
    # A receipt is not written by hand: an edited key is a modified receipt, whatever the edit.
    text = unsigned.read_text(encoding="utf-8")
    unsigned.write_text(text.replace(f'"{key}"', f'"{misspelled}"', 1), encoding="utf-8")
    code, out, err = call_cli(["receipt", "verify", str(unsigned)], capsys)
    assert (code, err) == (1, "")
    assert out.startswith("TAMPERED or invalid at seq 0 (")
    assert call_cli(["receipt", "show", str(unsigned)], capsys)[0] == 1


def test_require_signature_on_an_unsigned_receipt_says_it_is_not_signed(
    unsigned: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = call_cli(["receipt", "verify", str(unsigned), "--require-signature"], capsys)
    head = out.splitlines()[0]
    assert code == 1
    assert "the receipt is not signed" in head and "seq" not in head
    assert "its chain is intact (17 events, run complete)" in head


def test_a_signature_from_another_key_names_no_seq(
    conformance: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    signed = str(conformance / "valid-signed.jsonl")
    attacker = str(conformance / "test-key-attacker.pub.pem")
    code, out, _ = call_cli(["receipt", "verify", signed, "--public-key", attacker], capsys)
    assert code == 1 and out.startswith("UNTRUSTED SIGNER (untrusted_key): ")


@pytest.mark.parametrize("line", [3, 16])
def test_a_tampered_signed_receipt_reports_its_signature_as_present_and_unchecked(
    conformance: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], line: int
) -> None:
    lines = (conformance / "valid-signed.jsonl").read_bytes().split(b"\n")
    lines[line] = (
        lines[line]
        .replace(b'"ok":true', b'"ok":false')
        .replace(b'"verified":true', b'"verified":false')
    )
    target = tmp_path / "tampered.jsonl"
    target.write_bytes(b"\n".join(lines))
    code, out, _ = call_cli(["receipt", "verify", str(target)], capsys)
    assert code == 1 and out.startswith(f"TAMPERED or invalid at seq {line} (hash_mismatch)")
    assert (
        "  signature: present, not checked because the chain is broken "
        f"(claims public key {SIGNER_PUBLIC_B64})"
    ) in out
    code, out, _ = call_cli(["receipt", "verify", str(target), "--json"], capsys)
    assert code == 1
    assert json.loads(out)["signature"] == {"present": True, "publicKey": SIGNER_PUBLIC_B64}
