"""``unused-recordings.json``: which recordings a replay run left unused, exactly enough to prune.

summary.json counts unused recordings per tool; that names no file and no line, so it cannot
say which of two identical recordings went unused. This file does, for every kind of recording
(tool cassette, MCP, model, HTTP)::

    {"schema_version": 1, "mode": "replay", "interrupted": false,
     "suite_file": "/abs/suite/suite.yaml", "suite_dir": "/abs/suite",
     "cases": [{"case_id": "t1", "cassette": "cassettes/t1.jsonl", "ended_cleanly": true,
                "unused": [{"kind": "tool", "file": "cassettes/t1.jsonl", "line": 3,
                            "name": "search_docs"}]}],
     "files": {"cassettes/t1.jsonl": "<sha256 of its bytes when the run ended>"}}

Paths are relative to ``suite_dir`` where they lie inside it (else absolute), with ``/``.
``files`` holds the digest of every file an unused recording lies in: ``trialrun prune``
refuses a run whose recordings changed since. ``cassette`` is the case's tool cassette: the
MCP, model and HTTP recordings lie beside it, so cases naming one cassette share them all, and a
recording is unused only when every case sharing its file left it unused (prune reads the suite
again for the cases this run did not run: ``--case``, a shard).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

from trialrun.base.fsutil import atomic_write_text, dumps_json
from trialrun.base.results import CaseResult
from trialrun.config import Suite

SCHEMA_VERSION = 1
FILE_NAME = "unused-recordings.json"


def write_unused(
    run_dir: Path, suite: Suite, cases: Sequence[CaseResult], *, interrupted: bool
) -> None:
    """Write the run's ``unused-recordings.json`` (call for replay runs only)."""
    atomic_write_text(run_dir / FILE_NAME, unused_text(suite, cases, interrupted=interrupted))


def unused_text(suite: Suite, cases: Sequence[CaseResult], *, interrupted: bool) -> str:
    """The document, one unused recording a line.

    Written piece by piece, each piece by the C encoder: a cassette of thousands of recordings
    the agent no longer asks for must not cost the run a parsed object, or an indented
    encoder's fragments, per recording (tests/security/test_sec_memory.py measures it).
    """
    root = suite.suite_dir.resolve()
    cassette_of = {case.config.id: case.cassette_path.resolve() for case in suite.cases}
    shown: dict[str, str] = {}

    def show(path: str) -> str:
        if path not in shown:
            shown[path] = _shown(Path(path), root)
        return shown[path]

    head = {
        "schema_version": SCHEMA_VERSION,
        "mode": "replay",
        "interrupted": interrupted,
        "suite_file": str(suite.suite_file.resolve()),
        "suite_dir": str(root),
    }
    parts = [dumps_json(head, indent=None)[:-1], ', "cases": [']
    for number, case in enumerate(cases):
        cassette = cassette_of.get(case.case_id)
        about = {
            "case_id": case.case_id,
            "cassette": None if cassette is None else show(str(cassette)),
            "ended_cleanly": case.run.failure is None,
        }
        parts.append(("," if number else "") + "\n  " + dumps_json(about, indent=None)[:-1])
        parts.append(', "unused": [')
        for at, place in enumerate(case.run.unused_places):
            item = {
                "kind": place.kind,
                "file": show(place.path),
                "line": place.line,
                "name": place.name,
            }
            parts.append(("," if at else "") + "\n    " + dumps_json(item, indent=None))
        parts.append("]}")
    # Digests of the files prune would rewrite: those an unused recording lies in.
    paths = {place.path for case in cases for place in case.run.unused_places}
    digests = {show(path): file_sha256(Path(path)) for path in sorted(paths)}
    parts.append('\n], "files": ' + dumps_json(digests, indent=None) + "}\n")
    return "".join(parts)


def file_sha256(path: Path) -> str | None:
    """SHA-256 of a file's bytes, read in pieces (a cassette may be large); None: unreadable."""
    digest = hashlib.sha256()
    try:
        with path.open("rb") as file:
            while chunk := file.read(1 << 20):
                digest.update(chunk)
    except OSError:
        return None
    return digest.hexdigest()


def _shown(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return os.path.abspath(path)
