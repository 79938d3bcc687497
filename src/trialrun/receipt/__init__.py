"""Run Receipt v0: write, sign and verify tamper-evident JSONL run records.

    from trialrun.receipt import ReceiptWriter, verify_receipt

Names are imported on first use: verifying a receipt never pays for jinja2, and nothing here
imports ``cryptography`` until a signature is made or checked.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trialrun.base.lazyexport import lazy_getattr

_EXPORTS = {
    "ReceiptWriter": "trialrun.receipt.writer",
    "verify_receipt": "trialrun.receipt.verify",
    "VerifyResult": "trialrun.receipt.verify",
    "SignatureResult": "trialrun.receipt.verify",
    "Ed25519Signer": "trialrun.receipt.signing",
    "load_private_key": "trialrun.receipt.signing",
    "load_public_key": "trialrun.receipt.signing",
    "generate_keypair": "trialrun.receipt.signing",
}

__all__ = [
    "Ed25519Signer",
    "ReceiptWriter",
    "SignatureResult",
    "VerifyResult",
    "generate_keypair",
    "load_private_key",
    "load_public_key",
    "verify_receipt",
]


__getattr__ = lazy_getattr(globals(), _EXPORTS)

if TYPE_CHECKING:
    from trialrun.receipt.signing import (
        Ed25519Signer,
        generate_keypair,
        load_private_key,
        load_public_key,
    )
    from trialrun.receipt.verify import SignatureResult, VerifyResult, verify_receipt
    from trialrun.receipt.writer import ReceiptWriter
