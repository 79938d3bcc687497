"""The run's certificate authority: made when a case first needs it, gone when the run ends.

The recorder answers ``CONNECT host:port`` by speaking TLS as ``host`` with a leaf certificate
this authority signs; the agent trusts it through the CA bundle it is given (the system's
authorities plus this one, so a TLS host reached some other way still verifies). Keys are
EC P-256: generating one takes about as long as an RSA signature, where an RSA key takes
tens of milliseconds. One authority per run, one leaf per host, each cached for the run.

The authority's private key never leaves memory. ``ssl`` loads a certificate chain only from
files, so a leaf's key is written to a private directory (mode 0700) and removed as soon as its
context holds it.
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import os
import ssl
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ec import EllipticCurvePrivateKey
    from cryptography.x509 import Certificate

_VALID = datetime.timedelta(days=2)
_BACKDATE = datetime.timedelta(hours=1)


class RunAuthority:
    """A certificate authority for one run, and the TLS contexts it serves hosts with."""

    def __init__(self, scratch: Path) -> None:
        """``scratch``: a directory of the run's own, where leaf keys pass on their way in."""
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        self._scratch = scratch
        self._lock = threading.Lock()
        self._contexts: dict[str, ssl.SSLContext] = {}
        self._key: EllipticCurvePrivateKey = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name(
            [
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, "trialrun"),
                x509.NameAttribute(NameOID.COMMON_NAME, f"trialrun run CA {os.urandom(4).hex()}"),
            ]
        )
        now = datetime.datetime.now(datetime.UTC)
        public = self._key.public_key()
        self.certificate: Certificate = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(public)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _BACKDATE)
            .not_valid_after(now + _VALID)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
            .sign(self._key, hashes.SHA256())
        )

    def pem(self) -> bytes:
        from cryptography.hazmat.primitives.serialization import Encoding

        return self.certificate.public_bytes(Encoding.PEM)

    def context_for(self, host: str) -> ssl.SSLContext:
        """A server context presenting a certificate for ``host`` (a name or an IP address),
        offering HTTP/1.1 only."""
        host = host.lower().strip("[]")
        with self._lock:
            context = self._contexts.get(host)
            if context is None:
                context = self._make_context(host)
                self._contexts[host] = context
            return context

    def _make_context(self, host: str) -> ssl.SSLContext:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        key = ec.generate_private_key(ec.SECP256R1())
        alternative: x509.GeneralName
        try:
            alternative = x509.IPAddress(ipaddress.ip_address(host))
        except ValueError:
            alternative = x509.DNSName(host)
        now = datetime.datetime.now(datetime.UTC)
        certificate = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host[:64])]))
            .issuer_name(self.certificate.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _BACKDATE)
            .not_valid_after(now + _VALID)
            .add_extension(x509.SubjectAlternativeName([alternative]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()),
                critical=False,
            )
            .sign(self._key, hashes.SHA256())
        )
        chain = certificate.public_bytes(serialization.Encoding.PEM) + self.pem()
        secret = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.set_alpn_protocols(["http/1.1"])
        with tempfile.TemporaryDirectory(dir=self._scratch) as private:
            cert_file, key_file = Path(private) / "leaf.pem", Path(private) / "leaf.key"
            cert_file.write_bytes(chain)
            descriptor = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "wb") as stream:
                stream.write(secret)
            context.load_cert_chain(cert_file, key_file)
        return context


def system_authorities() -> bytes:
    """The PEM text of the authorities this machine's OpenSSL trusts by default."""
    paths = ssl.get_default_verify_paths()
    for candidate in (paths.cafile, paths.openssl_cafile):
        if candidate and os.path.isfile(candidate):
            try:
                return Path(candidate).read_bytes()
            except OSError:
                continue
    # No bundle file (a directory of hashed certificates only): what a default context loaded.
    context = ssl.create_default_context()
    return "".join(
        ssl.DER_cert_to_PEM_cert(der) for der in context.get_ca_certs(binary_form=True)
    ).encode("ascii")


def bundle(authority: RunAuthority, extra: Path | None = None) -> bytes:
    """The CA bundle an agent gets: the system's authorities, ``extra`` (the bundle the agent's
    environment named in ``SSL_CERT_FILE``, if any), then the run's authority."""
    parts = [system_authorities()]
    if extra is not None:
        # A variable naming no readable file adds nothing, as it does for the agent.
        with contextlib.suppress(OSError):
            parts.append(extra.read_bytes())
    parts.append(authority.pem())
    return b"\n".join(part.rstrip(b"\n") + b"\n" for part in parts if part.strip())
