"""``trialrun doctor SUITE [--probe]``: check a suite's setup before CI does."""

from __future__ import annotations

from pathlib import Path

import click

from trialrun.cli import EXIT_FAILED, EXIT_INVALID, EXIT_OK
from trialrun.cli.pathparam import PathParam


@click.command(short_help="Check a suite's setup.")
@click.argument("suite", type=PathParam(path_type=Path))
@click.option(
    "--probe",
    is_flag=True,
    help="Also replay the first case (this starts the agent) and report unused recordings.",
)
def doctor(suite: Path, probe: bool) -> int:
    """Check SUITE's files without running the agent.

    Exit 2 when the suite does not load (invalid input, as `trialrun run` would exit), 1 when
    any other check fails.
    """
    from trialrun.commands import doctor as doctor_checks

    loaded, checks = doctor_checks.diagnose(suite)
    for check in checks:
        click.echo(check.line())
    if loaded is None:
        return EXIT_INVALID
    if probe:
        probed = doctor_checks.probe(loaded)
        for check in probed:
            click.echo(check.line())
        click.echo(doctor_checks.replay_note(loaded))
        checks = [*checks, *probed]
    return EXIT_FAILED if doctor_checks.failed(checks) else EXIT_OK
