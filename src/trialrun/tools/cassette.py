"""Cassettes: recorded tool calls, replayed once each, in file order, in O(1) per call.

The file, its lines and what loading keeps of them are ``tools/cassette_file.py``.

Matching differs from RunLedger 0.2.3 on purpose:

* each recording answers one call (repeated identical calls get their recordings in file order:
  page 1, then page 2), where RunLedger answered every call with the first match;
* the key is the call's *raw* canonical args. RunLedger redacted both sides before comparing, so
  two different passwords matched each other. Recorded cassettes are redacted when written, so
  a call that finds no raw match is tried once more with its args redacted: a live secret then
  matches a recording that stored ``[REDACTED]`` in the same place, while two different secrets
  written by hand into a cassette still never stand in for each other.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from trialrun.base import canonjson
from trialrun.base.redact import redact
from trialrun.base.results import JsonObject
from trialrun.errors import CassetteError, CassetteMismatch, NearestRecording
from trialrun.tools.base import LocalTool, ToolOutcome, normalized_outcome
from trialrun.tools.cassette_file import CassetteEntry, RecordingFile, Recordings, read_recordings

__all__ = ["MAX_NEAREST", "Cassette", "CassetteEntry", "ReplayBackend"]

if TYPE_CHECKING:
    from trialrun.config.models import Normalization

MAX_NEAREST = 5
# Scoring every recording of a huge cassette with difflib would make one miss take minutes; past
# this many full comparisons the best candidates found so far are reported.
MAX_SCORED_CANDIDATES = 300

_MatchKey = tuple[str, str]


class _MatchIndex:
    """Where each call's next unused recording is: a linked list per tool and arguments.

    Two containers for the whole cassette, not one per recording (a 5,000-line cassette's index
    is built while its agent starts, and freed as its case ends, both on the event loop). A
    plain class: a dataclass's methods would be generated and compiled at every start-up.
    """

    __slots__ = ("first_unused", "next_alike")

    def __init__(self, first_unused: dict[str, dict[str, int]], next_alike: array[int]) -> None:
        self.first_unused = first_unused
        """Tool -> canonical arguments -> index of the first recording no call consumed (-1:
        all of them were)."""
        self.next_alike = next_alike
        """Index of the next recording of the same call, -1 after the last."""

    @classmethod
    def of(cls, tools: Sequence[str], args_json: Sequence[str]) -> _MatchIndex:
        first: dict[str, dict[str, int]] = {}
        next_alike = array("q", [-1]) * len(tools)
        for at in range(len(tools) - 1, -1, -1):  # backwards: each call's first ends on top
            alike = first.get(tools[at])
            if alike is None:
                alike = first[tools[at]] = {}
            key = args_json[at]
            next_alike[at] = alike.get(key, -1)
            alike[key] = at
        return cls(first, next_alike)


class Cassette:
    """A loaded cassette: where its recordings are, an index for matching, what was consumed.

    A recording is parsed again from its line when a call uses it; a large cassette's file,
    which that line is read from, stays open from the first read until ``close`` (or until the
    cassette is freed).
    """

    def __init__(self, recordings: Recordings, sha256: str) -> None:
        self.path = recordings.path
        self.sha256 = sha256
        """SHA-256 of the file's bytes (summary.json ``cassette_sha256``)."""
        self._recordings = recordings
        self._file = RecordingFile(recordings.path)
        self._consumed = bytearray(len(recordings))
        """1 at the index of each recording a call consumed."""
        self.last_taken = -1
        """The index of the recording ``take`` consumed last (-1: none yet)."""

    # The index is built for the case that replays it (``index``, or the first ``take``), not
    # at load: a suite's load reads every cassette, and each one's index serves one case.
    @cached_property
    def _index(self) -> _MatchIndex:
        return _MatchIndex.of(self._recordings.tools, self._recordings.keys)

    @classmethod
    def load(cls, path: Path) -> Cassette:
        """Parse a cassette file; the first problem raises ``CassetteError`` (file and line)."""
        cassette, problems = cls.read(path)
        if problems:
            raise problems[0]
        assert cassette is not None
        return cassette

    @classmethod
    def read(cls, path: Path) -> tuple[Cassette | None, list[CassetteError]]:
        """Parse a cassette file and every problem in it, so a suite's load reports them at once.

        The cassette is None when the file cannot be read at all; a file with problems still
        yields its good lines, but a caller must not replay it.
        """
        recordings, sha256, problems = read_recordings(path)
        return (None if recordings is None else cls(recordings, sha256)), problems

    def fresh(self) -> Cassette:
        """The same recordings with nothing consumed (one load serves every case that names it)."""
        return Cassette(self._recordings, self.sha256)

    @property
    def count(self) -> int:
        """How many recordings the cassette holds."""
        return len(self._recordings)

    @property
    def entries(self) -> list[CassetteEntry]:
        """Every recording, parsed, in file order (``recordings()`` reads them one at a time)."""
        return list(self.recordings())

    def recordings(self) -> Iterator[CassetteEntry]:
        """Each recording, parsed as it is reached: one at a time in memory. A file it opens
        is its own, let go when the iteration ends (doctor walks every cassette of a suite)."""
        file = RecordingFile(self.path)
        try:
            for at in range(self.count):
                yield self._recordings.entry(at, file)
        finally:
            file.close()

    def take(self, tool: str, args: JsonObject) -> CassetteEntry:
        """Consume the first unused recording of this exact call, or raise ``CassetteMismatch``.

        ``CassetteError`` when the recording's line can no longer be read as it was loaded;
        nothing is consumed then.
        """
        args_json = canonjson.dumps(args)
        entry = self._consume(tool, args_json)
        if entry is not None:
            return entry
        keys = [args_json]
        redacted_json = canonjson.dumps(redact(args))
        if redacted_json != args_json:
            keys.append(redacted_json)
            entry = self._consume(tool, redacted_json)
            if entry is not None:
                return entry
        nearest = self._nearest(tool, args_json)
        raise CassetteMismatch(
            tool=tool,
            args=args,
            # The message ends up in reports and junit.xml: never show a secret the agent sent.
            args_json=redacted_json,
            nearest=[recording for recording, _at in nearest],
            exhausted=self._consumed_alike(tool, keys),
            difference=self._difference(nearest[0][1], tool, args) if nearest else None,
        )

    def _consume(self, tool: str, args_json: str) -> CassetteEntry | None:
        index = self._index
        alike = index.first_unused.get(tool)
        if alike is None:
            return None
        at = alike.get(args_json, -1)
        if at < 0:
            return None
        # First: a recording that cannot be read is not used up.
        entry = self._recordings.entry(at, self._file)
        alike[args_json] = index.next_alike[at]
        self._consumed[at] = 1
        self.last_taken = at
        return entry

    def raw_line(self, at: int) -> bytes:
        """Recording ``at``'s line as it is in the file, without its newline."""
        return self._recordings.raw(at, self._file)

    def unused_indexes(self) -> list[int]:
        """Where the recordings no call consumed are, in file order."""
        return [at for at, used in enumerate(self._consumed) if not used]

    def _entry(self, at: int) -> CassetteEntry:
        return self._recordings.entry(at, self._file)

    def close(self) -> None:
        """Let go of the file; a later read opens it again (and checks it again)."""
        self._file.close()

    def _consumed_alike(self, tool: str, args_jsons: list[str]) -> int:
        """How many recordings of ``tool`` with one of these arguments calls consumed."""
        tools = self._recordings.tools
        keys = self._recordings.keys
        return sum(
            1
            for at, used in enumerate(self._consumed)
            if used and tools[at] == tool and keys[at] in args_jsons
        )

    def unused(self) -> list[CassetteEntry]:
        """Recordings no call consumed, in file order, parsed."""
        return [self._entry(at) for at, used in enumerate(self._consumed) if not used]

    def unused_tools(self) -> list[str]:
        """The tool of each recording no call consumed, in file order (nothing is read)."""
        tools = self._recordings.tools
        return [tools[at] for at, used in enumerate(self._consumed) if not used]

    def unused_lines(self) -> list[int]:
        """The line of each recording no call consumed, in file order (nothing is read)."""
        lines = self._recordings.lines
        return [lines[at] for at, used in enumerate(self._consumed) if not used]

    def _difference(self, at: int, tool: str, args: JsonObject) -> str:
        """The nearest recording's line and the first field where the call differs from it,
        both sides shown around that difference (redacted)."""
        from trialrun.httprec.difference import describe, describe_redacted

        entry = self._entry(at)
        used = bool(self._consumed[at])
        if entry.tool != tool:
            return describe(entry.line, ("tool", entry.tool, tool), used=used)
        return describe_redacted(entry.line, entry.args, args, used=used, where="args")

    def _nearest(self, tool: str, args_json: str) -> list[tuple[NearestRecording, int]]:
        """The recordings most like a missed call, scored like RunLedger (difflib ratio), each
        with its index."""
        tools = self._recordings.tools
        keys = self._recordings.keys
        same_tool = [i for i, name in enumerate(tools) if name == tool]
        pool = same_tool or range(len(tools))
        first_index: dict[_MatchKey, int] = {}
        for i in pool:
            # Identical recordings (page 1, page 1 again) would only repeat one line.
            first_index.setdefault((tools[i], keys[i]), i)
        return [
            (
                NearestRecording(
                    tool=key[0],
                    args_json=canonjson.dumps(redact(self._entry(first_index[key]).args)),
                    score=score,
                ),
                first_index[key],
            )
            for key, score in _best_matches(args_json, list(first_index))
        ]


