"""The click group behind ``trialrun``: its subcommands are imported only when invoked.

The command table names each command's module and repeats its one-line help, so click lays out
``trialrun --help`` from the table alone and a command's module is imported only when the
command line names it.
"""

from __future__ import annotations

import importlib

import click

from trialrun import __version__

DESCRIPTION = "Deterministic CI and trustworthy evaluation for tool-using AI agents."

# name -> (module, attribute, one-line help). The help repeats the command's own short_help
# (tests/cli/test_cli.py checks the two agree) so that `trialrun --help` lists every command
# without importing them all, which would load most of the package.
COMMANDS: dict[str, tuple[str, str, str]] = {
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
    "prune": (
        "trialrun.cli.prune_cmd",
        "prune",
        "Remove the recordings a replay run did not use.",
    ),
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
        typed = args[0] if args else ""
        if typed and typed not in COMMANDS and not typed.startswith("-"):
            # click says only "No such command"; a typo ("rn") deserves the name it missed.
            from trialrun.base.suggest import did_you_mean

            ctx.fail(f"No such command {typed!r}{did_you_mean(typed, COMMANDS)}.")
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
