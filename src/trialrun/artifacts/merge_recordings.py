"""The shards' recording artifacts combined for ``trialrun merge``.

A sharded replay writes ``unused-recordings.json`` per shard (``artifacts.unused``), a sharded
record or update run ``recordings-diff.json`` (``report.recordings``). The merged run holds each
file once, for every case, so ``trialrun prune MERGED_DIR`` and report.html work as for a run of
the whole suite:

* ``unused-recordings.json``: every shard's case entries in case id order (the order of the
  merged summary), ``interrupted`` when any shard was, ``files`` the union of the shards'
  digests. A shard's file lists only its own cases, so pruning one shard's run keeps every file
  that a case of another shard reads; the merged file lists them all, and prune removes a line
  only when every case sharing its file, whichever shard ran it, left it unused. Two shards that
  saw different bytes of one file give it the digest ``null``: prune refuses it.
* ``recordings-diff.json``: every shard's case entries in case id order, the totals added up,
  the merged run's id.

``unused-recordings.json`` is written only when every shard wrote one: a merged list missing a
shard's cases would let prune remove what those cases use. ``recordings-diff.json`` combines
the shards that wrote one (a review leaves nothing to remove).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trialrun.artifacts.shards import MergeError
from trialrun.artifacts.unused import FILE_NAME as UNUSED_FILE
from trialrun.artifacts.unused import SCHEMA_VERSION as UNUSED_SCHEMA
from trialrun.base.fsutil import atomic_write_text, dumps_json, write_json

DIFF_FILE = "recordings-diff.json"


def read_reviews(run_dirs: Sequence[Path]) -> dict[str, list[Any]]:
    """Each case's ``files`` blocks from the shards' ``recordings-diff.json`` (for report.html)."""
    reviews: dict[str, list[Any]] = {}
    for run_dir in run_dirs:
        document = _read(run_dir / DIFF_FILE)
        for case in (document or {}).get("cases") or []:
            reviews[str(case.get("id"))] = list(case.get("files") or [])
    return reviews


def write_merged_recordings(
    run_dirs: Sequence[Path], out_dir: Path, case_ids: Sequence[str], run_id: str
) -> None:
    """Write the merged ``unused-recordings.json`` (when every shard has one) and
    ``recordings-diff.json`` (when any has) into ``out_dir``."""
    order = {case_id: at for at, case_id in enumerate(case_ids)}
    unused = {run_dir: _read(run_dir / UNUSED_FILE) for run_dir in run_dirs}
    complete = {run_dir: doc for run_dir, doc in unused.items() if doc is not None}
    if len(complete) == len(unused):
        atomic_write_text(out_dir / UNUSED_FILE, _merged_unused(complete, order))
    diffs = [_read(run_dir / DIFF_FILE) for run_dir in run_dirs]
    present = [doc for doc in diffs if doc is not None]
    if present:
        write_json(out_dir / DIFF_FILE, _merged_diff(present, order, run_id))


def _merged_unused(docs: dict[Path, dict[str, Any]], order: dict[str, int]) -> str:
    present = list(docs.values())
    for run_dir, doc in docs.items():
        if doc.get("schema_version") != UNUSED_SCHEMA:
            raise MergeError(
                f"{run_dir / UNUSED_FILE}: expected schema_version {UNUSED_SCHEMA}, found "
                f"{doc.get('schema_version')!r}"
            )
    first = present[0]
    cases = sorted(
        (case for doc in present for case in doc.get("cases") or []),
        key=lambda case: order.get(str(case.get("case_id")), len(order)),
    )
    files: dict[str, str | None] = {}
    for doc in present:
        for shown, digest in (doc.get("files") or {}).items():
            # Shards that saw different bytes of one file: prune must not trust either.
            files[shown] = digest if files.get(shown, digest) == digest else None
    head = {
        "schema_version": UNUSED_SCHEMA,
        "mode": first.get("mode"),  # the shards' modes agree (``merge.check_complete``)
        "interrupted": any(bool(doc.get("interrupted")) for doc in present),
        "suite_file": first.get("suite_file"),
        "suite_dir": first.get("suite_dir"),
    }
    # One case a line, as a run writes it: a reader can still diff two of these files.
    lines = ",\n  ".join(dumps_json(case, indent=None) for case in cases)
    return (
        dumps_json(head, indent=None)[:-1]
        + ', "cases": [\n  '
        + lines
        + '\n], "files": '
        + dumps_json(dict(sorted(files.items())), indent=None)
        + "}\n"
    )


def _merged_diff(
    docs: Sequence[dict[str, Any]], order: dict[str, int], run_id: str
) -> dict[str, Any]:
    totals: dict[str, int] = {}
    for doc in docs:
        for status, count in (doc.get("totals") or {}).items():
            totals[status] = totals.get(status, 0) + int(count)
    cases = sorted(
        (case for doc in docs for case in doc.get("cases") or []),
        key=lambda case: order.get(str(case.get("id")), len(order)),
    )
    return {
        "schema_version": docs[0].get("schema_version"),
        "run_id": run_id,
        "mode": docs[0].get("mode"),
        "totals": totals,
        "cases": cases,
    }


def _read(path: Path) -> dict[str, Any] | None:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise MergeError(f"{path}: cannot read the shard's file: {exc}") from None
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise MergeError(f"{path}: expected JSON: {exc}") from None
    if not isinstance(document, dict):
        raise MergeError(f"{path}: expected a JSON object, found {type(document).__name__}")
    return document