class ReplayBackend:
    """Answers tool calls from a cassette, each recording once, normalized like the peer."""

    def __init__(self, cassette: Cassette, normalization: Normalization | None = None) -> None:
        self.cassette = cassette
        self._normalization = normalization

    async def call(
        self, name: str, args: JsonObject, local: LocalTool | None = None
    ) -> ToolOutcome:
        return self.answer_now(name, args)

    def answer_now(self, name: str, args: JsonObject) -> ToolOutcome:
        entry = self.cassette.take(name, args)
        return normalized_outcome(entry.ok, entry.result, entry.error, self._normalization)

    def close(self, *, clean: bool) -> None:
        """Replay writes nothing: only the cassette's file is let go."""
        self.cassette.close()

    def unused(self) -> int:
        return len(self.cassette.unused_tools())


def _best_matches(target: str, keys: list[_MatchKey]) -> list[tuple[_MatchKey, float]]:
    """The ``MAX_NEAREST`` keys whose args are most similar to ``target``, best first.

    ``quick_ratio`` is an upper bound of ``ratio`` and cheap, so candidates are scored in order
    of that bound and the search stops once no remaining bound can beat the current fifth best.
    """
    import difflib  # only on a miss: a replay that matches never needs it

    bound = difflib.SequenceMatcher(None)
    bound.set_seq2(target)
    bounded: list[tuple[float, int]] = []
    for index, (_, args_json) in enumerate(keys):
        bound.set_seq1(args_json)
        bounded.append((bound.quick_ratio(), index))
    bounded.sort(key=lambda pair: (-pair[0], pair[1]))
    scored: list[tuple[float, int]] = []
    for evaluated, (upper, index) in enumerate(bounded):
        if evaluated >= MAX_SCORED_CANDIDATES:
            break
        if len(scored) >= MAX_NEAREST and upper < scored[MAX_NEAREST - 1][0]:
            break
        score = difflib.SequenceMatcher(None, target, keys[index][1]).ratio()
        scored.append((score, index))
        scored.sort(key=lambda pair: (-pair[0], pair[1]))
    # Ties keep file order, as RunLedger's stable sort did.
    return [(keys[index], score) for score, index in scored[:MAX_NEAREST]]
