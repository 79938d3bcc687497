"""``-q/--quiet``: no progress; shared by ``run`` and ``compare``, which show it as they work."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import click

_F = TypeVar("_F", bound=Callable[..., object])


def quiet_option() -> Callable[[_F], _F]:
    """The option; progress goes to stderr, so stdout is the same with or without it."""
    return click.option(
        "-q",
        "--quiet",
        is_flag=True,
        help="Show no progress on stderr (a live line on a terminal, else a line per finished "
        "case); the report, warnings and errors are printed all the same.",
    )
