"""``trialrun receipt``: verify, sign, view and make keys for Run Receipt v0 files.

Exit codes follow the CLI's rule: 0 the receipt is valid (or the action succeeded), 1 the receipt
is tampered with, incomplete or otherwise fails a check, 2 the input cannot be used (an unreadable
file, a file that is no receipt at all, a receipt ``sign`` refuses, a bad key, a key file that
already exists). Every module behind these commands is imported inside the command, and
``cryptography`` only by the signing functions, so ``--help`` stays fast.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from trialrun.cli import EXIT_FAILED, EXIT_INVALID, EXIT_OK
from trialrun.cli.pathparam import PathParam

if TYPE_CHECKING:
    from trialrun.receipt.signing import Ed25519Signer

NOT_PROOF = (
    "This shows the receipt was not altered after it was written. It does not prove the run "
    "happened."
)


@click.group(short_help="Verify, sign and view run receipts.")
def receipt() -> None:
    """Verify, sign and view Run Receipt v0 files (receipt.jsonl)."""


@receipt.command()
@click.argument("file", type=PathParam(path_type=Path))
@click.option(
    "--public-key",
    metavar="KEY",
    help="Trusted signer: a PEM public key file or a base64 SPKI DER string. Implies that a "
    "signature is required.",
)
@click.option("--require-signature", is_flag=True, help="Fail when the receipt is unsigned.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON object.")
@click.option(
    "--schema", is_flag=True, help="Also check each event against the Run Receipt v0 schema."
)
def verify(
    file: Path, public_key: str | None, require_signature: bool, as_json: bool, schema: bool
) -> int:
    """Check FILE's hash chain, completeness and signature (exit 0 valid, 1 invalid)."""
    from trialrun.receipt.show import verdict_lines
    from trialrun.receipt.verify import verify_receipt

    pinned = _pinned_key(public_key) if public_key is not None else None
    result = verify_receipt(file, public_key=pinned, require_signature=require_signature)
    not_a_receipt = result.input_error is not None
    problems = _schema_problems(file) if schema and not not_a_receipt else []
    if as_json:
        payload: dict[str, Any] = result.to_json()
        # The reference's object says why; status says what it means (an incomplete run is
        # not a tampered one), in the words the exit code cannot carry.
        payload["status"] = result.status
        if schema:
            payload["schemaProblems"] = problems
        click.echo(json.dumps(payload, indent=2))
    if not_a_receipt:
        # Not a receipt at all is invalid input, not a failed check, with or without --json.
        click.echo(f"error: {file}: {_one_line(str(result.input_error))}", err=True)
        return EXIT_INVALID
    if not as_json:
        for line in verdict_lines(result):
            click.echo(line)
        if schema:
            from trialrun.base.words import counted

            click.echo(
                f"Schema: {counted(len(problems), 'problem')}" if problems else "Schema: valid"
            )
            for problem in problems:
                click.echo(f"  {_one_line(problem)}")
        if result.ok:
            click.echo(NOT_PROOF)
    return EXIT_OK if result.ok and not problems else EXIT_FAILED


@receipt.command()
@click.argument("file", type=PathParam(path_type=Path))
@click.option(
    "--key",
    "key_file",
    required=True,
    type=PathParam(path_type=Path),
    help="Path of the Ed25519 private key (PKCS8 PEM, as written by `trialrun receipt keygen`).",
)
def sign(file: Path, key_file: Path) -> int:
    """Sign the complete, valid, unsigned receipt FILE in place (its hashes do not change).

    A receipt that cannot be signed (not a receipt, tampered, incomplete, already signed) is
    input this command cannot use: exit 2, as for an unreadable file.
    """
    from trialrun.errors import ReceiptError
    from trialrun.receipt.signing import load_private_key

    try:
        signer = load_private_key(key_file)
    except ReceiptError as exc:
        raise ReceiptError(f"{exc} (--key)") from None
    refusal = sign_receipt(file, signer)
    if refusal is not None:
        click.echo(f"error: {file}: cannot sign it: {refusal}", err=True)
        return EXIT_INVALID
    click.echo(f"Signed {file} with public key {signer.public_key_b64}")
    return EXIT_OK


