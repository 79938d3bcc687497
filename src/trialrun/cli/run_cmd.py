"""``trialrun run SUITE``: run the cases, compare with the baseline, write every artifact."""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import TYPE_CHECKING

import click

from trialrun.cli import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK
from trialrun.cli.jobs_option import jobs_option
from trialrun.cli.pathparam import PathParam
from trialrun.cli.quiet_option import quiet_option
from trialrun.cli.shard_option import shard_option
from trialrun.cli.signing_option import load_signer, sign_key_option

if TYPE_CHECKING:
    from trialrun.commands.run import FinishedRun, PreparedRun


@click.command(short_help="Run a suite: replay, record or live.")
@click.argument("suite", type=PathParam(path_type=Path))
@click.option(
    "--mode",
    type=click.Choice(["replay", "record", "update", "live"]),
    help="Override the suite's mode: replay cassettes, record them, update them (replay what "
    "still matches, record the rest), or call tools live.",
)
@click.option(
    "--keep-unused",
    is_flag=True,
    help="Update mode: keep the recordings no call used (default: drop them).",
)
@click.option(
    "--fail-on-change",
    is_flag=True,
    help="Record and update modes: exit 1 when a re-recorded answer changed (not only in "
    "volatile parts); see recordings-diff.json.",
)
@click.option("--baseline", type=PathParam(path_type=Path), help="Compare with this baseline file.")
@click.option("--no-baseline", is_flag=True, help="Skip the baseline comparison.")
@click.option(
    "--out",
    "--output-dir",
    "out",
    type=PathParam(path_type=Path, file_okay=False),
    help="Directory for run artifacts (default: the suite's output_dir, else ./trialrun_out).",
)
@jobs_option("Cases to run")
@click.option(
    "--case", "case_ids", multiple=True, metavar="ID", help="Run only this case (repeatable)."
)
@click.option(
    "--last-failed",
    "last_failed",
    is_flag=True,
    help="Run only the cases that failed or errored when they last ran (all when none did).",
)
@click.option(
    "--failed-first",
    "failed_first",
    is_flag=True,
    help="Run the cases that failed or errored when they last ran first, then the others.",
)
@click.option(
    "--repeat",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    metavar="K",
    help="Run every case K times; report each case's pass rate (docs/flaky-repeat.md).",
)
@click.option(
    "--retries",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    metavar="N",
    help="Run a failed case again, up to N more times; passing on a retry makes it flaky.",
)
@shard_option("trialrun merge")
@sign_key_option("the run's receipt")
@quiet_option()
def run(
    suite: Path,
    mode: str | None,
    baseline: Path | None,
    no_baseline: bool,
    out: Path | None,
    jobs: int,
    case_ids: tuple[str, ...],
    last_failed: bool,
    failed_first: bool,
    repeat: int,
    retries: int,
    shard: str | None,
    sign_key: Path | None,
    quiet: bool,
    keep_unused: bool = False,
    fail_on_change: bool = False,
) -> int:
    """Run SUITE (a directory with suite.yaml, or the YAML file itself)."""
    # The console view is imported once the run is over: the first agent starts sooner.
    from trialrun.commands.run import execute_run, prepare_run
    from trialrun.report.progress import RunTracker
    from trialrun.report.progress_display import progress_display

    if baseline is not None and no_baseline:
        raise click.UsageError("--baseline and --no-baseline exclude each other.")
    if repeat > 1 and retries > 0:
        raise click.UsageError(
            "--repeat and --retries exclude each other: --repeat measures each case's pass "
            "rate over K runs, --retries gives a failed case more tries."
        )
    update = mode == "update"
    if keep_unused and not update:
        raise click.UsageError("--keep-unused needs --mode update.")
    prepared = prepare_run(
        suite, case_ids=case_ids, shard=shard, mode="record" if update else mode,
        baseline=baseline, no_baseline=no_baseline,
        warn=lambda message: click.echo(message, err=True),
        last_failed=last_failed, failed_first=failed_first,
    )  # fmt: skip
    if fail_on_change and prepared.mode != "record":
        raise click.UsageError(
            f"--fail-on-change needs --mode record or update; the run's mode is {prepared.mode}."
        )
    if repeat > 1 or retries > 0:
        import dataclasses

        from trialrun.running.repeats import Repeats

        prepared = dataclasses.replace(prepared, repeats=Repeats(repeat, retries))
    argv = click.get_current_context().find_root().obj["argv"]
    signer = load_signer(sign_key)
    with progress_display(quiet=quiet) as display:
        tracker = RunTracker(display, total=len(prepared.suite.cases))
        display.bind(tracker.status_line)
        tracker.start()
        finished = execute_run(
            prepared, jobs=jobs, out=out, command_line=shlex.join(["trialrun", *argv]),
            signer=signer,
            on_case_decided=lambda result: tracker.case_done(result.case_id, result.status),
            update=update, keep_unused=keep_unused,
        )  # fmt: skip
    from trialrun.commands.run import remember_failures
    from trialrun.config.paths import display_path
    from trialrun.report.console import format_run

    remember_failures(prepared, finished, lambda message: click.echo(message, err=True))

    recorded = finished.recorded
    click.echo(format_run(recorded.result, recorded.summary, recorded.regression))
    if os.environ.get("GITHUB_ACTIONS") == "true" or os.environ.get("GITHUB_STEP_SUMMARY"):
        _report_to_github(prepared, finished)
    click.echo(f"Artifacts written to: {display_path(recorded.run_dir)}")
    if finished.interrupted:
        click.echo("Interrupted: the summary covers the cases that finished.", err=True)
        return EXIT_INTERRUPTED
    if fail_on_change and _changed_recordings(finished):
        return EXIT_FAILED
    return EXIT_OK if recorded.passed else EXIT_FAILED


def _changed_recordings(finished: FinishedRun) -> bool:
    """``--fail-on-change``: say which recordings changed; True when any did."""
    from trialrun.base.words import counted
    from trialrun.report.console import clean
    from trialrun.report.recordings import changed_lines

    changed = changed_lines(finished.recorded.result.cases)
    if changed:
        click.echo(
            f"error: {counted(len(changed), 'recording')} changed (--fail-on-change): "
            + "; ".join(clean(line) for line in changed[:5])
            + ("; ..." if len(changed) > 5 else ""),
            err=True,
        )
    return bool(changed)


def _report_to_github(prepared: PreparedRun, finished: FinishedRun) -> None:
    from trialrun.cli.github_report import report_to_github
    from trialrun.config.paths import display_path
    from trialrun.report.annotations import case_locations

    recorded = finished.recorded
    report_to_github(
        recorded.result,
        recorded.summary,
        recorded.regression,
        artifacts=display_path(recorded.run_dir),
        case_locations=case_locations(prepared.suite),
    )
