"""Ed25519 signatures for Run Receipt v0: keys, signing, checking, key generation.

The signature sits on ``run_end`` as ``{"alg": "ed25519", "publicKey": <base64 SPKI DER>,
"sig": <base64>}`` and signs the UTF-8 bytes of the run_end ``hash`` *string* (64 hex
characters), exactly as the reference does. Keys on disk are what ``receipt keygen`` writes:
PKCS8 PEM for the private key (mode 0600) and SPKI PEM for the public one.

``cryptography`` is imported inside the functions only: starting the CLI, writing an unsigned
receipt or verifying an unsigned one never pays for it.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from trialrun.base.fsutil import naming, write_all
from trialrun.errors import ReceiptError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

__all__ = [
    "PRIVATE_KEY_FILE",
    "PUBLIC_KEY_FILE",
    "Ed25519Signer",
    "check_signature",
    "generate_keypair",
    "load_private_key",
    "load_public_key",
    "looks_like_key_text",
]

ALG: Final = "ed25519"
_MEMBERS: Final = frozenset({"alg", "publicKey", "sig"})
PRIVATE_KEY_FILE: Final = "receipt-key.pem"
PUBLIC_KEY_FILE: Final = "receipt-key.pub.pem"
_SEED_BYTES: Final = 32
_HASH_HEX = re.compile(r"[0-9a-f]{64}")
_PEM_MARKER = "-----BEGIN"
_NOT_BASE64 = re.compile(r"[^A-Za-z0-9+/]")
_WHITESPACE = " \t\n\r\f\v"
_HIDDEN_TEXT = re.compile(r"[^A-Za-z0-9+/_\-\s]")
# Base64 (standard or URL-safe) of at least 32 bytes, and hex of at least 32 bytes.
_BASE64_KEY = re.compile(r"[A-Za-z0-9+/_=-]{43,}")
_HEX_KEY = re.compile(r"[0-9a-fA-F]{64,}")
_UPPER = re.compile(r"[A-Z]")
_LOWER = re.compile(r"[a-z]")

KeySource = str | Path | bytes


class Ed25519Signer:
    """Signs run_end hashes with one Ed25519 private key."""

    __slots__ = ("_key", "public_key_b64")

    def __init__(self, private_key: Ed25519PrivateKey) -> None:
        self._key = private_key
        self.public_key_b64: str = _spki_b64(private_key.public_key())

    @classmethod
    def from_seed(cls, seed: bytes) -> Ed25519Signer:
        """The signer for a raw 32-byte Ed25519 seed (test keys are given this way)."""
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        if len(seed) != _SEED_BYTES:
            raise ReceiptError(f"an Ed25519 seed is {_SEED_BYTES} bytes, found {len(seed)} bytes")
        return cls(Ed25519PrivateKey.from_private_bytes(seed))

    def sign(self, hash_hex: str) -> dict[str, str]:
        """The ``signature`` member for a run_end whose ``hash`` is ``hash_hex``."""
        if not isinstance(hash_hex, str) or not _HASH_HEX.fullmatch(hash_hex):
            raise ReceiptError(
                f"can only sign an event hash (64 lowercase hex characters), found {hash_hex!r}"
            )
        sig = self._key.sign(hash_hex.encode("ascii"))
        return {"alg": ALG, "publicKey": self.public_key_b64, "sig": _b64(sig)}

    def __repr__(self) -> str:
        # Never show key material, not even by accident in a traceback.
        return f"Ed25519Signer(publicKey={self.public_key_b64!r})"


def load_private_key(path_or_pem: KeySource) -> Ed25519Signer:
    """A signer from a PKCS8 PEM (file or text), or base64 of PKCS8 DER or of the 32-byte seed.

    A ``str`` is PEM text when it holds a PEM block, else a file path when such a file exists,
    else base64. Messages never repeat the key material.
    """
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    raw, where = _read_source(path_or_pem, "private")
    if _PEM_MARKER.encode() in raw:
        if b"PUBLIC KEY-----" in raw and b"PRIVATE KEY-----" not in raw:
            raise ReceiptError(
                f"{where}: holds a public key; signing needs the private key "
                f"({PRIVATE_KEY_FILE}, PKCS8 PEM)"
            )
        if b"ENCRYPTED PRIVATE KEY" in raw:
            raise ReceiptError(
                f"{where}: an encrypted private key; expected an unencrypted PKCS8 PEM "
                f"as written by 'trialrun receipt keygen'"
            )
        try:
            key: object = serialization.load_pem_private_key(raw, password=None)
        except (ValueError, TypeError) as exc:
            raise ReceiptError(
                f"{where}: not a readable PKCS8 PEM private key: {_first_line(exc)}"
            ) from None
    else:
        der = _decode_key_bytes(raw)
        if len(der) == _SEED_BYTES:
            return Ed25519Signer(Ed25519PrivateKey.from_private_bytes(der))
        try:
            key = serialization.load_der_private_key(der, password=None)
        except (ValueError, TypeError) as exc:
            raise ReceiptError(
                f"{where}: neither a 32-byte Ed25519 seed nor PKCS8 DER, as base64 or raw "
                f"({len(der)} bytes): {_first_line(exc)}"
            ) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise ReceiptError(
            f"{where}: holds a private key of type {_key_kind(key)}; "
            "receipts are signed with Ed25519"
        )
    return Ed25519Signer(key)


def load_public_key(value: KeySource) -> str:
    """The base64 SPKI DER of an Ed25519 public key given as PEM (file or text) or base64 DER.

    The result is re-encoded from the parsed key, so equal keys give equal strings (the verifier
    compares it with the receipt's embedded ``publicKey`` as text, as the reference does).
    """
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    raw, where = _read_source(value, "public")
    if _PEM_MARKER.encode() in raw:
        if b"PRIVATE KEY-----" in raw:
            raise ReceiptError(
                f"{where}: holds a private key; expected the path of the public key file "
                f"({PUBLIC_KEY_FILE}) or its base64 SPKI DER"
            )
        try:
            key: object = serialization.load_pem_public_key(raw)
        except (ValueError, TypeError) as exc:
            raise ReceiptError(
                f"{where}: not a readable SPKI PEM public key: {_first_line(exc)}"
            ) from None
    else:
        der = _decode_key_bytes(raw)
        try:
            key = serialization.load_der_public_key(der)
        except (ValueError, TypeError) as exc:
            seed = "; 32 bytes is a raw key or a private seed" if len(der) == _SEED_BYTES else ""
            raise ReceiptError(
                f"{where}: not SPKI DER of a public key ({len(der)} bytes{seed}): "
                f"{_first_line(exc)}; expected the path of a PEM public key file "
                f"({PUBLIC_KEY_FILE}) or base64 SPKI DER"
            ) from None
    if not isinstance(key, Ed25519PublicKey):
        raise ReceiptError(
            f"{where}: holds a public key of type {_key_kind(key)}; "
            "receipts are signed with Ed25519"
        )
    return _spki_b64(key)


def check_signature(sig: Mapping[str, Any], hash_hex: str) -> bool:
    """Whether ``sig`` is a valid Ed25519 signature block over ``hash_hex``. Never raises.

    The block holds exactly ``alg``, ``publicKey`` and ``sig``: the signature covers the hash,
    not the block, so any other member would read as signed without being so.
    Base64 is read in the spellings Node's ``Buffer.from(text, "base64")`` (the reference)
    accepts for the same bytes: white space, URL-safe letters, padding or none. Text Node would
    skip (other characters, anything after ``=``) is refused: it would read as signed.
    """
    try:
        if not isinstance(sig, Mapping) or sig.get("alg") != ALG or sig.keys() != _MEMBERS:
            return False
        public_key, signature = sig.get("publicKey"), sig.get("sig")
        if not (
            isinstance(public_key, str) and isinstance(signature, str) and isinstance(hash_hex, str)
        ):
            return False
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

        key = serialization.load_der_public_key(_node_b64decode(public_key))
        if not isinstance(key, Ed25519PublicKey):
            return False
        key.verify(_node_b64decode(signature), hash_hex.encode("utf-8", "surrogatepass"))
    except Exception:  # InvalidSignature, and malformed keys or blocks of every kind alike
        return False
    return True


def generate_keypair(directory: Path) -> tuple[Path, Path]:
    """Write a new ``receipt-key.pem`` (PKCS8, mode 0600) and ``receipt-key.pub.pem`` (SPKI).

    Refuses to replace either file: losing a signing key is not recoverable.
    """
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        # mkdir would fail with FileExistsError, which reads as "a key file exists": it does not.
        raise ReceiptError(f"{directory}: expected a directory for the key pair, found a file")
    private_path, public_path = directory / PRIVATE_KEY_FILE, directory / PUBLIC_KEY_FILE
    for existing in (private_path, public_path):
        if existing.exists() or existing.is_symlink():
            raise ReceiptError(f"refusing to overwrite the existing key file {existing}")
    key = Ed25519PrivateKey.generate()
    private_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    public_pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    try:
        directory.mkdir(parents=True, exist_ok=True)
        _write_new(private_path, private_pem, 0o600)
        try:
            _write_new(public_path, public_pem, 0o644)
        except BaseException:
            # A private key without its public half would only confuse the next keygen.
            private_path.unlink(missing_ok=True)
            raise
    except FileExistsError as exc:
        raise ReceiptError(f"refusing to overwrite the existing key file {exc.filename}") from None
    except OSError as exc:
        where = exc.filename or directory
        raise ReceiptError(f"{where}: cannot write the key pair: {exc.strerror}") from exc
    return private_path, public_path


def _write_new(path: Path, data: bytes, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), mode)
    try:
        try:
            if hasattr(os, "fchmod"):
                os.fchmod(fd, mode)  # the umask may have removed bits we promise (0600 stays 0600)
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException as exc:
        # Half a key (a full disk) is no key: it must not block the next keygen either.
        path.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise naming(exc, path) from None
        raise


def _read_source(source: KeySource, kind: str) -> tuple[bytes, str]:
    """The key bytes and how to name their origin in messages (a path, never the key)."""
    if isinstance(source, Path):
        return _read_file(source, kind), str(source)
    if isinstance(source, bytes):
        return source, f"the given {kind} key"
    if not isinstance(source, str):
        raise ReceiptError(
            f"a {kind} key is given as a path, PEM text or base64 DER, "
            f"found {type(source).__name__}"
        )
    if _PEM_MARKER in source:
        where = f"the {kind} key given (it looks like PEM key text, not a path)"
        return source.encode("utf-8", "replace"), where
    stripped = source.strip()
    if not stripped:
        raise ReceiptError(f"the {kind} key is empty: expected a path, PEM text or base64 DER")
    path = Path(stripped).expanduser()
    if _is_file(path):
        return _read_file(path, kind), str(path)
    if _is_base64(stripped):
        return (
            stripped.encode("ascii"),
            f"the {kind} key given (no file has that name: it looks like base64 key text)",
        )
    return _read_file(path, kind), str(path)


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except (OSError, ValueError):  # names too long or with NUL are simply not files
        return False


def _read_file(path: Path, kind: str) -> bytes:
    try:
        return path.read_bytes()
    except (OSError, ValueError) as exc:
        if looks_like_key_text(str(path)):
            # Key material pasted where a path belongs (an environment variable set to the
            # key's content): the message must not carry it to a CI log.
            raise ReceiptError(
                f"the {kind} key given is no file and looks like key text (not shown); "
                f"expected the path of a key file ({_KEY_FILES[kind]})"
            ) from None
        if isinstance(exc, FileNotFoundError):
            raise ReceiptError(f"{path}: {kind} key file not found") from None
        reason = exc.strerror if isinstance(exc, OSError) else str(exc)
        raise ReceiptError(f"{path}: cannot read the {kind} key file: {reason}") from None


_KEY_FILES = {
    "private": f"PKCS8 PEM, such as {PRIVATE_KEY_FILE}",
    "public": f"SPKI PEM, such as {PUBLIC_KEY_FILE}",
}


def looks_like_key_text(text: str) -> bool:
    """Whether ``text``, given where a key's path belongs, is more likely the key itself.

    A PEM block, or one word of base64 or hex long enough for 32 bytes. Base64 of random bytes
    mixes upper- and lowercase throughout, which long path names without a dot rarely do.
    """
    if _PEM_MARKER in text or "PRIVATE KEY" in text:
        return True
    compact = "".join(text.split())
    if _HEX_KEY.fullmatch(compact):
        return True
    return (
        _BASE64_KEY.fullmatch(compact) is not None
        and len(_UPPER.findall(compact)) >= 3
        and len(_LOWER.findall(compact)) >= 3
    )


def _is_base64(text: str) -> bool:
    try:
        base64.b64decode("".join(text.split()), validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _decode_key_bytes(raw: bytes) -> bytes:
    """Base64 text (whitespace allowed) to DER; anything else is taken as DER already."""
    compact = b"".join(raw.split())
    try:
        return base64.b64decode(compact, validate=True)
    except (binascii.Error, ValueError):
        return raw


def _node_b64decode(text: str) -> bytes:
    data, _, padding = text.partition("=")
    # Node skips any character it does not know and stops at "="; trialrun accepts the same
    # spellings of the same bytes (white space, URL-safe letters, no padding) but not text
    # hidden where the decoder never looks: it would read as signed without being so.
    if _HIDDEN_TEXT.search(data) or padding.strip("=" + _WHITESPACE):
        raise ValueError("base64 holds characters that are not part of the encoding")
    data = _NOT_BASE64.sub("", data.replace("-", "+").replace("_", "/"))
    if len(data) % 4 == 1:  # a lone final character carries no whole byte
        data = data[:-1]
    return base64.b64decode(data + "=" * (-len(data) % 4))


def _spki_b64(key: Ed25519PublicKey) -> str:
    from cryptography.hazmat.primitives import serialization

    der = key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return _b64(der)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _key_kind(key: object) -> str:
    name = type(key).__name__.lstrip("_")
    for suffix in ("PrivateKey", "PublicKey"):
        name = name.removesuffix(suffix)
    return name or "unknown"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
