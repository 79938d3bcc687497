"""``trialrun publish SUBJECT``: share a subject's bytes and their receipts with the team.

Exit codes: 0 published (or already published, receipts attached), 1 refused (the newest local
receipt of these bytes is FAIL and nobody confirmed), 2 bad input or an unreachable team.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from trialrun.cli import EXIT_FAILED, EXIT_OK
from trialrun.cli.pathparam import PathParam
from trialrun.errors import ConfigError


@click.command(
    short_help="Publish a subject's bytes as a team version and attach its local receipts."
)
@click.argument("subject", type=PathParam(path_type=Path, file_okay=False))
@click.option("--team", metavar="REPO", help="The team's git repository [config.toml team].")
@click.option("--yes", is_flag=True, help="Publish even when the newest local receipt is FAIL.")
def publish(subject: Path, team: str | None, yes: bool) -> int:
    """Mint SUBJECT's bytes as a new version when they changed; attach their local receipts."""
    from trialrun.home.digest import content_digest
    from trialrun.team.publish import (
        handle,
        local_receipts,
        publish_subject,
        subject_identity,
        team_from_config,
    )

    if not subject.is_dir():
        raise ConfigError(f"{subject}: expected a subject directory, found none")
    subject_identity(subject)  # the subject's own files first, before the team is asked
    team_url = team_from_config(team)
    if team_url is None:
        raise ConfigError('no team: pass --team REPO or set team = "..." in config.toml')
    if handle() is None:
        raise ConfigError("no handle: set TRIALRUN_HANDLE or git config user.name")
    receipts = local_receipts(content_digest(subject))
    if receipts and receipts[-1].verdict == "FAIL" and not yes:
        newest = receipts[-1]
        question = f"The newest receipt of these bytes ({newest.run_id}) is FAIL. Publish anyway?"
        if not sys.stdin.isatty():
            click.echo(f"{question} Refused: no terminal to ask; pass --yes.", err=True)
            return EXIT_FAILED
        if not click.confirm(question, default=False):
            click.echo("Not published.", err=True)
            return EXIT_FAILED
    result = publish_subject(subject, team_url)
    if result.minted:
        click.echo(f"Published {result.name} to {team_url} as Version {result.version}.")
    else:
        click.echo(
            f"{result.name}: these bytes are already Version {result.version} on {team_url}."
        )
    from trialrun.base.words import counted

    click.echo(f"Attached {counted(result.attached, 'receipt')} to Version {result.version}.")
    return EXIT_OK
