"""``trialrun scores``: the Library card of a folder, or the Marketplace cards of a team.

A card shows one receipt's candidate-vs-baseline comparison beside its provenance; two receipts
are never combined. Exit 0 whenever a card could be built (a missing score is shown, not failed),
2 when the folder, the team or the config cannot be read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from trialrun.cli import EXIT_INVALID, EXIT_OK
from trialrun.cli.pathparam import PathParam
from trialrun.team.publish import team_from_config
from trialrun.team.scores import (
    LibraryCard,
    MarketplaceCard,
    ScoredReceipt,
    TeamReader,
    library_card,
    marketplace_cards,
)
from trialrun.team.store import TeamStore

_DEFAULT_TEAM = ""
"""What a bare ``--team`` (no value) stands for: the team configured in config.toml."""


@click.command(
    short_help="Show the score of a subject's current bytes, or of every subject in a team."
)
@click.argument("subject", required=False, type=PathParam(path_type=Path))
@click.option(
    "--team",
    "team_name",
    is_flag=False,
    flag_value=_DEFAULT_TEAM,
    default=None,
    metavar="[NAME]",
    help="The team repository (a path or URL). Without SUBJECT: show the team's Marketplace "
    "cards (the team in config.toml when NAME or the whole option is left out).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the card, or the cards, as JSON.")
def scores(subject: Path | None, team_name: str | None, as_json: bool) -> int:
    """Show the score of SUBJECT's current bytes, or every subject of a team."""
    repo = team_from_config(team_name or None)
    if subject is None:
        if repo is None:
            # Without SUBJECT the command shows a team: the configured one unless one is named.
            if team_name is None:
                problem = "expected SUBJECT, --team NAME or a team in config.toml, found none"
            else:
                problem = "--team: no NAME given and no team in config.toml"
            click.echo(f"error: {problem}", err=True)
            return EXIT_INVALID
        cards = marketplace_cards(TeamReader(TeamStore(repo)))
        if as_json:
            click.echo(json.dumps([_marketplace_json(c) for c in cards], indent=2))
        else:
            click.echo("\n".join(_marketplace_text(c) for c in cards) or f"{repo}: no subjects")
        return EXIT_OK
    team = None if repo is None else TeamReader(TeamStore(repo))
    card = library_card(subject, team)
    click.echo(json.dumps(_library_json(card), indent=2) if as_json else _library_text(card))
    return EXIT_OK


def _receipt_json(receipt: ScoredReceipt | None) -> dict[str, Any] | None:
    if receipt is None:
        return None
    return {"source": receipt.source, "location": receipt.location, "receipt": receipt.document}


def _library_json(card: LibraryCard) -> dict[str, Any]:
    return {
        "name": card.name,
        "content_digest": card.digest,
        "status": card.status,
        "stale": card.status == "stale",
        "receipt": _receipt_json(card.receipt),
    }


def _marketplace_json(card: MarketplaceCard) -> dict[str, Any]:
    return {
        "id": card.subject_id,
        "name": card.name,
        "latest_version": card.latest_version,
        "shown_version": card.shown_version,
        "stale": card.stale,
        "rejected": [{"version": v, "why": why} for v, why in card.rejected],
        "receipt": _receipt_json(card.receipt),
    }


def _score_line(receipt: ScoredReceipt) -> str:
    document = receipt.document
    line = f"{document['verdict']}"
    baseline = document["comparisons"].get("candidate-vs-baseline")
    if isinstance(baseline, dict) and isinstance(baseline.get("net_lift"), int | float):
        record = f"{baseline.get('win')}W / {baseline.get('loss')}L / {baseline.get('tie')}T"
        line += f"  candidate-vs-baseline {baseline['net_lift']:+.0%} net lift ({record})"
    if document["execution_status"] != "complete":
        rows = f"{document['scored_rows']}/{document['expected_rows']} rows scored"
        line += f"  [{document['execution_status']}: {rows}]"
    broken = document.get("broken_setup")  # absent from receipts older than the field
    if isinstance(broken, list) and broken:
        line += f"  [BROKEN SETUP: {', '.join(str(command) for command in broken)}]"
    return line


def _provenance_line(receipt: ScoredReceipt) -> str:
    provenance = receipt.document.get("provenance")
    provenance = provenance if isinstance(provenance, dict) else {}
    parts = [f"run {receipt.run_id}"]
    for key in ("runner_handle", "model", "k", "timestamp"):
        if provenance.get(key) is not None:
            parts.append(f"{key} {provenance[key]}")
    return f"  {receipt.source} receipt: {receipt.location} ({', '.join(parts)})"


def _library_text(card: LibraryCard) -> str:
    head = f"{card.name}  {card.digest}"
    if card.receipt is None:
        return f"{head}\n  score: none (no receipt for these bytes or earlier ones)"
    if card.status == "stale":
        score = (
            f"  score: STALE {_score_line(card.receipt)} "
            f"(bytes changed since {card.receipt.digest} was scored)"
        )
    else:
        score = f"  score: {_score_line(card.receipt)}"
    return "\n".join([head, score, _provenance_line(card.receipt)])


def _marketplace_text(card: MarketplaceCard) -> str:
    head = f"{card.name} ({card.subject_id})  latest v{card.latest_version}"
    lines = [head]
    if card.receipt is None:
        lines.append("  score: none (no version has a usable receipt)")
    else:
        stale = " STALE" if card.stale else ""
        lines.append(f"  score{stale} (v{card.shown_version}): {_score_line(card.receipt)}")
        lines.append(_provenance_line(card.receipt))
    lines.extend(f"  v{version} rejected: {why}" for version, why in card.rejected)
    return "\n".join(lines)
