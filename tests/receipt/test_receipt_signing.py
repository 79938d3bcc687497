"""Ed25519 signing for receipts: the reference's signature bytes, key loading, keygen."""

from __future__ import annotations

import base64
import json
import stat
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given
from hypothesis import strategies as st

from trialrun.errors import ReceiptError
from trialrun.receipt.signing import (
    Ed25519Signer,
    check_signature,
    generate_keypair,
    load_private_key,
    load_public_key,
)

SIGNER_SEED = b"\x01" * 32
ATTACKER_SEED = b"\x02" * 32
SIGNER_PUBLIC = "MCowBQYDK2VwAyEAiojj3XQJ8ZX9UtstPLpdcspnCb8dlBIb83SIAbQPb1w="


def run_end(conformance: Path) -> dict[str, Any]:
    lines = (conformance / "valid-signed.jsonl").read_text(encoding="utf-8").splitlines()
    event: dict[str, Any] = json.loads(lines[-1])
    return event


def private_pem(seed: bytes = SIGNER_SEED) -> bytes:
    return Ed25519PrivateKey.from_private_bytes(seed).private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def private_der(seed: bytes = SIGNER_SEED) -> bytes:
    return Ed25519PrivateKey.from_private_bytes(seed).private_bytes(
        serialization.Encoding.DER,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


# ---- signing ------------------------------------------------------------------------------


def test_signs_exactly_like_the_reference(conformance: Path) -> None:
    event = run_end(conformance)
    signer = Ed25519Signer.from_seed(SIGNER_SEED)
    assert signer.public_key_b64 == SIGNER_PUBLIC
    assert signer.sign(event["hash"]) == event["signature"]
    assert check_signature(event["signature"], event["hash"])


def test_sign_accepts_only_an_event_hash() -> None:
    signer = Ed25519Signer.from_seed(SIGNER_SEED)
    for bad in ["", "ABCDEF" * 10 + "ABCD", "0" * 63, "g" * 64]:
        with pytest.raises(ReceiptError, match="64 lowercase hex characters"):
            signer.sign(bad)


def test_seed_must_be_32_bytes() -> None:
    with pytest.raises(ReceiptError, match="32 bytes, found 31 bytes"):
        Ed25519Signer.from_seed(b"\x01" * 31)


def test_repr_shows_only_the_public_key() -> None:
    signer = Ed25519Signer.from_seed(SIGNER_SEED)
    assert repr(signer) == f"Ed25519Signer(publicKey={SIGNER_PUBLIC!r})"


# ---- checking -----------------------------------------------------------------------------


def test_check_signature_rejects_every_altered_part(conformance: Path) -> None:
    event = run_end(conformance)
    good, hash_hex = event["signature"], event["hash"]
    attacker = Ed25519Signer.from_seed(ATTACKER_SEED)
    other_hash = "0" * 64
    assert not check_signature(good, other_hash)
    assert not check_signature({**good, "alg": "Ed25519"}, hash_hex)
    assert not check_signature({**good, "publicKey": attacker.public_key_b64}, hash_hex)
    assert not check_signature({**good, "sig": attacker.sign(hash_hex)["sig"]}, hash_hex)
    assert not check_signature({"alg": "ed25519", "publicKey": SIGNER_PUBLIC}, hash_hex)
    assert not check_signature({**good, "sig": 5}, hash_hex)
    assert check_signature(attacker.sign(hash_hex), hash_hex), "valid, just another key"


def test_check_signature_decodes_base64_as_leniently_as_node(conformance: Path) -> None:
    event = run_end(conformance)
    sig = event["signature"]["sig"]
    spaced = {**event["signature"], "sig": sig[:10] + "\n " + sig[10:]}
    url_safe = {**event["signature"], "sig": sig.replace("+", "-").replace("/", "_")}
    unpadded = {**event["signature"], "sig": sig.rstrip("=")}
    for variant in (spaced, url_safe, unpadded):
        assert check_signature(variant, event["hash"])


def test_check_signature_refuses_a_non_ed25519_key(conformance: Path) -> None:
    event = run_end(conformance)
    ec_key = ec.generate_private_key(ec.SECP256R1()).public_key()
    der = ec_key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    block = {**event["signature"], "publicKey": base64.b64encode(der).decode()}
    assert not check_signature(block, event["hash"])


JSON_ANY = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text() | st.binary(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)


@given(
    block=st.fixed_dictionaries(
        {}, optional={"alg": st.just("ed25519") | JSON_ANY, "publicKey": JSON_ANY, "sig": JSON_ANY}
    )
    | JSON_ANY,
    hash_hex=JSON_ANY,
)
def test_check_signature_never_raises_on_garbage(block: Any, hash_hex: Any) -> None:
    assert check_signature(block, hash_hex) is False


@given(sig=st.text(), public_key=st.text())
def test_check_signature_never_raises_on_garbage_text(sig: str, public_key: str) -> None:
    block = {"alg": "ed25519", "publicKey": public_key, "sig": sig}
    assert check_signature(block, "\ud800" + "0" * 63) is False
    assert check_signature(block, "0" * 64) is False


# ---- loading private keys -----------------------------------------------------------------


def test_private_key_loads_from_every_accepted_form(tmp_path: Path) -> None:
    pem_file = tmp_path / "receipt-key.pem"
    pem_file.write_bytes(private_pem())
    forms: list[str | Path | bytes] = [
        pem_file,
        str(pem_file),
        private_pem(),
        private_pem().decode(),
        base64.b64encode(private_der()).decode(),
        base64.b64encode(SIGNER_SEED).decode(),
        private_der(),
        "\n" + base64.encodebytes(private_der()).decode(),  # wrapped base64 lines
    ]
    for form in forms:
        assert load_private_key(form).public_key_b64 == SIGNER_PUBLIC, form


def test_private_key_file_not_found_names_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope.pem"
    for form in (missing, str(missing)):
        with pytest.raises(ReceiptError, match=f"{missing}: private key file not found"):
            load_private_key(form)


def test_a_public_key_is_not_a_private_key(conformance: Path) -> None:
    with pytest.raises(ReceiptError, match="holds a public key; signing needs the private key"):
        load_private_key(conformance / "test-key-signer.pub.pem")


def test_other_key_types_and_encrypted_keys_are_refused(tmp_path: Path) -> None:
    ec_pem = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    with pytest.raises(ReceiptError, match="private key of type EC; receipts are signed with"):
        load_private_key(ec_pem)
    encrypted = Ed25519PrivateKey.from_private_bytes(SIGNER_SEED).private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"pw"),
    )
    with pytest.raises(ReceiptError, match="encrypted private key"):
        load_private_key(encrypted)
    broken = b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"
    with pytest.raises(ReceiptError, match="not a readable PKCS8 PEM private key"):
        load_private_key(broken)
    with pytest.raises(ReceiptError, match="private key is empty"):
        load_private_key("  ")


