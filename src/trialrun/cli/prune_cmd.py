"""``trialrun prune RUN_DIR [--dry-run]``: remove the recordings a replay run did not use.

Exit 0 when the recordings were pruned (or, with ``--dry-run``, listed), 2 when the run cannot
be pruned (not a replay, interrupted, its recordings changed since): the ``ConfigError`` reaches
``run_cli``, which prints ``error: <file>: <what>``, and no file is touched.
"""

from __future__ import annotations

from pathlib import Path

import click

from trialrun.base.words import counted
from trialrun.cli import EXIT_OK
from trialrun.cli.pathparam import PathParam


@click.command(short_help="Remove the recordings a replay run did not use.")
@click.argument("run_dir", type=PathParam(path_type=Path))
@click.option("--dry-run", is_flag=True, help="List what would be removed; change nothing.")
def prune(run_dir: Path, dry_run: bool) -> int:
    """Remove from their files the recordings (tool, MCP, model, HTTP) that the replay run in
    RUN_DIR left unused, as its unused-recordings.json names them.

    A recording goes only when every case sharing its file left it unused and ended cleanly.
    The other lines of each file stay byte-identical.
    """
    from trialrun.commands import prune as pruning

    planned = pruning.plan(run_dir)
    verb = "would remove" if dry_run else "removed"
    for file_plan in planned.files:
        if file_plan.kept_because is not None:
            click.echo(f"kept {file_plan.shown}: {file_plan.kept_because}")
            continue
        for removal in file_plan.removals:
            click.echo(f"{verb} {file_plan.shown}:{removal.line}: {removal.kind} {removal.name}")
    if not dry_run:
        pruning.apply(planned)
    files = len({f.shown for f in planned.files if f.loses_recordings()})
    done = "would be removed" if dry_run else "removed"
    click.echo(f"{counted(planned.count, 'unused recording')} {done} from {counted(files, 'file')}")
    return EXIT_OK
