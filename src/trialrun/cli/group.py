"""The click group behind ``trialrun``: its subcommands are imported only when invoked.

``trialrun.cli`` imports this module only when a command line needs click; ``trialrun --help``
and ``trialrun --version`` are answered by ``trialrun.cli.quick`` without it.
"""

from __future__ import annotations

import importlib

import click

from trialrun import __version__
from trialrun.cli.table import COMMANDS, DESCRIPTION

# (command, first argument) -> (module, attribute): a command reached by a word after another.
# `compare` takes a SUBJECT folder, so it cannot be a click group; `compare merge` is routed here
# instead, and only when `merge` comes right after `compare` (a folder named merge: ./merge).
# `attempt` takes no argument at all, so `attempt recover` cannot mean anything else.
_ROUTED: dict[tuple[str, str], tuple[str, str]] = {
    ("compare", "merge"): ("trialrun.cli.compare_cmd", "compare_merge"),
    ("attempt", "recover"): ("trialrun.cli.attempt_cmd", "attempt_recover"),
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
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        module_name, attribute, _ = entry
        command = getattr(importlib.import_module(module_name), attribute)
        assert isinstance(command, click.Command)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][2]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(
    cls=LazyGroup, help=DESCRIPTION, context_settings={"help_option_names": ["-h", "--help"]}
)
@click.version_option(
    __version__, "--version", prog_name="trialrun", message="%(prog)s %(version)s"
)
def cli() -> None:
    pass
