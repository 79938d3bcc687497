"""``trialrun compare SUBJECT``: is the candidate better than the baseline (and the incumbent)?

Exit codes: 0 the run finished (whatever the verdict), 1 with ``--gate`` when the verdict is
FAIL or a user command failed on every call (a broken setup), 2 bad input, 130 interrupted
(after the partial receipt is written and the report printed: the arms that finished were paid
for, so their rows are kept). docs/compare.md has the details.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING

import click

from trialrun.cli import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK
from trialrun.cli.jobs_option import jobs_option
from trialrun.cli.pathparam import PathParam
from trialrun.errors import ConfigError

if TYPE_CHECKING:
    from trialrun.compare.outcome import CompareOutcome


@click.command(
    short_help="Compare a subject against the baseline and incumbent: rows, verdict, receipt."
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
@click.option("--json", "as_json", is_flag=True, help="Print the receipt instead of the report.")
@click.option(
    "--gate",
    is_flag=True,
    help="Exit 1 when the verdict is FAIL or the setup is broken (a command failed every call).",
)
@click.option("--seed", type=int, help="Seed of the arm order shuffle [compare.yaml].")
@click.option(
    "--rescore",
    metavar="RUN",
    help="Re-decide a stored run (its id or directory) with today's checks and judge; "
    "no arm runs again.",
)
@click.option("--team", metavar="REPO", help="The team store [config.toml team].")
@click.option(
    "--no-commit", is_flag=True, help="Keep the receipt local even when the bytes are published."
)
@click.option(
    "--triggers-k",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="How many times the trigger selector (compare.yaml triggers.command) sees each prompt.",
)
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
) -> int:
    """Run SUBJECT's eval cases with and without it, decide every row, print the verdict."""
    from trialrun.base.fsutil import dumps_json
    from trialrun.compare.engine import CompareOptions, run_compare
    from trialrun.compare.report import format_report

    if rescore is None and not no_commit:
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
    )
    result = run_compare(options)
    if as_json:
        click.echo(dumps_json(result.receipt))
    else:
        click.echo(format_report(result.outcome))
    _warn_about_commands(result.outcome)
    click.echo(f"receipt: {result.run_dir.receipt}", err=True)
    if not result.interrupted and rescore is None:
        from trialrun.team.publish import commit_after_compare

        message = commit_after_compare(
            result.receipt, result.run_dir.receipt, subject, team=team, no_commit=no_commit
        )
        click.echo(message, err=True)
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