@receipt.command()
@click.argument("directory", type=PathParam(path_type=Path))
def keygen(directory: Path) -> int:
    """Write an Ed25519 key pair into DIRECTORY (never overwrites an existing key)."""
    from trialrun.receipt.signing import generate_keypair

    private_path, public_path = generate_keypair(directory)
    click.echo(f"Private key: {private_path}  (keep it secret: trialrun run --sign-key ...)")
    click.echo(f"Public key:  {public_path}  (share it: trialrun receipt verify --public-key ...)")
    return EXIT_OK


@receipt.command()
@click.argument("file", type=PathParam(path_type=Path))
@click.option(
    "--html",
    "html_out",
    type=PathParam(path_type=Path, dir_okay=False),
    help="Also write a self-contained HTML page here.",
)
def show(file: Path, html_out: Path | None) -> int:
    """Summarize FILE: goal, attempts or cases, verifier results, usage, files, verdict."""
    from trialrun.base.fsutil import atomic_write_text
    from trialrun.receipt.show import format_summary, read_receipt, render_view_html

    view = read_receipt(file)
    click.echo(format_summary(view), nl=False)
    if html_out is not None:
        atomic_write_text(html_out, render_view_html(view))
        click.echo(f"Wrote {html_out}")
    return EXIT_OK if view.verdict.ok else EXIT_FAILED


def sign_receipt(path: Path, signer: Ed25519Signer) -> str | None:
    """Add ``signer``'s signature to the run_end line of ``path``, atomically.

    Returns why the receipt cannot be signed (it must be a receipt, verify, be complete and be
    unsigned), or None once it is signed. Raises ReceiptError when the file cannot be read or
    replaced.
    """
    import io

    from trialrun.base.fsutil import atomic_write_bytes
    from trialrun.errors import ReceiptError
    from trialrun.receipt.verify import verify_receipt

    try:
        before = path.stat()
        original = path.read_bytes()
    except OSError as exc:
        raise ReceiptError(f"{path}: cannot read the receipt: {exc.strerror or exc}") from exc
    # Verify the very bytes that get signed: a file changed meanwhile cannot slip through.
    result = verify_receipt(io.BytesIO(original))
    if result.input_error is not None:
        return result.input_error
    if not result.ok:
        return f"it does not verify ({result.reason}): {_one_line(result.message)}"
    if result.signature.present:
        return f"it is already signed (public key {result.signature.public_key})"
    signed = _with_signature(original, signer)
    check = verify_receipt(
        io.BytesIO(signed), public_key=signer.public_key_b64, require_signature=True
    )
    if not check.ok or check.last_hash != result.last_hash:
        raise ReceiptError(f"{path}: the signed receipt does not verify: {check.message}")
    try:
        after = path.stat()
    except OSError as exc:
        raise ReceiptError(f"{path}: the receipt disappeared while signing it") from exc
    if (after.st_size, after.st_mtime_ns) != (before.st_size, before.st_mtime_ns):
        raise ReceiptError(f"{path}: the receipt changed while signing it; nothing was written")
    atomic_write_bytes(path, signed)
    return None


def _with_signature(original: bytes, signer: Ed25519Signer) -> bytes:
    """The same bytes with the last line (run_end) rewritten to carry ``signature``.

    The earlier lines are kept byte for byte. The run_end line becomes its canonical JSON with the
    signature added, as the reference writer writes a signed run_end; the signature is outside the
    hash input, so no hash changes.
    """
    from trialrun.base import canonjson
    from trialrun.receipt.verify import STRICT_JSON

    # The verifier splits on "\n" and drops one trailing empty string; "\r" is JSON whitespace.
    ending = b"\n" if original.endswith(b"\n") else b""
    body = original[: len(original) - len(ending)]
    if body.endswith(b"\r"):
        body, ending = body[:-1], b"\r" + ending
    start = body.rfind(b"\n") + 1
    event = STRICT_JSON.decode(body[start:].decode("utf-8"))
    event["signature"] = signer.sign(event["hash"])
    return body[:start] + canonjson.dumps(event).encode("utf-8") + ending


def _pinned_key(value: str) -> str:
    """The base64 SPKI DER of ``--public-key``: a PEM file, or the base64 text itself."""
    from trialrun.errors import ReceiptError
    from trialrun.receipt.signing import load_public_key

    try:
        return load_public_key(value)
    except ReceiptError as exc:
        raise ReceiptError(f"{exc} (--public-key)") from exc


def _schema_problems(file: Path) -> list[str]:
    from trialrun.receipt.schema import schema_problems

    return schema_problems(file)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())
