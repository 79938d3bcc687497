"""The ``trialrun`` command line: its entry point and the one place exit codes are decided.

Exit codes, the same for every command: 0 success, 1 the thing checked failed, 2 invalid input
(one ``error: <file>:<line>: <what>`` line per problem, never a traceback), 130 interrupted.

Start-up is paid by every CI job, so this module imports no click until a command line is run,
and the click group of ``trialrun.cli.group`` imports a subcommand's module only when it is
invoked: ``trialrun --help`` loads click and the command table, nothing more.
"""

from __future__ import annotations

import sys

from trialrun.base.lazyexport import lazy_getattr

# Not typing.TYPE_CHECKING: ``import trialrun.cli`` stays free of typing, and mypy takes any
# name TYPE_CHECKING as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    import click

    from trialrun.cli.group import cli as cli

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_INVALID = 2
EXIT_INTERRUPTED = 130

__getattr__ = lazy_getattr(globals(), {"cli": "trialrun.cli.group"})


def main(argv: list[str] | None = None) -> None:
    """Console entry point: runs one command line and exits with its code.

    Here the command line is the whole process, so SIGTERM is Ctrl-C from the start, not only
    once the command itself says so: a CI job cancelled while the suite still loads exits 130
    too, not 143. (A caller of ``run_cli`` of its own keeps its signals.)
    """
    from trialrun.cli.interrupts import sigterm_as_ctrl_c

    try:
        with sigterm_as_ctrl_c():
            code = run_cli(argv)
    except KeyboardInterrupt:  # one that came while another error was being reported
        sys.stderr.write("Interrupted.\n")
        code = EXIT_INTERRUPTED
    # What is still buffered is flushed here, where a reader that went away (``| head``) can
    # be told apart, instead of at the interpreter's exit, which would print a traceback.
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_broken_pipe()
        code = code or EXIT_FAILED
    # The command is over and its exit code decided; what is left is the interpreter's own exit
    # (finalizers, buffered files). A CI runner repeating its SIGTERM then must not turn a
    # finished run into a process killed by a signal.
    import signal

    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.exit(code)


def run_cli(argv: list[str] | None = None) -> int:
    """Run one command line; its exit code."""
    import click

    from trialrun.cli.group import cli as cli
    from trialrun.errors import ConfigError, TrialrunError

    args = sys.argv[1:] if argv is None else argv
    try:
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
    import click

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
