"""``trialrun init``: scaffold a demo suite that passes, ready for pull-request CI."""

from __future__ import annotations

from pathlib import Path

import click

from trialrun.cli.pathparam import PathParam


@click.command(short_help="Write a demo suite, its agent, a baseline and a CI workflow.")
@click.option(
    "--language",
    type=click.Choice(["python", "node"]),
    default="python",
    show_default=True,
    help="Language of the demo agent.",
)
@click.option(
    "--path",
    "path",
    type=PathParam(path_type=Path, file_okay=False),
    default=None,
    help="Directory that will hold the suite; init writes nothing outside it unless "
    "--workflow-dir says so. [default: ./evals, with baselines/, .github/workflows/ and "
    ".gitignore in the current directory]",
)
@click.option(
    "--workflow-dir",
    type=PathParam(path_type=Path, file_okay=False),
    default=None,
    help="Directory for the GitHub workflow, e.g. the repository root's .github/workflows "
    "[default: <root>/.github/workflows when the repository root is the directory init writes "
    "to, else .github/workflows inside it].",
)
@click.option(
    "--template",
    type=click.Choice(["demo", "mcp", "openai-agents", "langgraph"]),
    default="demo",
    show_default=True,
    help="demo: a protocol agent; mcp, openai-agents, langgraph: real-framework agents that "
    "replay offline from bundled recordings.",
)
@click.option("--force", is_flag=True, help="Overwrite files written by an earlier init.")
def init(
    language: str, path: Path | None, workflow_dir: Path | None, template: str, force: bool
) -> int:
    """Write a demo suite, its agent, a baseline and .github/workflows/trialrun.yml."""
    from trialrun.commands.scaffold import init_project
    from trialrun.config.paths import display_path

    if template != "demo" and language != "python":
        raise click.UsageError(
            f"--template {template} writes a Python agent; --language applies to the demo only"
        )

    report = init_project(
        path,
        language="node" if language == "node" else "python",
        force=force,
        template=template,
        workflow_dir=workflow_dir,
    )
    for title, paths in (
        ("Written", report.written),
        ("Unchanged", report.unchanged),
        ("Kept (differs from the template; --force to overwrite)", report.kept),
    ):
        if paths:
            click.echo(f"{title}:")
            for written in paths:
                click.echo(f"  {display_path(written)}")
    if report.updated:
        click.echo("Updated:")
        for updated, change in report.updated:
            click.echo(f"  {display_path(updated)}: {change}")
    for note in report.notes:
        click.echo(f"Note: {note}")
    suites = path if path is not None else Path("evals")
    click.echo(f"Next: trialrun run {display_path(suites / template)} --mode replay")
    click.echo("Commit these files to run the same check on every pull request.")
    return 0