def test_bad_base64_keys_are_refused_without_echoing_them() -> None:
    wrong_length = base64.b64encode(b"\x07" * 40).decode()
    with pytest.raises(ReceiptError, match="neither a 32-byte Ed25519 seed nor PKCS8 DER") as info:
        load_private_key(wrong_length)
    assert wrong_length not in str(info.value)
    with pytest.raises(ReceiptError, match="nor PKCS8 DER, as base64 or raw"):
        load_private_key(b"this is not base64!")


# ---- loading public keys ------------------------------------------------------------------


def test_public_key_loads_from_pem_and_base64_der(conformance: Path) -> None:
    pem_path = conformance / "test-key-signer.pub.pem"
    pem_text = pem_path.read_text(encoding="utf-8")
    forms: list[str | Path | bytes] = [
        pem_path,
        str(pem_path),
        pem_text,
        pem_text.encode(),
        SIGNER_PUBLIC,
        f"  {SIGNER_PUBLIC}\n",
        base64.b64decode(SIGNER_PUBLIC),
    ]
    for form in forms:
        assert load_public_key(form) == SIGNER_PUBLIC, form
    attacker = load_public_key(conformance / "test-key-attacker.pub.pem")
    assert attacker == Ed25519Signer.from_seed(ATTACKER_SEED).public_key_b64 != SIGNER_PUBLIC


def test_public_key_refusals_say_what_was_expected(tmp_path: Path) -> None:
    with pytest.raises(
        ReceiptError, match="holds a private key; expected the path of the public key file"
    ):
        load_public_key(private_pem())
    ec_der = (
        ec.generate_private_key(ec.SECP256R1())
        .public_key()
        .public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    with pytest.raises(ReceiptError, match="public key of type EC"):
        load_public_key(base64.b64encode(ec_der).decode())
    with pytest.raises(ReceiptError, match="not SPKI DER of a public key"):
        load_public_key(base64.b64encode(b"\x01" * 32).decode())
    with pytest.raises(ReceiptError, match="not a readable SPKI PEM public key"):
        load_public_key("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n")
    with pytest.raises(ReceiptError, match=f"{tmp_path / 'k.pem'}: public key file not found"):
        load_public_key(str(tmp_path / "k.pem"))
    with pytest.raises(ReceiptError, match="found int"):
        load_public_key(5)  # type: ignore[arg-type]


# ---- keygen -------------------------------------------------------------------------------


def test_keygen_writes_a_usable_pair_with_a_private_mode(tmp_path: Path) -> None:
    private_path, public_path = generate_keypair(tmp_path / "keys")
    assert (private_path.name, public_path.name) == ("receipt-key.pem", "receipt-key.pub.pem")
    assert stat.S_IMODE(private_path.stat().st_mode) == 0o600
    assert private_path.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")
    assert public_path.read_bytes().startswith(b"-----BEGIN PUBLIC KEY-----")
    signer = load_private_key(private_path)
    assert load_public_key(public_path) == signer.public_key_b64
    block = signer.sign("a" * 64)
    assert check_signature(block, "a" * 64)


def test_keygen_never_overwrites(tmp_path: Path) -> None:
    private_path, public_path = generate_keypair(tmp_path)
    before = (private_path.read_bytes(), public_path.read_bytes())
    with pytest.raises(ReceiptError, match="refusing to overwrite the existing key file"):
        generate_keypair(tmp_path)
    assert (private_path.read_bytes(), public_path.read_bytes()) == before


def test_keygen_refuses_when_only_the_public_half_exists(tmp_path: Path) -> None:
    (tmp_path / "receipt-key.pub.pem").write_text("old", encoding="utf-8")
    with pytest.raises(ReceiptError, match=r"receipt-key\.pub\.pem"):
        generate_keypair(tmp_path)
    assert not (tmp_path / "receipt-key.pem").exists()


def test_keygen_in_an_unusable_place_is_a_receipt_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("", encoding="utf-8")
    with pytest.raises(ReceiptError, match="cannot write the key pair"):
        generate_keypair(blocker / "keys")


def test_pem_after_leading_text_and_unreadable_paths(tmp_path: Path) -> None:
    commented = b"# receipt signing key\n" + private_pem()
    assert load_private_key(commented).public_key_b64 == SIGNER_PUBLIC
    with pytest.raises(ReceiptError, match=f"{tmp_path}: cannot read the private key file"):
        load_private_key(tmp_path)
