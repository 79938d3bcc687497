"""Which receipt a card shows: the Library card (exact bytes) and the Marketplace card (versions).

A card always shows exactly one receipt, never a blend of two:

* **Library card** (``trialrun scores SUBJECT``): the newest receipt whose ``content_digest``
  equals the folder's current digest, looked up in the local store first and the team's receipts
  second. When no receipt matches but an earlier digest of the same subject was scored, that
  receipt is shown as STALE rather than the card going blank. Eval assets sit outside the digest,
  so adding or regenerating them never blanks a score.
* **Marketplace card** (``trialrun scores --team``): per subject, versions are walked newest-first
  and the first version holding a usable receipt is shown, marked stale when it is not the latest
  version. A receipt that is schema-invalid or misfiled (its digest is not the version's digest,
  or its ``version`` stamp names another version) fails closed for its version only.

The team is read through ``TeamStore``'s clone (``TeamReader``), never written: publishing is
the team store's job.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from trialrun.base.signedjson import loads_unique
from trialrun.errors import ConfigError
from trialrun.home.digest import content_digest
from trialrun.home.paths import store_root
from trialrun.team.publish import subject_identity
from trialrun.team.store import TeamStore, check_plain_id

__all__ = [
    "LibraryCard",
    "MarketplaceCard",
    "ScoredReceipt",
    "TeamReader",
    "library_card",
    "marketplace_cards",
    "receipt_problem",
]

_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_VERSION_DIR = re.compile(r"v([1-9][0-9]*)")
_VERDICTS = frozenset({"PASS", "NEUTRAL", "FAIL"})
_STATUSES = frozenset({"complete", "partial", "failed"})


@dataclass(frozen=True)
class ScoredReceipt:
    """One receipt a card can show, and where it was found."""

    source: Literal["local", "team"]
    location: str
    document: dict[str, Any]

    @property
    def run_id(self) -> str:
        return str(self.document["run_id"])

    @property
    def digest(self) -> str:
        return str(self.document["content_digest"])


@dataclass(frozen=True)
class LibraryCard:
    name: str
    digest: str
    status: Literal["scored", "stale", "unscored"]
    receipt: ScoredReceipt | None


@dataclass(frozen=True)
class MarketplaceCard:
    subject_id: str
    name: str
    latest_version: int
    shown_version: int | None
    receipt: ScoredReceipt | None
    rejected: list[tuple[int, str]] = field(default_factory=list)
    """``(version, why)`` for each newer version whose receipts were all unusable."""

    @property
    def stale(self) -> bool:
        return self.shown_version is not None and self.shown_version != self.latest_version


def receipt_problem(document: Any) -> str | None:
    """Why a document is not a usable compare receipt (schema v2), or None when it is."""
    if not isinstance(document, dict):
        return f"expected a JSON object, found {type(document).__name__}"
    if document.get("schema_version") != 2:
        return f"expected schema_version 2, found {document.get('schema_version')!r}"
    digest = document.get("content_digest")
    if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
        return f"expected content_digest 'sha256:<64 hex>', found {digest!r}"
    if not isinstance(document.get("run_id"), str) or not document["run_id"]:
        return f"expected a run_id string, found {document.get('run_id')!r}"
    # A string first: a list there cannot even be looked up in a set.
    verdict, status = document.get("verdict"), document.get("execution_status")
    if not isinstance(verdict, str) or verdict not in _VERDICTS:
        return f"expected verdict PASS, NEUTRAL or FAIL, found {verdict!r}"
    if not isinstance(status, str) or status not in _STATUSES:
        return f"expected execution_status complete, partial or failed, found {status!r}"
    for count in ("expected_rows", "scored_rows"):
        value = document.get(count)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            return f"expected {count} to be a count, found {value!r}"
    if not isinstance(document.get("comparisons"), dict):
        return f"expected comparisons to be an object, found {document.get('comparisons')!r}"
    return None


def _read_receipt(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    try:
        document = loads_unique(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        return None, f"cannot read it as JSON ({exc})"
    problem = receipt_problem(document)
    return (None, problem) if problem else (document, None)


def _local_receipts() -> Iterator[ScoredReceipt]:
    for path in sorted(store_root().glob("*/*/receipt.json")):
        document, _ = _read_receipt(path)
        if document is not None:
            yield ScoredReceipt("local", str(path), document)


class TeamReader:
    """Read-only views of a team store's clone that ``TeamStore`` has no method for."""

    def __init__(self, store: TeamStore) -> None:
        self.store = store

    @property
    def repo(self) -> str:
        return self.store.url

    def root(self) -> Path:
        # TeamStore fetches its clone once, on its first read; listing needs that same fresh tree.
        self.store.refresh()
        return self.store.checkout

    def subject_ids(self) -> list[str]:
        subjects = self.root() / "subjects"
        return sorted(p.name for p in subjects.iterdir() if p.is_dir()) if subjects.is_dir() else []

    def versions(self, subject_id: str) -> list[int]:
        return self.store.versions(subject_id)

    def version_digest(self, subject_id: str, version: int) -> str:
        return self.store.version_digest(subject_id, version)

    def receipt_files(self, subject_id: str, version: int | None = None) -> list[Path]:
        base = self.root() / "evals" / check_plain_id(subject_id, "subject id")
        pattern = f"v{version}/*.json" if version is not None else "v*/*.json"
        return sorted(base.glob(pattern)) if base.is_dir() else []


