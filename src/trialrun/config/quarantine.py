"""quarantine.yaml: cases that run and report but do not gate, each until an expiry date.

The file sits beside suite.yaml (``quarantine.yaml`` or ``quarantine.yml``) and holds a list of
entries ``{case, reason, owner, expires}``; ``expires`` is a date written ``YYYY-MM-DD``. An entry
holds through the day it names (in UTC); from the next day on, the case gates again and the run
names the expired entry in a warning. Every problem of the file is reported at its line: an
unknown case id (with a did-you-mean), a missing owner or reason, a date that is not one, a case
listed twice.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trialrun.base.quoting import excerpt
from trialrun.config.spec import (
    AnyValue,
    ListOf,
    Nested,
    Record,
    SpecError,
    Str,
    keyed,
    parse_value,
)

if TYPE_CHECKING:
    from trialrun.errors import ConfigError

QUARANTINE_FILE_NAMES = ("quarantine.yaml", "quarantine.yml")


@dataclass(frozen=True)
class QuarantineEntry:
    """One quarantined case; ``line`` is where its entry starts in ``file``."""

    case: str
    reason: str
    owner: str
    expires: dt.date
    file: str
    line: int

    def expired(self, today: dt.date) -> bool:
        """The entry holds through ``expires`` and gates again from the day after."""
        return today > self.expires

    def block(self, today: dt.date) -> dict[str, Any]:
        """summary.json's per-case ``quarantine`` member."""
        return {
            "reason": self.reason,
            "owner": self.owner,
            "expires": self.expires.isoformat(),
            "expired": self.expired(today),
        }


class _Entry(Record):
    case: str = keyed(Str(min_length=1))
    reason: str = keyed(Str(min_length=1))
    owner: str = keyed(Str(min_length=1))
    # A YAML date or a string: PyYAML reads an unquoted 2026-12-31 as a date; checked below.
    expires: Any = keyed(AnyValue())


_ENTRY = Nested(_Entry)
_ENTRIES = ListOf(_ENTRY)


def today_utc() -> dt.date:
    """The day entries are judged against (tests replace it to fix the day)."""
    return dt.datetime.now(dt.UTC).date()


def find_quarantine_file(suite_dir: Path) -> Path | None:
    for name in QUARANTINE_FILE_NAMES:
        if (suite_dir / name).is_file():
            return suite_dir / name
    return None


def load_quarantine(
    path: Path, case_ids: Sequence[str], *, display: str
) -> tuple[QuarantineEntry, ...]:
    """The entries of the quarantine file at ``path``, checked against the suite's ``case_ids``.

    Raises ConfigErrors with every problem, each at its line.
    """
    from trialrun.base.suggest import closest
    from trialrun.config.messages import describe_value, spec_errors
    from trialrun.config.yamlload import load_yaml_value
    from trialrun.errors import ConfigErrors

    if _holds_nothing(path):
        return ()  # every entry was removed: nothing is quarantined
    doc = load_yaml_value(path, display=display, expected="a list of quarantine entries")
    if not isinstance(doc.data, list):
        raise ConfigErrors(
            [
                doc.error(
                    "expected a list of entries {case, reason, owner, expires}, "
                    f"found {describe_value(doc.data)}"
                )
            ]
        )

    def owner(loc: tuple[Any, ...]) -> str | None:
        if not loc or not isinstance(loc[0], int):
            return None
        entry = doc.data[loc[0]]
        case = entry.get("case") if isinstance(entry, dict) else None
        if isinstance(case, str) and case and len(loc) > 1:
            return f"entry for case {excerpt(case)!r}"
        return f"entry #{loc[0] + 1}"

    known = set(case_ids)
    problems: list[ConfigError] = []
    entries: list[QuarantineEntry] = []
    parsed: list[tuple[int, _Entry]] = []
    for index, item in enumerate(doc.data):
        # One entry at a time, so that the checks below still run on the entries that parse.
        try:
            parsed.append((index, parse_value(_ENTRY, item)))
        except SpecError as exc:
            placed = SpecError([{**issue, "loc": (index, *issue["loc"])} for issue in exc.issues])
            problems += spec_errors(placed, doc, _ENTRIES, "the quarantine file", owner=owner)
    first_line: dict[str, int] = {}
    for index, raw in parsed:
        where = f"entry for case {excerpt(raw.case)!r}"
        line = doc.line_of([index])
        if raw.case not in known:
            suggestion = closest(raw.case, case_ids)
            hint = f" (did you mean '{suggestion}'?)" if suggestion else ""
            problems.append(
                doc.error(
                    f"unknown case id {excerpt(raw.case)!r}: no case of the suite has it{hint}",
                    [index, "case"],
                    "case",
                )
            )
        elif raw.case in first_line:
            problems.append(
                doc.error(
                    f"case {excerpt(raw.case)!r} is listed twice (first at line "
                    f"{first_line[raw.case]}); keep one entry",
                    [index, "case"],
                    "case",
                )
            )
        first_line.setdefault(raw.case, line)
        expires = _date(raw.expires)
        if expires is None:
            problems.append(
                doc.error(
                    f"{where}: 'expires' must be a date written YYYY-MM-DD, "
                    f"found {describe_value(raw.expires)}",
                    [index, "expires"],
                    "expires",
                )
            )
            continue
        entries.append(QuarantineEntry(raw.case, raw.reason, raw.owner, expires, doc.file, line))
    problems.sort(key=lambda error: error.line or 0)  # in file order, as the loader reports
    collected = ConfigErrors.collect(problems)
    if collected is not None:
        raise collected
    return tuple(entries)


def _holds_nothing(path: Path) -> bool:
    """An empty file, or only comments; what cannot be read is left to the YAML reader."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    stripped = (line.strip() for line in text.splitlines())
    return all(not line or line.startswith("#") for line in stripped)


def _date(value: Any) -> dt.date | None:
    if isinstance(value, dt.datetime):
        return None  # a time of day too: an entry ends with a day, say which one
    if isinstance(value, dt.date):
        return value
    if isinstance(value, str) and len(value) == 10:
        try:
            return dt.date.fromisoformat(value)
        except ValueError:
            return None
    return None


def quarantine_blocks(
    entries: Sequence[QuarantineEntry], today: dt.date
) -> dict[str, dict[str, Any]]:
    """Case id -> its summary.json ``quarantine`` member."""
    return {entry.case: entry.block(today) for entry in entries}


def excused_ids(case_docs: Iterable[Mapping[str, Any]]) -> frozenset[str]:
    """The ids of summary.json cases whose quarantine holds: they do not gate."""
    return frozenset(
        str(doc.get("id"))
        for doc in case_docs
        if isinstance(block := doc.get("quarantine"), Mapping) and not block.get("expired")
    )


def expired_warnings(case_docs: Iterable[Mapping[str, Any]]) -> list[str]:
    """One warning per summary.json case whose quarantine expired: it gates again."""
    return [
        f"quarantine of case '{doc.get('id')}' expired on {block.get('expires')} "
        f"(owner {block.get('owner')}): it gates again; fix the case, or extend or "
        "remove its entry in quarantine.yaml"
        for doc in case_docs
        if isinstance(block := doc.get("quarantine"), Mapping) and block.get("expired")
    ]
