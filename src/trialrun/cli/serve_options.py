"""Options of the commands that record and replay behind a socket (``gateway``, ``mcp-proxy``).

One definition each, so the two commands spell, type and check them the same way; each command
keeps its own help text.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import click

from trialrun.cli.pathparam import PathParam

_F = TypeVar("_F", bound=Callable[..., object])


def mode_option(choices: tuple[str, ...], help: str) -> Callable[[_F], _F]:
    """``--mode``, required: whether the command records, replays (or forwards only)."""
    return click.option("--mode", required=True, type=click.Choice(choices), help=help)


def directory_option(name: str, help: str, required: bool = False) -> Callable[[_F], _F]:
    """An option naming a directory (``--cassette-dir``, ``--events-dir``, ``--workdir``)."""
    kind = PathParam(file_okay=False, path_type=Path)
    return click.option(name, required=required, type=kind, help=help)


def file_option(name: str, help: str) -> Callable[[_F], _F]:
    """An option naming a file (``--cassette``, ``--events``, ``--rules``, ``--prices``)."""
    return click.option(name, type=PathParam(dir_okay=False, path_type=Path), help=help)


def address_option(
    name: str, dest: str, help: str, default: str | None = None
) -> Callable[[_F], _F]:
    """A ``HOST:PORT`` to serve on, parsed by ``trialrun.cli.addresses.parse_host_port``."""
    return click.option(
        name, dest, default=default, show_default=default is not None, metavar="HOST:PORT",
        help=help,
    )  # fmt: skip


def token_option(envvar: str) -> Callable[[_F], _F]:
    """``--token``: the key clients must present in the URL path (``/key/<token>/...``)."""
    return click.option(
        "--token",
        envvar=envvar,
        show_envvar=True,
        metavar="TEXT",
        help="Serve only requests whose path starts with /key/<TEXT> (put it in the clients' "
        "base URL). Prefer the environment variable: a command line is visible to other users.",
    )


def warn_if_exposed(host: str, command: str, token: str | None) -> None:
    """One stderr line when the address is reachable from other machines."""
    from trialrun.base.localserver import exposure_warning

    warning = exposure_warning(host, command, has_key=token is not None)
    if warning is not None:
        click.echo(warning, err=True)