def _team_receipts(team: TeamReader, subject_id: str) -> Iterator[ScoredReceipt]:
    for path in team.receipt_files(subject_id):
        document, _ = _read_receipt(path)
        if document is not None:
            location = f"{team.repo}:{path.relative_to(team.root()).as_posix()}"
            yield ScoredReceipt("team", location, document)


def _newest(receipts: list[ScoredReceipt]) -> ScoredReceipt | None:
    # run ids are UTC seconds, so the lexicographic maximum is the latest run
    return max(receipts, key=lambda receipt: receipt.run_id, default=None)


def library_card(subject: Path, team: TeamReader | None = None) -> LibraryCard:
    """The Library card of the folder ``subject``: its current bytes' receipt, local first."""
    if not subject.is_dir():
        raise ConfigError(f"{subject}: expected a subject folder, found none")
    shown_name, subject_id = subject_identity(subject)
    digest = content_digest(subject)
    local = list(_local_receipts())
    team_side = list(_team_receipts(team, subject_id)) if team and subject_id else []
    for candidates in (local, team_side):
        exact = _newest([r for r in candidates if r.digest == digest])
        if exact is not None:
            return LibraryCard(shown_name, digest, "scored", exact)
    # Earlier bytes of this subject: local receipts carry its name, team ones sit under its id.
    earlier = [r for r in local if r.document.get("skill_name") == shown_name] + team_side
    previous = _newest(earlier)
    status: Literal["stale", "unscored"] = "stale" if previous is not None else "unscored"
    return LibraryCard(shown_name, digest, status, previous)


def marketplace_cards(team: TeamReader) -> list[MarketplaceCard]:
    """One card per published subject: the newest version with a usable receipt."""
    cards: list[MarketplaceCard] = []
    for subject_id in team.subject_ids():
        versions = team.versions(subject_id)
        if not versions:
            continue
        cards.append(_marketplace_card(team, subject_id, versions))
    return cards


def _marketplace_card(team: TeamReader, subject_id: str, versions: list[int]) -> MarketplaceCard:
    latest = versions[-1]
    rejected: list[tuple[int, str]] = []
    for version in reversed(versions):
        files = team.receipt_files(subject_id, version)
        if not files:
            continue
        usable, problems = _usable_receipts(team, subject_id, version, files)
        newest = _newest(usable)
        if newest is not None:
            name = str(newest.document.get("skill_name") or subject_id)
            return MarketplaceCard(subject_id, name, latest, version, newest, rejected)
        rejected.append((version, "; ".join(problems)))
    return MarketplaceCard(subject_id, subject_id, latest, None, None, rejected)


def _usable_receipts(
    team: TeamReader, subject_id: str, version: int, files: list[Path]
) -> tuple[list[ScoredReceipt], list[str]]:
    version_digest = team.version_digest(subject_id, version)
    usable: list[ScoredReceipt] = []
    problems: list[str] = []
    for path in files:
        relative = path.relative_to(team.root()).as_posix()
        document, problem = _read_receipt(path)
        if document is not None:
            problem = _misfiling(document, version, version_digest)
        if problem is not None or document is None:
            problems.append(f"{relative}: {problem}")
            continue
        usable.append(ScoredReceipt("team", f"{team.repo}:{relative}", document))
    return usable, problems


def _misfiling(document: dict[str, Any], version: int, version_digest: str) -> str | None:
    if document["content_digest"] != version_digest:
        return (
            f"misfiled: expected content_digest {version_digest} of v{version}, "
            f"found {document['content_digest']}"
        )
    stamp = document.get("version")
    if stamp is not None and str(stamp) not in (f"v{version}", str(version)):
        return f"misfiled: expected version v{version}, found {stamp!r}"
    return None
