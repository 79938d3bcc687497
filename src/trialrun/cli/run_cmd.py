"""``trialrun run SUITE``: run the cases, compare with the baseline, write every artifact."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shlex
import signal
from collections.abc import Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from trialrun.cli import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK
from trialrun.cli.pathparam import PathParam
from trialrun.cli.signing_option import load_signer, sign_key_option

if TYPE_CHECKING:
    from trialrun.artifacts.recording import Baseline
    from trialrun.config import Suite
    from trialrun.config.models import Mode
    from trialrun.running.preflight import Preflight


@click.command()
@click.argument("suite", type=PathParam(path_type=Path))
@click.option(
    "--mode",
    type=click.Choice(["replay", "record", "live"]),
    help="Override the suite's mode: replay cassettes, record them, or call tools live.",
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
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Cases to run at the same time.",
)
@click.option(
    "--case", "case_ids", multiple=True, metavar="ID", help="Run only this case (repeatable)."
)
@click.option(
    "--shard",
    metavar="I/N",
    help="Run only shard I of N (1-based); `trialrun merge` joins the shards' runs.",
)
@sign_key_option("the run's receipt")
def run(
    suite: Path,
    mode: str | None,
    baseline: Path | None,
    no_baseline: bool,
    out: Path | None,
    jobs: int,
    case_ids: tuple[str, ...],
    shard: str | None,
    sign_key: Path | None,
) -> int:
    """Run SUITE (a directory with suite.yaml, or the YAML file itself)."""
    from trialrun.artifacts.recording import RunRecorder
    from trialrun.config import load_suite
    from trialrun.config.paths import display_path
    from trialrun.report.console import format_run
    from trialrun.running.runner import RunOptions, RunProgress, resolve_mode, run_suite

    if baseline is not None and no_baseline:
        raise click.UsageError("--baseline and --no-baseline exclude each other.")
    loaded = load_suite(suite, case_ids=case_ids)
    shard_block: dict[str, Any] | None = None
    if shard is not None:
        from trialrun.running.sharding import ShardSpec, select_shard, shard_info

        spec = ShardSpec.parse(shard)
        shard_block = shard_info(spec, [case.config.id for case in loaded.cases])
        loaded = dataclasses.replace(loaded, cases=select_shard(loaded.cases, spec))
    run_mode = resolve_mode(loaded, mode)
    checked, baseline_found = _check_inputs(loaded, run_mode, baseline, no_baseline)
    argv = click.get_current_context().find_root().obj["argv"]
    recorder = RunRecorder(
        loaded,
        mode=run_mode,
        command_line=shlex.join(["trialrun", *argv]),
        out_dir=out,
        signer=load_signer(sign_key),
    )
    progress = RunProgress()
    interrupted = False
    try:
        asyncio.run(
            _stop_on_sigterm(
                run_suite(
                    loaded,
                    RunOptions(mode=run_mode, jobs=jobs, preflight=checked),
                    progress,
                    on_case_done=lambda _index, result: recorder.record(result),
                )
            )
        )
    except (KeyboardInterrupt, asyncio.CancelledError):
        interrupted = True
    recorded = recorder.finish(
        progress.ordered(), interrupted=interrupted, baseline=baseline_found, shard=shard_block
    )
    result, summary, regression = recorded.result, recorded.summary, recorded.regression

    click.echo(format_run(result, summary, regression))
    if os.environ.get("GITHUB_ACTIONS") == "true" or os.environ.get("GITHUB_STEP_SUMMARY"):
        from trialrun.cli.github_report import report_to_github
        from trialrun.report.annotations import case_locations

        report_to_github(
            result,
            summary,
            regression,
            artifacts=display_path(recorded.run_dir),
            case_locations=case_locations(loaded),
        )
    click.echo(f"Artifacts written to: {display_path(recorded.run_dir)}")
    if interrupted:
        click.echo("Interrupted: the summary covers the cases that finished.", err=True)
        return EXIT_INTERRUPTED
    return EXIT_OK if recorded.passed else EXIT_FAILED


async def _stop_on_sigterm(work: Coroutine[Any, Any, Any]) -> None:
    """A cancelled CI job sends SIGTERM: stop like Ctrl-C, so the artifacts are still written."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    loop.add_signal_handler(signal.SIGTERM, task.cancel)
    try:
        await work
    finally:
        loop.remove_signal_handler(signal.SIGTERM)


def _check_inputs(
    suite: Suite, mode: Mode, baseline: Path | None, no_baseline: bool
) -> tuple[Preflight, Baseline | None]:
    """Every file the run reads, checked before any agent starts; all problems in one report."""
    from trialrun.errors import ConfigError, ConfigErrors
    from trialrun.running.preflight import preflight

    errors: list[ConfigError] = []
    checked: Preflight | None = None
    found: Baseline | None = None
    try:
        checked = preflight(suite, mode)
    except ConfigError as exc:
        errors.append(exc)
    try:
        found = _baseline_for(suite.baseline_path, baseline, no_baseline)
    except ConfigError as exc:
        errors.append(exc)
    collected = ConfigErrors.collect(errors)
    if collected is not None:
        raise collected
    assert checked is not None
    return checked, found


def _baseline_for(
    configured: Path | None, explicit: Path | None, disabled: bool
) -> Baseline | None:
    """Load the baseline before any case runs, so a bad file costs nothing."""
    from trialrun.artifacts.baseline import load_baseline
    from trialrun.artifacts.recording import Baseline
    from trialrun.errors import ConfigError

    if disabled:
        return None
    for given in (explicit, configured):
        if given is not None and given.is_dir():
            raise ConfigError("expected a baseline file, found a directory", file=given)
    if explicit is not None:
        if not explicit.is_file():
            raise ConfigError(
                "baseline file not found (create one with `trialrun baseline promote`, "
                "or pass --no-baseline)",
                file=explicit,
            )
        return Baseline(load_baseline(explicit), explicit)
    if configured is None:
        return None
    if not configured.is_file():
        click.echo(
            f"warning: baseline {configured} does not exist yet; regression checks skipped "
            "(create it with `trialrun baseline promote`).",
            err=True,
        )
        return None
    return Baseline(load_baseline(configured), configured)
