"""``trialrun baseline promote``: turn a run into the baseline later runs are compared with."""

from __future__ import annotations

from pathlib import Path

import click

from trialrun.cli.pathparam import PathParam


@click.group(short_help="Manage baseline files.")
def baseline() -> None:
    """Manage baseline files."""


@baseline.command()
@click.option(
    "--from",
    "from_",
    required=True,
    type=PathParam(path_type=Path),
    help="A run directory or its summary.json.",
)
@click.option(
    "--to",
    required=True,
    type=PathParam(path_type=Path, dir_okay=False),
    help="The baseline file to write.",
)
@click.option("--allow-failing", is_flag=True, help="Promote a run even though it did not pass.")
def promote(from_: Path, to: Path, allow_failing: bool) -> int:
    """Write the baseline file TO from the run FROM."""
    from trialrun.artifacts.baseline import promote as promote_run

    written = promote_run(
        from_, to, allow_failing=allow_failing, warn=lambda line: click.echo(line, err=True)
    )
    click.echo(f"Baseline written to: {written}")
    return 0
