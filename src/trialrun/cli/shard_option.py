"""``--shard I/N``, shared by the commands that split their work across CI machines."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import click

_F = TypeVar("_F", bound=Callable[..., object])


def shard_option(merged_by: str) -> Callable[[_F], _F]:
    """The option (text ``I/N``, parsed by ``running.sharding.ShardSpec.parse`` where it is
    used); its help names the command that joins the shards."""
    return click.option(
        "--shard",
        metavar="I/N",
        help=f"Run only shard I of N (1-based); `{merged_by}` joins the shards' runs.",
    )
