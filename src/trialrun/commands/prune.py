"""``trialrun prune RUN_DIR``: remove the recordings a replay run did not use.

What goes comes from the run's own ``unused-recordings.json`` (``artifacts/unused.py``): each
unused recording's file and line, of tool cassettes, MCP, model and HTTP recordings alike. A
recording goes only when every case that shares its file left it unused, ended cleanly, and the
suite names that file from no case the run did not run. The plan is checked whole before any
file is written: a run that was not a replay, an interrupted one, or one whose recordings
changed since (their SHA-256 differs from the run's) is refused with nothing touched. Each file
is rewritten atomically with its other lines byte-for-byte as they were.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trialrun.artifacts.unused import FILE_NAME, SCHEMA_VERSION, file_sha256
from trialrun.base.fsutil import atomic_write_bytes
from trialrun.errors import ConfigError

__all__ = ["FilePlan", "PrunePlan", "apply", "plan"]


@dataclass(frozen=True, slots=True)
class Removal:
    line: int
    kind: str
    name: str


@dataclass(slots=True)
class FilePlan:
    """One file's recordings that go (``removals``), or why it is left alone (``kept_because``)."""

    path: Path
    shown: str
    removals: list[Removal] = field(default_factory=list)
    kept_because: str | None = None

    def loses_recordings(self) -> bool:
        """Whether this file loses any recording."""
        return self.kept_because is None and bool(self.removals)


@dataclass(slots=True)
class PrunePlan:
    run_dir: Path
    files: list[FilePlan]

    @property
    def count(self) -> int:
        return sum(len(f.removals) for f in self.files if f.kept_because is None)


def plan(run_dir: Path) -> PrunePlan:
    """What pruning ``run_dir`` removes; ``ConfigError`` for a run it must refuse."""
    doc = _read_unused(run_dir)
    where = run_dir / FILE_NAME
    if doc.get("interrupted"):
        raise ConfigError(
            "the run was interrupted: expected a replay run that finished, so its unused "
            "recordings are known; run the suite again and prune that run",
            file=where,
        )
    suite_dir = Path(str(doc.get("suite_dir") or ""))
    cases: list[dict[str, Any]] = list(doc.get("cases") or [])
    digests: dict[str, str | None] = dict(doc.get("files") or {})
    not_run = _cassettes_not_run(doc, {str(case.get("case_id")) for case in cases})
    # Cases sharing a tool cassette share the recordings beside it: group them by it.
    sharing: dict[str, list[dict[str, Any]]] = {}
    for case in cases:
        sharing.setdefault(str(case.get("cassette")), []).append(case)
    per_file: dict[str, FilePlan] = {}
    for case in cases:
        group = sharing[str(case.get("cassette"))]
        for item in case.get("unused") or []:
            shown = str(item["file"])
            if shown in per_file:
                continue
            per_file[shown] = _file_plan(shown, group, suite_dir, not_run, case)
    files = [per_file[key] for key in sorted(per_file)]
    for file_plan in files:
        if file_plan.kept_because is None:
            _check_unchanged(file_plan, digests.get(file_plan.shown), where)
    return PrunePlan(run_dir, files)


def apply(pruned: PrunePlan) -> None:
    """Rewrite each file without its removed lines (atomically; other bytes as they were)."""
    for file_plan in pruned.files:
        if file_plan.kept_because is not None or not file_plan.removals:
            continue
        gone = {removal.line for removal in file_plan.removals}
        data = file_plan.path.read_bytes()
        kept = [line for number, line in enumerate(_lines(data), start=1) if number not in gone]
        atomic_write_bytes(file_plan.path, b"".join(kept))


def _file_plan(
    shown: str,
    group: list[dict[str, Any]],
    suite_dir: Path,
    not_run: set[str],
    case: dict[str, Any],
) -> FilePlan:
    path = Path(shown) if Path(shown).is_absolute() else suite_dir / shown
    file_plan = FilePlan(path, shown)
    unclean = [str(c.get("case_id")) for c in group if not c.get("ended_cleanly")]
    if unclean:
        file_plan.kept_because = f"case {unclean[0]} did not end cleanly"
        return file_plan
    if str(case.get("cassette")) in not_run:
        file_plan.kept_because = "a case this run did not run shares it"
        return file_plan
    # A line goes only if every case sharing the file left it unused.
    left: dict[int, Removal] | None = None
    for member in group:
        mine = {
            int(item["line"]): Removal(int(item["line"]), str(item["kind"]), str(item["name"]))
            for item in member.get("unused") or []
            if str(item["file"]) == shown
        }
        left = mine if left is None else {n: r for n, r in left.items() if n in mine}
    file_plan.removals = sorted((left or {}).values(), key=lambda r: r.line)
    return file_plan


