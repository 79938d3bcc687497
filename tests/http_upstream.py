"""A scripted HTTP(S) API for the recorder's tests, on a loopback address the proxy variables
do not exempt (127.0.0.2), with a test certificate authority of its own for HTTPS.

Routes: ``GET /items?page=N`` (JSON naming the page), ``POST /echo`` (the body back, with a
``Set-Cookie``), ``GET /stream`` (server-sent events in chunks; after the first it waits for
``stream_gate`` when that is set), anything else 404. Every request
is counted and its ``Authorization`` header kept, so a test can say the server received nothing.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import ssl
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

HOST = "127.0.0.2"


def _ca_key_usage() -> Any:
    from cryptography import x509

    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=True,
        crl_sign=True,
        encipher_only=False,
        decipher_only=False,
    )


class UpstreamAuthority:
    """A CA and a server certificate for ``HOST``, as PEM files in ``directory``."""

    def __init__(self, directory: Path) -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        now = datetime.datetime.now(datetime.UTC)
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "upstream test CA")])
        ca = (
            x509.CertificateBuilder()
            .subject_name(ca_name)
            .issuer_name(ca_name)
            .public_key(ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(_ca_key_usage(), critical=True)
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
            )
            .sign(ca_key, hashes.SHA256())
        )
        key = ec.generate_private_key(ec.SECP256R1())
        leaf = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, HOST)]))
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(
                x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(HOST))]),
                critical=False,
            )
            # Python 3.13 verifies strictly (VERIFY_X509_STRICT): a leaf names its issuer's key.
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                critical=False,
            )
            .sign(ca_key, hashes.SHA256())
        )
        pem = serialization.Encoding.PEM
        self.ca_file = directory / "upstream-ca.pem"
        self.ca_file.write_bytes(ca.public_bytes(pem))
        self.cert_file = directory / "upstream-cert.pem"
        self.cert_file.write_bytes(leaf.public_bytes(pem))
        self.key_file = directory / "upstream-key.pem"
        self.key_file.write_bytes(
            key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        )


class ScriptedApi:
    """The API, started on ``HOST`` at a free port; ``tls``: serve HTTPS with that authority."""

    def __init__(self, tls: UpstreamAuthority | None = None) -> None:
        self.requests: list[tuple[str, str]] = []
        self.authorizations: list[str] = []
        self.stream_gate: threading.Event | None = None
        self._lock = threading.Lock()
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                api.note(self)
                if self.path.startswith("/items"):
                    page = self.path.partition("page=")[2] or "1"
                    self.reply(200, json.dumps({"page": page, "items": [f"item-{page}"]}))
                elif self.path == "/stream":
                    self.stream()
                else:
                    self.reply(404, json.dumps({"error": "no such route"}))

            def do_POST(self) -> None:
                api.note(self)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                self.reply(200, body.decode("utf-8"), cookie="session=sess-9c1f44")

            def reply(self, status: int, text: str, cookie: str | None = None) -> None:
                data = text.encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                if cookie is not None:
                    self.send_header("Set-Cookie", cookie)
                self.end_headers()
                self.wfile.write(data)

            def stream(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for number in range(3):
                    if number == 1 and api.stream_gate is not None:
                        api.stream_gate.wait(timeout=60)
                    event = f'data: {{"n": {number}}}\n\n'.encode()
                    self.wfile.write(f"{len(event):x}\r\n".encode() + event + b"\r\n")
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")

        self._server = ThreadingHTTPServer((HOST, 0), Handler)
        self._server.daemon_threads = True
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(tls.cert_file, tls.key_file)
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self.port = self._server.server_address[1]
        scheme = "https" if tls is not None else "http"
        self.url = f"{scheme}://{HOST}:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def note(self, handler: BaseHTTPRequestHandler) -> None:
        with self._lock:
            self.requests.append((handler.command, handler.path))
            self.authorizations.append(handler.headers.get("Authorization") or "")

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


def http_suite(tmp_path: Path, name: str, agent: Path) -> Path:
    """A replay suite at ``tmp_path/suite`` of one case ``t1`` (its cases written by the test)
    whose agent is the Python script ``agent``."""
    root = tmp_path / "suite"
    (root / "cases").mkdir(parents=True)
    (root / "cassettes").mkdir()
    (root / "cassettes" / "t1.jsonl").write_text("")
    (root / "suite.yaml").write_text(
        f"suite_name: {name}\n"
        f"agent_command: [{json.dumps(sys.executable)}, {json.dumps(str(agent))}]\n"
        "mode: replay\ncases_path: cases\ntool_registry: []\n"
    )
    return root
