"""``--shard I/N``: split a suite's cases across CI machines, the same way on every machine.

The split depends only on the set of case ids: ids are ordered by the SHA-256 of their UTF-8
text (ties, which need a SHA-256 collision, fall back to the id) and dealt round robin, the first
to shard 1. Python's ``hash()`` is salted per process, so it would send a case to different
shards on different machines; SHA-256 does not. Dealing round robin keeps shard sizes within one
of each other whatever the ids look like, where ``hash mod N`` can leave a shard empty.

Each shard's summary.json records the split (``shard_info``): its index and count, the SHA-256 of
the whole suite's sorted id list and the ids it ran. ``trialrun merge`` checks completeness from
these alone, without the suite.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from trialrun.base import canonjson
from trialrun.errors import ConfigError

if TYPE_CHECKING:
    from trialrun.config.loader import Case

__all__ = [
    "ShardSpec",
    "assign_shards",
    "case_ids_sha256",
    "select_shard",
    "shard_case_ids",
    "shard_info",
]

_SPEC = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")
MAX_SHARDS = 10_000
"""More shards than any CI matrix allows (GitHub: 256): a larger N is a typo."""


@dataclass(frozen=True)
class ShardSpec:
    """Shard ``index`` (1-based) of ``count``."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if not 1 <= self.count <= MAX_SHARDS:
            raise ConfigError(
                f"--shard: expected a shard count N between 1 and {MAX_SHARDS}, found {self.count}"
            )
        if not 1 <= self.index <= self.count:
            raise ConfigError(
                f"--shard: expected 1 <= I <= N in I/N (shards are numbered from 1), "
                f"found {self.index}/{self.count}"
            )

    @classmethod
    def parse(cls, text: str) -> ShardSpec:
        """``"2/3"`` -> ``ShardSpec(2, 3)``; anything else is a ConfigError saying the form."""
        match = _SPEC.fullmatch(text)
        if match is None:
            raise ConfigError(
                f"--shard: expected I/N with whole numbers 1 <= I <= N (for example 2/3), "
                f"found {text!r}"
            )
        return cls(int(match.group(1)), int(match.group(2)))

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def assign_shards(case_ids: Iterable[str], count: int) -> dict[str, int]:
    """Every id's 1-based shard among ``count``; a function of the set of ids only."""
    ids = _unique(case_ids)
    if count < 1:
        raise ConfigError(f"shard count must be at least 1, found {count}")
    ordered = sorted(ids, key=lambda case_id: (_id_digest(case_id), case_id))
    return {case_id: position % count + 1 for position, case_id in enumerate(ordered)}


def shard_case_ids(case_ids: Iterable[str], spec: ShardSpec) -> list[str]:
    """The ids shard ``spec`` runs, sorted."""
    assignment = assign_shards(case_ids, spec.count)
    return sorted(case_id for case_id, shard in assignment.items() if shard == spec.index)


def select_shard(cases: Sequence[Case], spec: ShardSpec) -> list[Case]:
    """The cases of shard ``spec``, sorted by case id."""
    chosen = set(shard_case_ids((case.config.id for case in cases), spec))
    return sorted((case for case in cases if case.config.id in chosen), key=lambda c: c.config.id)


def case_ids_sha256(case_ids: Iterable[str]) -> str:
    """SHA-256 of the sorted ids as a canonical JSON array: the suite's identity for merge."""
    text = canonjson.dumps(sorted(_unique(case_ids)))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def shard_info(spec: ShardSpec, all_case_ids: Iterable[str]) -> dict[str, Any]:
    """The ``summary["shard"]`` block of shard ``spec`` of a suite with ``all_case_ids``."""
    ids = _unique(all_case_ids)
    return {
        "index": spec.index,
        "count": spec.count,
        "suite_case_ids_sha256": case_ids_sha256(ids),
        "case_ids": shard_case_ids(ids, spec),
    }


def _id_digest(case_id: str) -> str:
    return hashlib.sha256(case_id.encode("utf-8", "surrogatepass")).hexdigest()


def _unique(case_ids: Iterable[str]) -> list[str]:
    ids = list(case_ids)
    repeated = sorted(case_id for case_id, seen in Counter(ids).items() if seen > 1)
    if repeated:
        raise ConfigError(
            f"cannot shard: expected unique case ids, found {', '.join(map(repr, repeated))} "
            "more than once"
        )
    return ids