def _check_unchanged(file_plan: FilePlan, recorded: str | None, where: Path) -> None:
    now = file_sha256(file_plan.path)
    if now is None:
        raise ConfigError(
            f"cannot read {file_plan.path}: expected the recording the run replayed",
            file=where,
        )
    if recorded is None:
        raise ConfigError(
            f"{file_plan.shown}: expected the SHA-256 of its bytes when the run ended, found "
            "none (the run could not read it, or the shards of a merged run saw different "
            "bytes of it); replay again and prune that run",
            file=where,
        )
    if now != recorded:
        raise ConfigError(
            f"{file_plan.shown} changed since the run (SHA-256 {recorded} then, {now} now): "
            "expected the recordings the run replayed; replay again and prune that run",
            file=where,
        )
    _check_lines(file_plan)


def _check_lines(file_plan: FilePlan) -> None:
    """Each line to remove must be a recording: a JSON object that is no header."""
    lines = _lines(file_plan.path.read_bytes())
    for removal in file_plan.removals:
        bad = removal.line > len(lines)
        if not bad:
            try:
                value = json.loads(lines[removal.line - 1])
            except ValueError:
                value = None
            bad = not isinstance(value, dict) or "format" in value or value.get("kind") == "header"
        if bad:
            raise ConfigError(
                f"line {removal.line} is not a recording: expected the unused "
                f"{removal.name} the run named there",
                file=file_plan.path,
                line=removal.line if removal.line <= len(lines) else None,
            )


def _lines(data: bytes) -> list[bytes]:
    """The file's lines with their endings, split at ``\\n`` only, as every cassette reader
    counts them (a lone ``\\r`` is no line end there)."""
    parts = data.split(b"\n")
    lines = [part + b"\n" for part in parts[:-1]]
    return [*lines, parts[-1]] if parts[-1] else lines


def _read_unused(run_dir: Path) -> dict[str, Any]:
    where = run_dir / FILE_NAME
    if not run_dir.is_dir():
        raise ConfigError("expected a run directory (<out>/<suite>/<run id>)", file=run_dir)
    try:
        text = where.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            f"no {FILE_NAME}: expected a replay run of this trialrun version ({_mode_of(run_dir)})",
            file=run_dir,
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read: {exc}", file=where) from None
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"invalid JSON: {exc}", file=where) from None
    if not isinstance(doc, dict) or doc.get("schema_version") != SCHEMA_VERSION:
        raise ConfigError(
            f"expected schema_version {SCHEMA_VERSION}, found "
            f"{doc.get('schema_version') if isinstance(doc, dict) else type(doc).__name__}",
            file=where,
        )
    if doc.get("mode") != "replay":
        raise ConfigError(
            f"expected a replay run, found mode {doc.get('mode')!r}", file=where, line=None
        )
    return doc


def _mode_of(run_dir: Path) -> str:
    """What summary.json says the run was, for the message about a missing file."""
    try:
        summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
        mode = summary["run"]["mode"]
    except (OSError, ValueError, KeyError, TypeError):
        return "and this is no run directory of one"
    if mode != "replay":
        return f"this run's mode was {mode}: only a replay knows which recordings went unused"
    return "this replay was written by an older trialrun"


def _cassettes_not_run(doc: dict[str, Any], ran: set[str]) -> set[str]:
    """The cassettes (as the document shows them) of the suite's cases this run did not run."""
    from trialrun.config import load_suite

    suite_file = Path(str(doc.get("suite_file") or ""))
    suite = load_suite(suite_file, use_baseline_path=False, mode="replay")
    root = Path(str(doc.get("suite_dir") or suite.suite_dir))
    shown: set[str] = set()
    for case in suite.cases:
        if case.config.id in ran:
            continue
        path = case.cassette_path.resolve()
        try:
            shown.add(path.relative_to(root).as_posix())
        except ValueError:
            shown.add(str(path))
    return shown
