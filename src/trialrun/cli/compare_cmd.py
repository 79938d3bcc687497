"""``trialrun compare SUBJECT``: is the candidate better than the baseline (and the incumbent)?

Exit codes: 0 the run finished (whatever the verdict), 1 with ``--gate`` when the verdict is
FAIL or a user command failed on every call (a broken setup), 2 bad input, 130 interrupted
(after the partial receipt is written and the report printed: the arms that finished were paid
for, so their rows are kept). docs/compare.md has the details.

``--shard I/N`` runs one shard of the compare into a shard directory (``compare.shards``);
``trialrun compare merge SHARD_DIR...`` (``compare_merge`` below) joins the shards and then
reports, stores, gates and commits exactly like an unsharded compare. ``merge`` right after
``compare`` is that command (the root group routes it, ``trialrun.cli``); a subject folder
named ``merge`` is written ``./merge``.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import click

from trialrun.cli import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK
from trialrun.cli.jobs_option import jobs_option
from trialrun.cli.pathparam import PathParam
from trialrun.cli.quiet_option import quiet_option
from trialrun.cli.shard_option import shard_option
from trialrun.errors import ConfigError

if TYPE_CHECKING:
    from collections.abc import Callable

    from trialrun.compare.engine import CompareOptions, CompareResult, ShardRunResult
    from trialrun.compare.outcome import CompareOutcome
    from trialrun.report.progress import CompareTracker

_TEAM_HELP = "The team store [config.toml team]."
_NO_COMMIT_HELP = "Keep the receipt local even when the bytes are published."
_JSON_HELP = "Print the receipt instead of the report."
_GATE_HELP = "Exit 1 when the verdict is FAIL or the setup is broken (a command failed every call)."


@click.command(
    short_help=(
        "Compare a subject against the baseline and incumbent (`compare merge`: join shards)."
    )
)
@click.argument("subject", type=PathParam(path_type=Path, file_okay=False))
@click.option("--k", "k", type=click.IntRange(min=1), help="Repetitions per case [compare.yaml].")
@click.option(
    "--case",
    "case_names",
    multiple=True,
    metavar="NAME",
    help="Run only this case (repeatable); the session is then left out.",
)
@click.option(
    "--judge-command",
    metavar="CMD",
    help="The judge command line (split like a shell would; placeholders as in judge.command) "
    "[compare.yaml judge.command].",
)
@jobs_option("Arms (and judge calls) run")
@click.option("--json", "as_json", is_flag=True, help=_JSON_HELP)
@click.option("--gate", is_flag=True, help=_GATE_HELP)
@click.option("--seed", type=int, help="Seed of the arm order shuffle [compare.yaml].")
@click.option(
    "--rescore",
    metavar="RUN",
    help="Re-decide a stored run (its id or directory) with today's checks and judge; "
    "no arm runs again.",
)
@click.option("--team", metavar="REPO", help=_TEAM_HELP)
@click.option("--no-commit", is_flag=True, help=_NO_COMMIT_HELP)
@shard_option("trialrun compare merge")
@click.option(
    "--out",
    type=PathParam(path_type=Path, file_okay=False),
    help=(
        "With --shard: where the shard directory is written [trialrun_out]. Otherwise: also "
        "copy the run (receipt, report.html, log, transcripts) to OUT/<name>/<run id>/."
    ),
)
@click.option(
    "--triggers-k",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="How many times the trigger selector (compare.yaml triggers.command) sees each prompt.",
)
@quiet_option()
def compare(
    subject: Path,
    k: int | None,
    case_names: tuple[str, ...],
    judge_command: str | None,
    jobs: int,
    as_json: bool,
    gate: bool,
    seed: int | None,
    rescore: str | None,
    triggers_k: int,
    team: str | None,
    no_commit: bool,
    shard: str | None,
    out: Path | None,
    quiet: bool,
) -> int:
    """Run SUBJECT's eval cases with and without it, decide every row, print the verdict.

    `trialrun compare merge SHARD_DIR...` joins the shard directories of `--shard I/N` runs.
    """
    from trialrun.cli.interrupts import sigterm_as_ctrl_c
    from trialrun.compare.engine import CompareOptions, run_compare

    if shard is not None:
        _refuse_with_shard(rescore=rescore, team=team, no_commit=no_commit, gate=gate)
    elif rescore is None and not no_commit:
        from trialrun.team.publish import team_from_config

        # Read config.toml before any arm runs: a broken file would otherwise surface only
        # after the whole (paid-for) comparison, when the receipt is committed.
        team_from_config(team)
    options = CompareOptions(
        subject=subject,
        k=k,
        case_names=case_names,
        judge_command=_judge_argv(judge_command),
        jobs=jobs,
        seed=seed,
        rescore=rescore,
        triggers_k=triggers_k,
        command_line=shlex.join(["trialrun", *click.get_current_context().find_root().obj["argv"]]),
        team=team,
    )
    if shard is not None:
        with sigterm_as_ctrl_c():
            return _run_shard(
                options, shard, out or Path("trialrun_out"), as_json=as_json, quiet=quiet
            )
    with _progress(quiet) as tracker, sigterm_as_ctrl_c():
        result = run_compare(options, observer=tracker)
    _print_result(result, as_json=as_json, out=out)

    def commit() -> str:
        from trialrun.team.publish import commit_after_compare

        return commit_after_compare(
            result.receipt, result.run_dir.receipt, subject, team=team, no_commit=no_commit
        )

    return _finish(result, gate=gate, commit=commit if rescore is None else None)


@click.command()
@click.argument(
    "shard_dirs",
    nargs=-1,
    required=True,
    type=PathParam(path_type=Path, file_okay=False),
    metavar="SHARD_DIR...",
)
@click.option("--json", "as_json", is_flag=True, help=_JSON_HELP)
@click.option("--gate", is_flag=True, help=_GATE_HELP)
@click.option("--team", metavar="REPO", help=_TEAM_HELP)
@click.option("--no-commit", is_flag=True, help=_NO_COMMIT_HELP)
@click.option(
    "--out",
    type=PathParam(path_type=Path, file_okay=False),
    help="Also copy the merged run (receipt, report.html, log, transcripts) to OUT/<name>/<run>/.",
)
def compare_merge(
    shard_dirs: tuple[Path, ...],
    as_json: bool,
    gate: bool,
    team: str | None,
    no_commit: bool,
    out: Path | None,
) -> int:
    """Join the shard directories of `trialrun compare SUBJECT --shard I/N` into one compare.

    Writes the receipt and report an unsharded compare writes, then commits like one. Shards
    of another plan or other bytes, a unit in two shards and a directory that is not a shard
    are refused (exit 2); a missing shard's units are named holes (a partial run).
    """
    from trialrun.compare.merge import merge_shards

    if not no_commit:
        from trialrun.team.publish import team_from_config

        team_from_config(team)
    result, subject = merge_shards(list(shard_dirs))
    _print_result(result, as_json=as_json, out=out)

    def commit() -> str:
        from trialrun.team.publish import commit_compare_receipt

        return commit_compare_receipt(
            result.receipt,
            result.run_dir.receipt,
            lambda: (subject.name, subject.subject_id),
            subject=subject.path,
            team=team,
            no_commit=no_commit,
        )

    return _finish(result, gate=gate, commit=commit)


def _refuse_with_shard(
    *, rescore: str | None, team: str | None, no_commit: bool, gate: bool
) -> None:
    """A shard decides no verdict and commits nothing: the options that act on one are refused."""
    given = [
        name
        for name, value in (
            ("--rescore", rescore),
            ("--team", team),
            ("--no-commit", no_commit),
            ("--gate", gate),
        )
        if value
    ]
    if given:
        raise click.UsageError(
            f"{', '.join(given)}: not for a --shard run, which runs its share of the arms and "
            "decides no verdict: --gate, --team and --no-commit go to `trialrun compare merge`, "
            "--rescore to an unsharded compare."
        )


@contextmanager
def _progress(quiet: bool) -> Iterator[CompareTracker]:
    """The progress of the arms and rows on stderr (nothing with ``--quiet``)."""
    from trialrun.report.progress import CompareTracker
    from trialrun.report.progress_display import progress_display

    with progress_display(quiet=quiet) as display:
        tracker = CompareTracker(display)
        display.bind(tracker.status_line)
        yield tracker


def _run_shard(
    options: CompareOptions, shard: str, out: Path, *, as_json: bool, quiet: bool
) -> int:
    from trialrun.base.fsutil import dumps_json
    from trialrun.compare.engine import run_compare_shard
    from trialrun.running.sharding import ShardSpec

    with _progress(quiet) as tracker:
        ran = run_compare_shard(options, ShardSpec.parse(shard), out, observer=tracker)
    if as_json:
        click.echo(dumps_json(ran.document))
    else:
        click.echo(_shard_summary(ran))
    if ran.interrupted:
        click.echo("Interrupted: the shard directory records the units that finished.", err=True)
        return EXIT_INTERRUPTED
    return EXIT_OK


def _shard_summary(ran: ShardRunResult) -> str:
    block, document = ran.document["shard"], ran.document
    units = ", ".join(f"{case}/{rep}" for case, rep in block["units"]) or "none"
    total = len(document["plan"]["units"])
    lines = [
        f"shard {block['index']}/{block['count']}: {len(block['units'])} of {total} units "
        f"({units}); {len(document['rows'])} rows decided",
    ]
    if document["triggers"] is not None:
        lines.append(f"trigger eval: {len(document['triggers']['probes'])} prompts")
    lines.append(f"shard directory: {ran.path}")
    lines.append("join every shard with: trialrun compare merge SHARD_DIR...")
    return "\n".join(lines)


def _print_result(result: CompareResult, *, as_json: bool, out: Path | None) -> None:
    from trialrun.base.fsutil import dumps_json
    from trialrun.compare.report import format_report
    from trialrun.compare.report_html import REPORT_FILE

    if as_json:
        click.echo(dumps_json(result.receipt))
    else:
        click.echo(format_report(result.outcome))
    _warn_about_commands(result.outcome)
    click.echo(f"receipt: {result.run_dir.receipt}", err=True)
    click.echo(f"report: {result.run_dir.path / REPORT_FILE}", err=True)
    if out is not None:
        from trialrun.compare.store import export_run

        name = str(result.receipt.get("skill_name") or "compare")
        click.echo(f"copied to: {export_run(result.run_dir, out, name)}", err=True)


def _finish(result: CompareResult, *, gate: bool, commit: Callable[[], str] | None) -> int:
    """Commit (unless interrupted or ``commit`` is None), then the exit code of the verdict."""
    if not result.interrupted and commit is not None:
        click.echo(commit(), err=True)
    if result.interrupted:
        click.echo("Interrupted: the receipt records a partial run.", err=True)
        return EXIT_INTERRUPTED
    if gate and result.outcome.verdict == "FAIL":
        return EXIT_FAILED
    if gate and result.outcome.broken_setup:
        broken = ", ".join(health.command for health in result.outcome.broken_setup)
        click.echo(f"--gate: failing: a broken setup ({broken}) decided nothing", err=True)
        return EXIT_FAILED
    return EXIT_OK


def _warn_about_commands(outcome: CompareOutcome) -> None:
    """Repeat on stderr what a CI log reader must not miss: a command that mostly failed."""
    for health in outcome.health:
        message = health.message()
        if message is not None and health.mostly_failed:
            click.echo(message, err=True)


def _judge_argv(text: str | None) -> tuple[str, ...] | None:
    if text is None:
        return None
    try:
        argv = tuple(shlex.split(text))
    except ValueError as exc:
        raise ConfigError(f"--judge-command: cannot split {text!r} ({exc})") from None
    if not argv:
        raise ConfigError("--judge-command: expected a command line, found an empty string")
    return argv
