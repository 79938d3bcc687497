"""``trialrun merge RUN_DIR... --out DIR``: one verdict from the run directories of all shards."""

from __future__ import annotations

import shlex
from pathlib import Path

import click

from trialrun.cli import EXIT_FAILED, EXIT_OK
from trialrun.cli.pathparam import PathParam
from trialrun.cli.signing_option import load_signer, sign_key_option


@click.command(short_help="Merge shard runs into one run and verdict.")
@click.argument(
    "run_dirs", nargs=-1, required=True, type=PathParam(path_type=Path), metavar="RUN_DIR..."
)
@click.option(
    "--out",
    "--output-dir",
    "out",
    type=PathParam(path_type=Path, file_okay=False),
    required=True,
    help="Directory for the merged run's artifacts (written to <out>/<suite>/<run_id>/).",
)
@click.option(
    "--baseline",
    type=PathParam(path_type=Path),
    help="Apply the regression gates of this baseline file to the merged results.",
)
@sign_key_option("the merged receipt")
def merge(
    run_dirs: tuple[Path, ...], out: Path, baseline: Path | None, sign_key: Path | None
) -> int:
    """Merge the run directories of `trialrun run --shard I/N` (every shard exactly once).

    Exits like a single run: 0 when every case passed and the baseline gates passed, 1
    otherwise, 2 when the shards do not make up one complete run.
    """
    from trialrun.artifacts.merge import merge_runs
    from trialrun.cli.github_report import report_to_github
    from trialrun.config.paths import display_path
    from trialrun.report.console import format_run

    signer = load_signer(sign_key)
    argv = click.get_current_context().find_root().obj["argv"]
    outcome = merge_runs(
        list(run_dirs),
        out,
        baseline=baseline,
        signer=signer,
        command_line=shlex.join(["trialrun", *argv]),
    )
    click.echo(format_run(outcome.result, outcome.summary, outcome.regression))
    # Shards do not carry their case files, so the annotations name cases without a location.
    report_to_github(
        outcome.result,
        outcome.summary,
        outcome.regression,
        artifacts=display_path(outcome.run_dir),
        case_locations={},
    )
    click.echo(f"Merged {len(run_dirs)} shards into: {display_path(outcome.run_dir)}")
    return EXIT_OK if outcome.passed else EXIT_FAILED
