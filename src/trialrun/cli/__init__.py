"""The ``trialrun`` command line: a lazy click group and the one place exit codes are decided.

Exit codes, the same for every command: 0 success, 1 the thing checked failed, 2 invalid input
(one ``error: <file>:<line>: <what>`` line per problem, never a traceback), 130 interrupted.
Subcommands are imported only when invoked, so ``trialrun --help`` stays fast.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

import click

from trialrun import __version__

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_INVALID = 2
EXIT_INTERRUPTED = 130

# name -> (module, attribute, one-line help shown by --help without importing the module)
_COMMANDS: dict[str, tuple[str, str, str]] = {
    "init": (
        "trialrun.cli.init_cmd",
        "init",
        "Write a demo suite, its agent, a baseline and a CI workflow.",
    ),
    "run": ("trialrun.cli.run_cmd", "run", "Run a suite: replay, record or live."),
    "compare": (
        "trialrun.cli.compare_cmd",
        "compare",
        "Compare a subject against the baseline and incumbent (`compare merge`: join shards).",
    ),
    "diff": ("trialrun.cli.diff_cmd", "diff", "Show what changed between two runs."),
    "gateway": (
        "trialrun.cli.gateway_cmd",
        "gateway",
        "Serve the model gateway: record and replay OpenAI and Anthropic calls.",
    ),
    "doctor": ("trialrun.cli.doctor_cmd", "doctor", "Check a suite's setup."),
    "publish": (
        "trialrun.cli.publish_cmd",
        "publish",
        "Publish a subject's bytes as a team version and attach its local receipts.",
    ),
    "scenario": (
        "trialrun.cli.scenario_cmd",
        "scenario",
        "Write or verify an action-scenario pack.",
    ),
    "baseline": ("trialrun.cli.baseline_cmd", "baseline", "Manage baseline files."),
    "merge": ("trialrun.cli.merge_cmd", "merge", "Merge shard runs into one run and verdict."),
    "receipt": ("trialrun.cli.receipt_cmd", "receipt", "Verify, sign and view run receipts."),
    "scores": (
        "trialrun.cli.scores_cmd",
        "scores",
        "Show the score of a subject's current bytes, or of every subject in a team.",
    ),
    "attempt": (
        "trialrun.cli.attempt_cmd",
        "attempt",
        "Let a coding agent work on a goal under a verifier, with rollback and a receipt.",
    ),
    "incident": (
        "trialrun.cli.incident_cmd",
        "incident",
        "Import a production trace; inspect, promote or replay it as a regression case.",
    ),
    "verify": ("trialrun.cli.verify_cmd", "verify", "Prove the gate catches planted regressions."),
    "mcp-proxy": (
        "trialrun.cli.mcp_proxy_cmd",
        "mcp_proxy",
        "Record or replay an MCP server (stdio or streamable HTTP).",
    ),
}

# (command, first argument) -> (module, attribute): a command reached by a word after another.
# `compare` takes a SUBJECT folder, so it cannot be a click group; `compare merge` is routed here
# instead, and only when `merge` comes right after `compare` (a folder named merge: ./merge).
_ROUTED: dict[tuple[str, str], tuple[str, str]] = {
    ("compare", "merge"): ("trialrun.cli.compare_cmd", "compare_merge"),
}


class LazyGroup(click.Group):
    """A group whose subcommands are imported on first use."""

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        routed = _ROUTED.get((name or "", rest[0])) if rest else None
        if routed is None:
            return name, command, rest
        module_name, attribute = routed
        target = getattr(importlib.import_module(module_name), attribute)
        assert isinstance(target, click.Command)
        return f"{name} {rest[0]}", target, rest[1:]

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = _COMMANDS.get(cmd_name)
        if entry is None:
            return None
        module_name, attribute, _ = entry
        command = getattr(importlib.import_module(module_name), attribute)
        assert isinstance(command, click.Command)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, _COMMANDS[name][2]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(
    __version__, "--version", prog_name="trialrun", message="%(prog)s %(version)s"
)
def cli() -> None:
    """Deterministic CI and trustworthy evaluation for tool-using AI agents."""


def main(argv: list[str] | None = None) -> None:
    """Console entry point: maps every outcome to an exit code."""
    sys.exit(run_cli(argv))


def run_cli(argv: list[str] | None = None) -> int:
    from trialrun.errors import ConfigError, TrialrunError

    try:
        args = sys.argv[1:] if argv is None else argv
        result: Any = cli.main(
            args=args, prog_name="trialrun", standalone_mode=False, obj={"argv": args}
        )
    except click.exceptions.Abort:
        click.echo("Interrupted.", err=True)
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:
        click.echo("Interrupted.", err=True)
        return EXIT_INTERRUPTED
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.ClickException as exc:
        _show_click_error(exc)
        return EXIT_INVALID
    except ConfigError as exc:
        for line in str(exc).splitlines():
            click.echo(f"error: {line}", err=True)
        return EXIT_INVALID
    except TrialrunError as exc:
        click.echo(f"error: {exc}", err=True)
        return EXIT_INVALID
    except BrokenPipeError:
        _silence_broken_pipe()
        return EXIT_FAILED
    except OSError as exc:
        # Last resort: loaders report their own files; this catches a path a command writes
        # to (an --out under a regular file, a folder it may not write). Without a file name
        # it is not a user's input problem, so it stays a traceback (a bug to report).
        if exc.filename is None:
            raise
        from trialrun.base.fsutil import describe_os_error

        click.echo(f"error: {describe_os_error(exc)}", err=True)
        return EXIT_INVALID
    return result if isinstance(result, int) else EXIT_OK


def _show_click_error(exc: click.ClickException) -> None:
    """click's errors in the house format: one ``error:`` line, then the help hint if any.

    click's own rendering (a usage block, then ``Error: ...``) would be several lines, none of
    them starting with ``error:``, which scripts grepping stderr for it would miss.
    """
    click.echo(f"error: {exc.format_message()}", err=True)
    ctx = exc.ctx if isinstance(exc, click.UsageError) else None
    if ctx is not None and ctx.command.get_help_option(ctx) is not None:
        option = max(ctx.command.get_help_option_names(ctx), key=len)
        click.echo(f"Try '{ctx.command_path} {option}' for help.", err=True)


def _silence_broken_pipe() -> None:
    """The reader went away (``trialrun run ... | head``): exit quietly, as a CLI should."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
