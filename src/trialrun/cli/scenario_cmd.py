"""``trialrun scenario``: write the support-agent pack, or verify an agent against a pack."""

from __future__ import annotations

from pathlib import Path

import click

from trialrun.cli import EXIT_FAILED, EXIT_OK
from trialrun.cli.pathparam import PathParam


@click.group(short_help="Write or verify an action-scenario pack.")
def scenario() -> None:
    """Action scenarios: agents whose tools change a simulated world, judged by business rules."""


@scenario.command()
@click.argument("directory", type=PathParam(path_type=Path, file_okay=False))
@click.option("--force", is_flag=True, help="Overwrite files that already exist.")
def init(directory: Path, force: bool) -> int:
    """Write the support-agent refund pack (agents naive and fixed) into DIRECTORY."""
    from trialrun.base.words import counted
    from trialrun.scenario.pack import init_pack

    written = init_pack(directory, force=force)
    click.echo(f"Wrote {counted(len(written), 'file')} to {directory}.")
    click.echo(f"Next: trialrun scenario verify {directory} --agent naive --out scenario_out")
    return EXIT_OK


@scenario.command()
@click.argument("directory", type=PathParam(path_type=Path))
@click.option("--agent", required=True, metavar="NAME", help="An agent named in pack.yaml.")
@click.option(
    "--out",
    type=PathParam(path_type=Path, file_okay=False),
    default=Path("scenario_out"),
    show_default=True,
    help="Directory for summary.json and report.html.",
)
def verify(directory: Path, agent: str, out: Path) -> int:
    """Run every scenario of the pack in DIRECTORY; exit 1 when a business rule is violated."""
    from trialrun.scenario.pack import verify_pack
    from trialrun.scenario.report import write_reports

    summary = verify_pack(directory, agent)
    paths = write_reports(out, summary)
    for entry in summary["scenarios"]:
        click.echo(f"{entry['status'].upper():7} {entry['id']}")
        for violation in entry["violations"]:
            effect_id = violation["effect"]["id"]
            click.echo(f"        {violation['rule']}: {violation['message']} (effect {effect_id})")
        if entry["error"]:
            click.echo(f"        {entry['error']}")
    total = len(summary["scenarios"])
    click.echo(f"{summary['passed']}/{total} passed. Wrote {', '.join(str(p) for p in paths)}")
    return EXIT_OK if summary["failed"] == 0 else EXIT_FAILED
