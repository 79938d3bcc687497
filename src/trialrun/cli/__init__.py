"""The ``trialrun`` command line: its entry point and the one place exit codes are decided.

Exit codes, the same for every command: 0 success, 1 the thing checked failed, 2 invalid input
(one ``error: <file>:<line>: <what>`` line per problem, never a traceback), 130 interrupted.

Start-up is paid by every CI job, so this module imports no click: ``trialrun --help`` and
``trialrun --version`` are answered by ``trialrun.cli.quick`` from the command table
(``trialrun.cli.table``); every other command line goes through the click group of
``trialrun.cli.group``, which imports a subcommand's module only when it is invoked.
"""

from __future__ import annotations

import sys

from trialrun.base.lazyexport import lazy_getattr

# Not typing.TYPE_CHECKING: the CLI's start-up would import typing only for this flag, and
# mypy takes any name TYPE_CHECKING as true.
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


_kept_until_exit: list[object] | None = None
"""What ``keep_until_exit`` was given; a list only while ``main`` runs a command line."""


def main(argv: list[str] | None = None) -> None:
    """Console entry point: maps every outcome to an exit code."""
    global _kept_until_exit
    _kept_until_exit = []
    _leave(run_cli(argv))


def keep_until_exit(*objects: object) -> None:
    """Leave ``objects`` to the process's exit instead of freeing them one by one when the
    command returns: a run's results after a 5,000-call case are ~100,000 objects, ~6 ms of
    freeing that nobody waits for once the last line is printed. Only under ``main``, which
    leaves right after (``_leave``); a caller of ``run_cli`` (tests, embedding) keeps nothing.
    """
    if _kept_until_exit is not None:
        _kept_until_exit.extend(objects)


def run_cli(argv: list[str] | None = None) -> int:
    """Run one command line; its exit code.

    Under ``main`` the command line is the whole process, so SIGTERM is Ctrl-C from the moment
    a command is known to run, not only once the command itself says so: a CI job cancelled
    while the suite still loads exits 130 too, not 143. (A caller of its own keeps its signals.)
    """
    from trialrun.cli.quick import quick_answer

    args = sys.argv[1:] if argv is None else argv
    answer = quick_answer(args)
    if answer is not None:
        return _print_quick(answer)
    if _kept_until_exit is None:  # not under main
        return _run_click(args)
    from trialrun.cli.interrupts import sigterm_as_ctrl_c

    try:
        with sigterm_as_ctrl_c():
            return _run_click(args)
    except KeyboardInterrupt:  # one that came while another error was being reported
        sys.stderr.write("Interrupted.\n")
        return EXIT_INTERRUPTED


def _print_quick(text: str) -> int:
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_broken_pipe()
        return EXIT_FAILED
    return EXIT_OK


def _run_click(args: list[str]) -> int:
    import click

    from trialrun.cli.group import cli as cli
    from trialrun.errors import ConfigError, TrialrunError

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


def _leave(code: int) -> None:
    """End the process with ``code``, skipping the interpreter's teardown when nothing needs it.

    At exit the interpreter frees every object one by one: after a deep run (10,000 events, a
    5,000-entry cassette) that is ~40 ms of waiting for nothing, once every artifact is written.
    The ``atexit`` callbacks still run and stdout and stderr are flushed, which is all the
    teardown does that anyone can see. A thread that is not a daemon and still runs would be
    waited for by the teardown: then the process takes the ordinary way out.
    """
    import atexit
    import contextlib
    import os
    import threading

    main_thread = threading.main_thread()
    if any(
        thread is not main_thread and not thread.daemon and thread.is_alive()
        for thread in threading.enumerate()
    ):
        sys.exit(code)
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_broken_pipe()
        code = code or EXIT_FAILED
    with contextlib.suppress(OSError):
        sys.stderr.flush()
    os._exit(code)


def _silence_broken_pipe() -> None:
    """The reader went away (``trialrun run ... | head``): exit quietly, as a CLI should."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
