"""`trialrun --help` and `--version` without click: click's text, from a table of the commands."""

from __future__ import annotations

import importlib
from pathlib import Path

import click
import pytest

import trialrun.cli
from trialrun.cli import quick, run_cli
from trialrun.cli.group import cli
from trialrun.cli.table import COMMANDS

CLI_DIR = Path(trialrun.cli.__file__).parent


def click_help(width: int) -> str:
    ctx = click.Context(cli, info_name="trialrun", terminal_width=width, **cli.context_settings)
    return cli.get_help(ctx)


def test_top_help_is_clicks_layout_at_every_width() -> None:
    wrong = [width for width in range(50, 121) if quick.top_help(width) != click_help(width)]
    assert not wrong, (
        f"quick help differs from click's at widths {wrong}:\n{quick.top_help(wrong[0])}"
    )


def test_top_help_lays_out_long_names_and_long_help_as_click_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A name past click's 30-column limit goes on a line of its own; hyphens and long words wrap.
    monkeypatch.setitem(
        COMMANDS, "a-command-name-longer-than-thirty-columns", ("m", "a", "Short help.")
    )
    monkeypatch.setitem(
        COMMANDS,
        "wordy",
        ("m", "a", "A tool-using, record-and-replay " * 4 + "supercalifragilistic" * 4 + "."),
    )
    for width in (50, 64, 78, 100):
        assert quick.top_help(width) == click_help(width)


@pytest.mark.parametrize("columns", ["30", "60", "79", "80", "81", "200", "0", "-3", "wide", None])
def test_help_width_follows_clicks_rule(
    monkeypatch: pytest.MonkeyPatch, columns: str | None
) -> None:
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    assert quick.help_width() == click.formatting.HelpFormatter().width


@pytest.mark.parametrize("args", [["--help"], ["-h"], ["--version"]])
@pytest.mark.parametrize("columns", ["60", "100"])
def test_quick_answers_print_what_click_prints(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    columns: str,
) -> None:
    monkeypatch.setenv("COLUMNS", columns)
    assert quick.quick_answer(args) is not None
    quick_code = run_cli(args)
    quick_out = capsys.readouterr()
    click_code = trialrun.cli._run_click(args)
    click_out = capsys.readouterr()
    assert (quick_code, quick_out.out, quick_out.err) == (click_code, click_out.out, click_out.err)


@pytest.mark.parametrize(
    "args", [[], ["run", "--help"], ["--help", "run"], ["-h", "--version"], ["--version", "-x"]]
)
def test_other_command_lines_go_to_click(args: list[str]) -> None:
    assert quick.quick_answer(args) is None


def test_table_matches_the_commands() -> None:
    """Each row's name and help are the command's own: ``trialrun --help`` never imports them."""
    for name, (module, attribute, short_help) in COMMANDS.items():
        command = getattr(importlib.import_module(module), attribute)
        assert isinstance(command, click.Command), f"{module}.{attribute}: not a click command"
        assert command.name == name, f"{module}.{attribute}: named {command.name!r}, table {name!r}"
        found = command.get_short_help_str(limit=10_000)
        assert found == short_help, (
            f"{name}: table help {short_help!r}, command's short help {found!r}"
        )


def test_every_command_module_is_in_the_table() -> None:
    modules = {f"trialrun.cli.{path.stem}" for path in CLI_DIR.glob("*_cmd.py")}
    assert modules == {module for module, _, _ in COMMANDS.values()}
