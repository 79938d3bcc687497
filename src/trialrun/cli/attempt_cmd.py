"""``trialrun attempt``: hand a coding agent a goal under a verifier; get back a receipt.

Exit codes: 0 the verifier passed, 1 it never did, 2 bad input (``error: ...``), 130 interrupted
(Ctrl-C or SIGTERM: the workspace is restored to the last kept state and the receipt ends with
stopReason ``interrupted``). docs/attempt.md describes the loop and the receipt.

``trialrun attempt recover`` (routed by ``trialrun.cli.group``: ``attempt`` takes no argument)
puts a workspace back from the snapshot a killed attempt left, or drops it with ``--discard``;
until then ``trialrun attempt`` refuses to start in that workspace.
"""

from __future__ import annotations

from pathlib import Path

import click

from trialrun.cli import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK
from trialrun.cli.interrupts import sigterm_as_ctrl_c
from trialrun.cli.pathparam import PathParam
from trialrun.cli.signing_option import load_signer, sign_key_option

DEFAULT_OUT_DIR = Path("trialrun_out") / "attempt"


@click.command(
    short_help="Let a coding agent work on a goal under a verifier, with rollback and a receipt."
)
@click.option("--goal", required=True, help="What the agent should achieve (TRIALRUN_GOAL).")
@click.option(
    "--verify",
    "verify_command",
    required=True,
    metavar="CMD",
    help="Shell command that judges the workspace (run with bash -c); exit 0 means done.",
)
@click.option(
    "--agent",
    "agent_command",
    required=True,
    metavar="CMD",
    help="Shell command that runs the agent in the workspace (bash -c), once per attempt.",
)
@click.option(
    "--attempts",
    type=click.IntRange(min=1),
    default=3,
    show_default=True,
    help="How many times the agent may try.",
)
@click.option(
    "--workspace",
    type=PathParam(path_type=Path),
    default=Path("."),
    show_default=True,
    help="The directory the agent works in (snapshotted, diffed and rolled back).",
)
@click.option(
    "--receipt",
    "receipt_path",
    type=PathParam(path_type=Path, dir_okay=False),
    help="Where to write the receipt [default: trialrun_out/attempt/<run_id>/receipt.jsonl "
    "under the current directory]. Inside the workspace it is left out of snapshots, file "
    "changes and rollbacks.",
)
@sign_key_option("the receipt")
@click.option(
    "--timeout",
    "agent_timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=600.0,
    show_default=True,
    help="Seconds one agent run may take before its process group is killed.",
)
@click.option(
    "--verify-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=600.0,
    show_default=True,
    help="Seconds one verify run may take before its process group is killed.",
)
def attempt(
    goal: str,
    verify_command: str,
    agent_command: str,
    attempts: int,
    workspace: Path,
    receipt_path: Path | None,
    sign_key: Path | None,
    agent_timeout: float,
    verify_timeout: float,
) -> int:
    """Let AGENT work on GOAL in WORKSPACE until VERIFY passes, rolling back worse attempts.

    If trialrun is killed, `trialrun attempt recover --workspace DIR` restores the workspace.
    """
    from trialrun.artifacts.rundir import new_run_id
    from trialrun.attempt.harness import AttemptOptions, run_attempts

    signer = load_signer(sign_key)
    if receipt_path is None:
        receipt_path = DEFAULT_OUT_DIR / new_run_id() / "receipt.jsonl"
    options = AttemptOptions(
        goal=goal,
        verify_command=verify_command,
        agent_command=agent_command,
        workspace=workspace,
        receipt_path=receipt_path,
        attempts=attempts,
        agent_timeout_s=agent_timeout,
        verify_timeout_s=verify_timeout,
        signer=signer,
    )
    with sigterm_as_ctrl_c():
        report = run_attempts(options, progress=lambda line: click.echo(line, err=True))
    from trialrun.base.words import counted

    scores = [record.failure_score for record in report.attempts]
    click.echo(
        f"{report.stop_reason}: verified {str(report.verified).lower()} after "
        f"{counted(len(report.attempts), 'attempt')}; "
        f"failureScore baseline {report.baseline_score}, "
        f"attempts {', '.join('-' if s is None else str(s) for s in scores) or '-'}; "
        f"{counted(report.files_changed, 'file')} changed"
    )
    click.echo(f"Receipt: {report.receipt_path}")
    if report.stop_reason == "interrupted":
        return EXIT_INTERRUPTED
    return EXIT_OK if report.verified else EXIT_FAILED


@click.command(
    "recover",
    short_help="Restore a workspace from the snapshot a killed `trialrun attempt` left.",
)
@click.option(
    "--workspace",
    type=PathParam(path_type=Path),
    default=Path("."),
    show_default=True,
    help="The workspace the stopped attempt worked in.",
)
@click.option(
    "--discard",
    is_flag=True,
    help="Delete the snapshot and keep the workspace as it is now.",
)
def attempt_recover(workspace: Path, discard: bool) -> int:
    """Put WORKSPACE back to its last kept state from the snapshot a stopped attempt left.

    The snapshot is removed afterwards; a new `trialrun attempt` may then start there.
    """
    from trialrun.attempt.recovery import recover

    root = workspace.resolve()
    if not root.is_dir():
        raise click.BadParameter(
            f"expected an existing directory, found {workspace}", param_hint="--workspace"
        )
    recovered = recover(root, discard=discard)
    if discard:
        click.echo(f"Discarded the snapshot {recovered.path}; {root} is left as it is.")
    elif recovered.restored is None:
        click.echo(
            f"Nothing to restore: {root} was in a kept state when the run stopped; "
            f"removed {recovered.path}."
        )
    else:
        click.echo(
            f"Restored {root} to its last kept state ({recovered.restored}); "
            f"removed {recovered.path}."
        )
    return EXIT_OK
