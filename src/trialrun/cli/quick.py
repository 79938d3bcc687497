"""``trialrun --help`` and ``trialrun --version`` answered without importing click.

Importing click costs more than the interpreter's own start-up, and these two are what scripts
and people run most often to check an installation. The top-level help is laid out here from the
command table exactly as click's ``HelpFormatter`` lays it out for the group (same width rule,
same wrapping); ``tests/test_cli_quick.py`` compares the two at many widths, so a click upgrade
that changes its layout fails there instead of drifting silently. Anything else on the command
line (``trialrun -h run``, ``trialrun --version --help``) goes through click.
"""

from __future__ import annotations

import os
import sys

from trialrun import __version__
from trialrun.cli.table import COMMANDS, DESCRIPTION

HELP_ARGS = (["-h"], ["--help"])
VERSION_ARGS = (["--version"],)

USAGE = "Usage: trialrun [OPTIONS] COMMAND [ARGS]..."
OPTIONS = (
    ("--version", "Show the version and exit."),
    ("-h, --help", "Show this message and exit."),
)

# click.formatting.HelpFormatter's defaults
_MAX_WIDTH = 80
_MIN_WIDTH = 50
_INDENT = 2
_COL_MAX = 30
_COL_SPACING = 2


def quick_answer(args: list[str]) -> str | None:
    """What ``trialrun args`` prints, when it is the help or the version; else None."""
    if args in VERSION_ARGS:
        return f"trialrun {__version__}\n"
    if args in HELP_ARGS:
        return top_help(help_width()) + "\n"
    return None


def help_width() -> int:
    """The width click would lay its help out at: the terminal's, between 50 and 78 columns."""
    return max(min(_terminal_columns(), _MAX_WIDTH) - 2, _MIN_WIDTH)


def _terminal_columns() -> int:
    """``shutil.get_terminal_size().columns`` (which click calls) without importing shutil."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns > 0:
        return columns
    try:
        columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):
        return 80
    return columns or 80


def top_help(width: int) -> str:
    """The top-level help at ``width`` columns, without the final newline (as click's)."""
    commands = [(name, COMMANDS[name][2]) for name in sorted(COMMANDS)]
    sections = [
        USAGE,
        _wrap(DESCRIPTION, width, " " * _INDENT),
        "Options:\n" + _definitions(OPTIONS, width),
        "Commands:\n" + _definitions(commands, width),
    ]
    return "\n\n".join(sections)


def _definitions(rows: tuple[tuple[str, str], ...] | list[tuple[str, str]], width: int) -> str:
    """click's ``HelpFormatter.write_dl`` inside one level of indentation."""
    first_col = min(max(len(term) for term, _ in rows), _COL_MAX) + _COL_SPACING
    text_width = max(width - first_col - 2, 10)
    pad = " " * (first_col + _INDENT)
    lines: list[str] = []
    for term, text in rows:
        head = " " * _INDENT + term
        if len(term) <= first_col - _COL_SPACING:
            head += " " * (first_col - len(term))
        else:
            lines.append(head)
            head = pad
        wrapped = _wrap(text, text_width, "").splitlines()
        lines.append(head + wrapped[0])
        lines.extend(pad + line for line in wrapped[1:])
    return "\n".join(lines)


def _wrap(text: str, width: int, indent: str) -> str:
    """click's ``wrap_text`` for one paragraph: the standard library's wrapping rules."""
    import textwrap

    wrapper = textwrap.TextWrapper(
        width, initial_indent=indent, subsequent_indent=indent, replace_whitespace=False
    )
    return wrapper.fill(text.expandtabs())
