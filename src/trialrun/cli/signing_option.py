"""``--sign-key`` (or ``TRIALRUN_SIGN_KEY``), shared by every command that writes a receipt."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import click

from trialrun.cli.pathparam import PathParam

if TYPE_CHECKING:
    from trialrun.receipt.signing import Ed25519Signer

_F = TypeVar("_F", bound=Callable[..., object])


def sign_key_option(what: str) -> Callable[[_F], _F]:
    """The option, with help naming ``what`` the key signs."""
    return click.option(
        "--sign-key",
        type=PathParam(path_type=Path),
        envvar="TRIALRUN_SIGN_KEY",
        help=f"Path of the Ed25519 private key (PEM) that signs {what} "
        "[env: TRIALRUN_SIGN_KEY, also a path].",
    )


def load_signer(sign_key: Path | None) -> Ed25519Signer | None:
    """Load the key before any work starts, so a bad key costs nothing."""
    if sign_key is None:
        return None
    from trialrun.errors import ReceiptError
    from trialrun.receipt.signing import load_private_key

    try:
        return load_private_key(sign_key)
    except ReceiptError as exc:
        raise ReceiptError(f"{exc} (--sign-key or TRIALRUN_SIGN_KEY)") from None
