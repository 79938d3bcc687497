"""``-j/--jobs``, shared by the commands that run work side by side (``run``, ``compare``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import click

_F = TypeVar("_F", bound=Callable[..., object])


def jobs_option(what: str) -> Callable[[_F], _F]:
    """The option, with help naming ``what`` runs at once."""
    return click.option(
        "-j",
        "--jobs",
        type=click.IntRange(min=1),
        default=1,
        show_default=True,
        help=f"{what} at the same time.",
    )
