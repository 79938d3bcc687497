"""The last-failed cache: which cases of a suite failed, errored or were flaky when they last ran.

``trialrun run --last-failed`` runs those cases only and ``--failed-first`` runs them before
the others, as pytest's ``--lf`` / ``--ff`` do. A ``flaky`` case (it both passed and failed
under ``--repeat`` or ``--retries``) counts as failed: it is the case a person fixing things wants
to see run again, and a plain run of it may well fail. The cache sits beside the suite file, in
``.trialrun_cache/lastfailed/<suite file name>.json`` (one file per suite file); the folder holds
a ``.gitignore`` of its own, and ``trialrun init`` adds it to the project's ``.gitignore`` too.

A run updates only the entries of the cases it ran: a case that passed leaves the list, one that
failed, errored or was flaky joins it, the others keep what they had. So a run of one shard, or of
a few ``--case`` ids, does not forget what the other cases did. Any other status counts as not
failed. The file is written to a temporary name and
renamed; a cache that cannot be written (a read-only checkout) is a warning, never a failed run,
and one that cannot be read counts as absent.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TypeVar

from trialrun.base.fsutil import atomic_write_text
from trialrun.base.words import counted
from trialrun.config.paths import display_path

CACHE_DIR_NAME = ".trialrun_cache"
SCHEMA_VERSION = 1
FAILED_STATUSES = frozenset({"fail", "error", "flaky"})

_Case = TypeVar("_Case")


def cache_file(suite_file: Path) -> Path:
    """Where the last-failed ids of the suite in ``suite_file`` are kept."""
    return suite_file.parent / CACHE_DIR_NAME / "lastfailed" / f"{suite_file.name}.json"


def read_failed(suite_file: Path) -> frozenset[str] | None:
    """The ids that failed when they last ran; None when there is no readable cache."""
    try:
        document = json.loads(cache_file(suite_file).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    failed = document.get("failed") if isinstance(document, dict) else None
    if not isinstance(failed, list):
        return None
    return frozenset(item for item in failed if isinstance(item, str))


def select_by_failures(
    cases: Sequence[_Case],
    id_of: Callable[[_Case], str],
    failed: frozenset[str] | None,
    *,
    only_failed: bool,
) -> tuple[list[_Case], str]:
    """``--last-failed`` (``only_failed``) or ``--failed-first`` applied to ``cases``.

    Returns the cases in the order to run them and a note for the user. Without a cache, or
    when none of ``cases`` failed last time, every case runs in its usual order.
    """
    option = "--last-failed" if only_failed else "--failed-first"
    if failed is None:
        return list(cases), f"{option}: no record of an earlier run; running all {len(cases)} cases"
    before = [case for case in cases if id_of(case) in failed]
    if not before:
        return list(cases), (
            f"{option}: none of the {len(cases)} selected cases failed last time; running them all"
        )
    if only_failed:
        return before, (
            f"{option}: running the {len(before)} of {len(cases)} cases that failed last time"
        )
    after = [case for case in cases if id_of(case) not in failed]
    return [*before, *after], (
        f"{option}: running the {counted(len(before), 'case')} that failed last time first, "
        f"then the other {len(after)}"
    )


def record_failures(
    suite_file: Path, outcomes: Iterable[tuple[str, str]], *, warn: Callable[[str], None]
) -> None:
    """Update the cache with ``(case id, status)`` of the cases this run finished.

    Never raises for the file system: a cache that cannot be written is a warning.
    """
    target = cache_file(suite_file)
    ran = dict(outcomes)
    if not ran:
        return
    previous = read_failed(suite_file) or frozenset()
    failed = {case_id for case_id in previous if case_id not in ran}
    failed |= {case_id for case_id, status in ran.items() if status in FAILED_STATUSES}
    document = {"schema_version": SCHEMA_VERSION, "failed": sorted(failed)}
    try:
        folder = target.parent.parent
        folder.mkdir(exist_ok=True)
        ignore = folder / ".gitignore"
        if not ignore.exists():
            # Ignored by git wherever it is, as pytest does with its cache.
            atomic_write_text(ignore, "# written by trialrun: the last-failed cache\n*\n")
        target.parent.mkdir(exist_ok=True)
        atomic_write_text(target, json.dumps(document, indent=2) + "\n")
    except OSError as exc:
        warn(
            f"warning: cannot write the last-failed cache {display_path(target)}: "
            f"{exc.strerror or exc}; --last-failed and --failed-first will not know this run"
        )
