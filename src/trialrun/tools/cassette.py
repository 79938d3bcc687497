"""Cassettes: recorded tool calls, replayed once each, in file order, in O(1) per call.

A cassette is JSONL, one recorded call a line: ``{"tool", "args", "ok", "result", "error"}``.
Both layouts RunLedger wrote load the same: compact lines in any key order and the recorder's
key-sorted lines with ``", "`` separators.

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

import hashlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trialrun.base import canonjson
from trialrun.base.jsonnames import json_type
from trialrun.base.jsonnumbers import FINITE_JSON
from trialrun.base.nesting import MAX_NESTING, nests_deeper_than, too_deep
from trialrun.base.redact import redact
from trialrun.base.results import JsonObject
from trialrun.errors import CassetteError, CassetteMismatch, NearestRecording
from trialrun.tools.base import LocalTool, ToolOutcome, normalized_outcome

if TYPE_CHECKING:
    from trialrun.config.models import Normalization

MAX_NEAREST = 5
# Scoring every recording of a huge cassette with difflib would make one miss take minutes; past
# this many full comparisons the best candidates found so far are reported.
MAX_SCORED_CANDIDATES = 300

_MatchKey = tuple[str, str]
_BOM_PROBLEM = "Unexpected UTF-8 BOM (decode using utf-8-sig)"


# Not frozen, though nothing changes an entry once read: a 5,000-line cassette builds its entries
# before the first agent starts, and a frozen dataclass's __init__ (object.__setattr__ per field)
# took ~11 k instructions an entry where this one takes a few hundred (57 M -> 1 M).
@dataclass(slots=True)
class CassetteEntry:
    """One recorded call, read-only. ``line`` is its 1-based line number in the cassette file."""

    tool: str
    args: JsonObject
    ok: bool
    result: Any
    error: str | None
    line: int


class _MatchIndex:
    """Where each call's next unused recording is: a linked list per tool and arguments.

    Two containers for the whole cassette, not one per recording (a 5,000-line cassette's index
    is built while its agent starts, and freed as its case ends, both on the event loop). A
    plain class: a dataclass would cost the CLI's start-up a millisecond.
    """

    __slots__ = ("first_unused", "next_alike")

    def __init__(self, first_unused: dict[str, dict[str, int]], next_alike: list[int]) -> None:
        self.first_unused = first_unused
        """Tool -> canonical arguments -> index of the first recording no call consumed (-1:
        all of them were)."""
        self.next_alike = next_alike
        """Index of the next recording of the same call, -1 after the last."""

    @classmethod
    def of(cls, entries: Sequence[CassetteEntry], args_json: Sequence[str]) -> _MatchIndex:
        first: dict[str, dict[str, int]] = {}
        next_alike = [-1] * len(entries)
        for at in range(len(entries) - 1, -1, -1):  # backwards: each call's first ends on top
            alike = first.get(entries[at].tool)
            if alike is None:
                alike = first[entries[at].tool] = {}
            key = args_json[at]
            next_alike[at] = alike.get(key, -1)
            alike[key] = at
        return cls(first, next_alike)


class Cassette:
    """A loaded cassette: the recordings, an index for matching, and what was consumed."""

    def __init__(self, path: Path, entries: Sequence[CassetteEntry], sha256: str) -> None:
        self.path = path
        self.entries: list[CassetteEntry] = list(entries)
        self.sha256 = sha256
        """SHA-256 of the file's bytes (summary.json ``cassette_sha256``)."""
        self._consumed = bytearray(len(self.entries))
        """1 at the index of each recording a call consumed."""

    # The index is built for the case that replays it (``index``, or the first ``take``), not
    # at load: a suite's load parses every cassette, and each one's keys serve one case.
    @cached_property
    def _args_json(self) -> list[str]:
        return [canonjson.dumps(entry.args) for entry in self.entries]

    @cached_property
    def _index(self) -> _MatchIndex:
        return _MatchIndex.of(self.entries, self._args_json)

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
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None, [CassetteError("cassette file not found", file=path.resolve())]
        except IsADirectoryError:
            return None, [CassetteError("expected a cassette file, found a directory", file=path)]
        except OSError as exc:
            return None, [CassetteError(f"cannot read cassette: {exc.strerror}", file=path)]
        entries: list[CassetteEntry] = []
        problems: list[CassetteError] = []
        crowded = _crowded_lines(data)
        for line_no, text in _lines(data, path, problems):
            entry = None if line_no in crowded else _well_formed_entry(text, line_no)
            if entry is None:
                try:
                    entry = _parse_entry(text, path, line_no)
                except CassetteError as exc:
                    problems.append(exc)
                    continue
            entries.append(entry)
        return cls(path, entries, hashlib.sha256(data).hexdigest()), problems

    def fresh(self) -> Cassette:
        """The same recordings with nothing consumed (one parse serves every case that names it)."""
        return Cassette(self.path, self.entries, self.sha256)

    def take(self, tool: str, args: JsonObject) -> CassetteEntry:
        """Consume the first unused recording of this exact call, or raise ``CassetteMismatch``."""
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
        raise CassetteMismatch(
            tool=tool,
            args=args,
            # The message ends up in reports and junit.xml: never show a secret the agent sent.
            args_json=redacted_json,
            nearest=self._nearest(tool, args_json),
            exhausted=self._consumed_alike(tool, keys),
        )

    def _consume(self, tool: str, args_json: str) -> CassetteEntry | None:
        index = self._index
        alike = index.first_unused.get(tool)
        if alike is None:
            return None
        at = alike.get(args_json, -1)
        if at < 0:
            return None
        alike[args_json] = index.next_alike[at]
        self._consumed[at] = 1
        return self.entries[at]

    def _consumed_alike(self, tool: str, args_jsons: list[str]) -> int:
        """How many recordings of ``tool`` with one of these arguments calls consumed."""
        return sum(
            1
            for at, entry in enumerate(self.entries)
            if self._consumed[at] and entry.tool == tool and self._args_json[at] in args_jsons
        )

    def index(self) -> None:
        """Build the matching index now rather than at the first ``take``."""
        self._index  # noqa: B018 (a cached_property: reading it builds it)

    def unused(self) -> list[CassetteEntry]:
        """Recordings no call consumed, in file order."""
        consumed = self._consumed
        return [entry for at, entry in enumerate(self.entries) if not consumed[at]]

    def _nearest(self, tool: str, args_json: str) -> list[NearestRecording]:
        """The recordings most like a missed call, scored like RunLedger (difflib ratio)."""
        same_tool = [i for i, entry in enumerate(self.entries) if entry.tool == tool]
        pool = same_tool or range(len(self.entries))
        first_index: dict[_MatchKey, int] = {}
        for i in pool:
            # Identical recordings (page 1, page 1 again) would only repeat one line.
            first_index.setdefault((self.entries[i].tool, self._args_json[i]), i)
        keys = list(first_index)
        return [
            NearestRecording(
                tool=key[0],
                args_json=canonjson.dumps(redact(self.entries[first_index[key]].args)),
                score=score,
            )
            for key, score in _best_matches(args_json, keys)
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

    def prepare_answers(self) -> None:
        self.cassette.index()

    def answer_now(self, name: str, args: JsonObject) -> ToolOutcome:
        entry = self.cassette.take(name, args)
        return normalized_outcome(entry.ok, entry.result, entry.error, self._normalization)

    def close(self, *, clean: bool) -> None:
        """Replay writes nothing, so there is nothing to commit or discard."""

    def unused(self) -> int:
        return len(self.cassette.unused())


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


def _lines(data: bytes, path: Path, problems: list[CassetteError]) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of every non-blank line; lines that are not UTF-8 go to problems."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        yield from _lines_one_by_one(data, path, problems)
        return
    # Editors on Windows like to start files with a byte-order mark; it is not part of the JSON.
    for line_no, line in enumerate(text.removeprefix("\ufeff").split("\n"), start=1):
        if line.strip():
            yield line_no, line


def _lines_one_by_one(
    data: bytes, path: Path, problems: list[CassetteError]
) -> Iterator[tuple[int, str]]:
    """The slow path for a file that is not UTF-8 throughout: each bad line is reported."""
    for line_no, raw in enumerate(data.removeprefix(b"\xef\xbb\xbf").split(b"\n"), start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            problems.append(
                CassetteError(
                    f"expected UTF-8 text, found byte 0x{raw[exc.start]:02x} that is not "
                    "valid UTF-8",
                    file=path,
                    line=line_no,
                )
            )
            continue
        if line.strip():
            yield line_no, line


_JSON_SPACE = " \t\n\r"


_NOT_BRACKETS = bytes(byte for byte in range(256) if byte not in b"[{\n")


def _crowded_lines(data: bytes) -> set[int]:
    """Numbers of the lines with more opening brackets than ``MAX_NESTING``: only those can
    nest too deeply, and they take the full parse, which checks. Usually none: one pass in C
    over the file instead of a count per line."""
    brackets = data.translate(None, delete=_NOT_BRACKETS).split(b"\n")
    return {n for n, line in enumerate(brackets, start=1) if len(line) > MAX_NESTING}


def _well_formed_entry(text: str, line_no: int) -> CassetteEntry | None:
    """The entry of a line that is exactly one well-formed recording, else None.

    The common case, taken in a few steps: ``raw_decode`` straight from column 0 (no whitespace
    skipping, no second pass for trailing data) and exact type checks. Anything else
    (leading blanks, a structured ``error``, any problem) returns None, and ``_parse_entry`` then
    gives the same entry or the error message it always gave.
    """
    try:
        raw, end = FINITE_JSON.raw_decode(text)
    except (ValueError, RecursionError):
        return None
    if end != len(text) and text[end:].strip(_JSON_SPACE):
        return None
    if not isinstance(raw, dict):
        return None
    tool = raw.get("tool")
    args = raw.get("args")
    ok = raw.get("ok")
    error = raw.get("error")
    if not (isinstance(tool, str) and isinstance(args, dict) and isinstance(ok, bool)):
        return None
    if error is not None and not isinstance(error, str):
        return None
    return CassetteEntry(tool, args, ok, raw.get("result"), error, line_no)


def _parse_entry(text: str, path: Path, line_no: int) -> CassetteEntry:
    def fail(message: str) -> CassetteError:
        return CassetteError(message, file=path, line=line_no)

    try:
        raw = FINITE_JSON.decode(text)
    except json.JSONDecodeError as exc:
        # json.loads names a byte-order mark; the decoder itself only says "Expecting value".
        problem = _BOM_PROBLEM if text.startswith("\ufeff") else exc.msg
        raise fail(f"invalid JSON: {problem} at column {exc.colno}") from None
    except (ValueError, RecursionError) as exc:
        raise fail(f"invalid JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise fail(f"expected a JSON object per line, found {_json_type(raw)}")
    if nests_deeper_than(raw, text=text):
        # Matching, redaction and reports walk the recording: past Python's stack, they crash.
        raise fail(too_deep("the recording"))
    # Every field's problem at once: a hand-edited line is fixed in one go.
    problems = [
        f"entry is missing required key '{key}' (expected {type_name})"
        if key not in raw
        else f"'{key}' must be {type_name}, found {_json_type(raw[key])}"
        for key, expected_type, type_name in (
            ("tool", str, "a string"),
            ("args", dict, "an object"),
            ("ok", bool, "true or false"),
        )
        if not isinstance(raw.get(key), expected_type)
    ]
    if problems:
        raise fail("; ".join(problems))
    error = raw.get("error")
    if error is not None and not isinstance(error, str):
        # RunLedger dropped a structured error silently; keep it, as canonical JSON text.
        error = canonjson.dumps(error)
    return CassetteEntry(
        tool=raw["tool"],
        args=raw["args"],
        ok=raw["ok"],
        result=raw.get("result"),
        error=error,
        line=line_no,
    )


def _json_type(value: Any) -> str:
    name = json_type(value)
    return f"an {name}" if name[0] in "aeiou" else f"a {name}"
