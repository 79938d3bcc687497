"""``trialrun incident``: import a production trace, inspect it, promote it to a case, replay it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from trialrun.cli import EXIT_FAILED, EXIT_OK
from trialrun.cli.pathparam import PathParam

if TYPE_CHECKING:
    from trialrun.incident.replay import ReplayOutcome

# The loaders report a missing or unreadable file in the house format, naming it.
_FILE = PathParam(path_type=Path, dir_okay=False)
_DIRECTORY = PathParam(path_type=Path, file_okay=False)
_OUT_DIR = click.option("--out", required=True, type=_DIRECTORY, help="Output directory.")


@click.group(
    short_help="Import a production trace; inspect, promote or replay it as a regression case."
)
def incident() -> None:
    """Production incidents: a redacted, replayable regression case in three commands."""


@incident.command("import")
@click.argument("export", type=_FILE)
@_OUT_DIR
@click.option(
    "--redact-path",
    "redact_paths",
    multiple=True,
    metavar="PATH",
    help="Extra JSON path to replace with [REDACTED], e.g. calls.*.args.card_number.",
)
@click.option("--force", is_flag=True, help="Overwrite an existing OUT/incident.json.")
def import_(export: Path, out: Path, redact_paths: tuple[str, ...], force: bool) -> int:
    """Read a production EXPORT and write a normalized, redacted OUT/incident.json.

    Card numbers and e-mail addresses are redacted by default; each --redact-path must name a
    field the incident has.
    """
    from trialrun.config.paths import display_path
    from trialrun.errors import ConfigError
    from trialrun.incident.importers import import_export
    from trialrun.incident.model import is_inconclusive, write_incident

    target = out / "incident.json"
    if not force and (target.exists() or target.is_symlink()):
        # An incident may have been edited or promoted from: replacing it is asked for.
        raise ConfigError(
            "already exists; pass --force to overwrite it, or choose another --out",
            file=display_path(target),
        )
    found = import_export(export, redact_paths=redact_paths)
    write_incident(target, found)
    from trialrun.base.words import counted

    click.echo(
        f"Imported {counted(len(found.calls), 'tool call')} from {found.source_format} "
        f"to {display_path(target)}"
    )
    if is_inconclusive(found):
        click.echo("Capture is incomplete; replay will be inconclusive:")
        for gap in found.missing or ["some calls lack argument or result capture"]:
            click.echo(f"  missing: {gap}")
    return EXIT_OK


@incident.command("inspect")
@click.argument("incident_file", metavar="INCIDENT", type=_FILE)
@_OUT_DIR
@click.option("--rules", "rules_file", type=_FILE, help="YAML list of business rules.")
def inspect_(incident_file: Path, out: Path, rules_file: Path | None) -> int:
    """Write HTML, JSON, trace and JUnit views of INCIDENT, judged by the business rules."""
    from trialrun.config.paths import display_path
    from trialrun.errors import ConfigErrors
    from trialrun.incident.inspect import inspect_incident
    from trialrun.incident.model import load_incident
    from trialrun.incident.rules import load_rules, rules_that_cannot_apply

    found = load_incident(incident_file)
    rules = load_rules(rules_file) if rules_file is not None else []
    broken = ConfigErrors.collect(rules_that_cannot_apply(found.calls, rules))
    if broken is not None:
        raise broken
    report = inspect_incident(found, rules=rules, out_dir=out)
    for violation in report.get("violations", []):
        click.echo(
            f"VIOLATED {violation['rule']} at call {violation['call_index']}: "
            f"{violation['message']}"
        )
    files = report.get("files", {})
    click.echo(f"Wrote {', '.join(display_path(out / name) for name in files.values())}")
    click.echo(str(report.get("verdict", "")))
    return EXIT_OK


@incident.command("promote")
@click.argument("incident_file", metavar="INCIDENT", type=_FILE)
@click.option(
    "--to",
    "to",
    required=True,
    type=PathParam(path_type=Path, dir_okay=False),
    help="Case file to write, exactly there: .json writes JSON, .yaml or .yml YAML.",
)
def promote_(incident_file: Path, to: Path) -> int:
    """Turn INCIDENT into a case file plus its cassette, ready for a suite."""
    from trialrun.config.paths import display_path
    from trialrun.incident.model import load_incident
    from trialrun.incident.promote import promote

    case_path, cassette_path = promote(load_incident(incident_file), to)
    click.echo(f"Wrote {display_path(case_path)} and {display_path(cassette_path)}")
    return EXIT_OK


@incident.command("replay")
@click.argument("incident_file", metavar="INCIDENT", type=_FILE)
@click.option("--agent", "command", required=True, metavar="CMD", help="Run with bash -c.")
@click.option("--rules", "rules_file", type=_FILE, help="YAML list of business rules.")
@click.option("--gate", is_flag=True, help="Exit 1 unless the result is 'passes'.")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as one JSON object.")
@click.option(
    "--idle-timeout-s",
    type=click.FloatRange(min=0.1),
    default=30.0,
    show_default=True,
    help="How long the agent may stay silent.",
)
def replay_(
    incident_file: Path,
    command: str,
    rules_file: Path | None,
    gate: bool,
    as_json: bool,
    idle_timeout_s: float,
) -> int:
    """Replay INCIDENT's recorded tool results to an agent; the last line is the result."""
    from trialrun.incident.model import load_incident
    from trialrun.incident.replay import GATE_FAILING, replay
    from trialrun.incident.rules import load_rules

    found = load_incident(incident_file)
    rules = load_rules(rules_file) if rules_file is not None else []
    outcome = replay(found, command, rules=rules, idle_s=idle_timeout_s)
    if as_json:
        click.echo(json.dumps(outcome.to_json(), sort_keys=True, ensure_ascii=True))
    else:
        _print_outcome_details(outcome)
        click.echo(outcome.result)
    if gate and outcome.result in GATE_FAILING:
        return EXIT_FAILED
    return EXIT_OK


def _print_outcome_details(outcome: ReplayOutcome) -> None:
    click.echo(f"calls matched: {outcome.calls_matched}")
    for gap in outcome.missing:
        click.echo(f"missing: {gap}")
    divergence = outcome.divergence
    if divergence is not None:
        click.echo(f"divergence at call {divergence['index']}: {divergence['reason']}")
        click.echo(f"  expected: {json.dumps(divergence['expected'], sort_keys=True)}")
        click.echo(f"  got:      {json.dumps(divergence['got'], sort_keys=True)}")
    for violation in outcome.violations:
        click.echo(
            f"violated {violation['rule']} at call {violation['call_index']}: "
            f"{violation['message']}"
        )
