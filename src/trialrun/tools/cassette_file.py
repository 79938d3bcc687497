"""A cassette file: its lines, the recording each holds, and what loading keeps of them.

A cassette is JSONL, one recorded call a line: ``{"tool", "args", "ok", "result", "error"}``.
Both layouts RunLedger wrote load the same: compact lines in any key order and the recorder's
key-sorted lines with ``", "`` separators.

A cassette may be hundreds of megabytes, mostly results. Loading checks every line, one at a
time, and keeps per recording only what matching needs (its tool, the canonical text of its
args) and its line, or where its line lies: a few dozen bytes beside the line, whatever the
recording holds parsed. A recording is parsed again when a call uses it: from its line, kept in
memory, when the file is small enough (``KEPT_IN_MEMORY``), else from the file itself; the line
read then must hash to what loading read, so whoever rewrites the file during a run (the agent
under test included) cannot change what replay serves, and ``cassette_sha256`` describes the
bytes served. One recording is parsed at a time: a single recording of N MB still costs several
times N while it is checked and while it is served.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import weakref
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from trialrun.base import canonjson
from trialrun.base.jsonnames import json_type
from trialrun.base.jsonnumbers import FINITE_JSON
from trialrun.base.nesting import MAX_NESTING, nests_deeper_than, too_deep
from trialrun.base.results import JsonObject
from trialrun.errors import CassetteError

_BOM_PROBLEM = "Unexpected UTF-8 BOM (decode using utf-8-sig)"
_BOM = b"\xef\xbb\xbf"
_DIGEST_SIZE = 16

KEPT_IN_MEMORY = 4 * 1024 * 1024
"""A cassette of at most this many bytes keeps its recordings' lines in memory (about its size):
they are parsed from there, untouched by later changes to the file, without a system call. A
larger one is read again by offset, so that its size costs no memory."""


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


class Recordings:
    """What loading keeps of a cassette's recordings: a few words each, and each one's line of
    text (a small file) or where that line lies (a large one), never a parsed result.

    Parallel columns rather than an object per recording: a 500 MB cassette of small recordings
    has millions of them, and an object each would cost more than the file. Shared by every case
    replaying the cassette: nothing changes once loaded but the keys, made on first use.
    """

    __slots__ = ("_args", "_keys", "digests", "lines", "offsets", "path", "sizes", "texts", "tools")

    def __init__(self, path: Path, *, kept: bool) -> None:
        # Absolute: recordings are read again later, whatever the working directory is then.
        self.path = Path(os.path.abspath(path))
        self.tools: list[str] = []
        self._keys: list[str] | None = None if kept else []
        self._args: list[JsonObject] = []
        """A small file's args, until ``keys`` are first asked for."""
        self.lines = array("Q")
        self.texts: list[str] | None = [] if kept else None
        """Each recording's line, when the file is small enough to keep (``KEPT_IN_MEMORY``)."""
        self.offsets = array("Q")
        self.sizes = array("Q")
        """Otherwise where each recording's line starts in the file, its length without the
        newline, and its BLAKE2b (``_DIGEST_SIZE`` bytes a recording)."""
        self.digests = bytearray()

    def __len__(self) -> int:
        return len(self.tools)

    @property
    def keys(self) -> list[str]:
        """The canonical JSON of each recording's args: its matching key."""
        keys = self._keys
        if keys is None:
            # A small file's keys wait for the first case's index, which is built while its
            # agent starts up, rather than delay the first agent's start.
            keys = self._keys = [canonjson.dumps(args) for args in self._args]
            self._args = []
        return keys

    def keep(self, entry: CassetteEntry, text: str, names: dict[str, str]) -> None:
        self._add(entry, names)
        assert self.texts is not None
        self.texts.append(text)
        self._args.append(entry.args)

    def locate(self, entry: CassetteEntry, offset: int, raw: bytes, names: dict[str, str]) -> None:
        self._add(entry, names)
        assert self._keys is not None
        self._keys.append(canonjson.dumps(entry.args))
        self.offsets.append(offset)
        self.sizes.append(len(raw))
        self.digests += hashlib.blake2b(raw, digest_size=_DIGEST_SIZE).digest()

    def _add(self, entry: CassetteEntry, names: dict[str, str]) -> None:
        # One string per tool name, however many recordings share it.
        self.tools.append(names.setdefault(entry.tool, entry.tool))
        self.lines.append(entry.line)

    def raw(self, at: int, file: RecordingFile) -> bytes:
        """Recording ``at``'s line as bytes, without its newline: update mode copies a replayed
        recording into the new cassette byte for byte."""
        if self.texts is not None:
            return self.texts[at].encode("utf-8", "surrogatepass")
        self.entry(at, file)  # the bytes are checked against what loading saw
        return file.read(self.offsets[at], self.sizes[at])

    def entry(self, at: int, file: RecordingFile) -> CassetteEntry:
        """Recording ``at`` parsed again from its line, which must be the one loading checked."""
        if self.texts is not None:
            return _parsed_again(self.texts[at], self.lines[at])
        line_no = self.lines[at]
        size = self.sizes[at]
        try:
            raw = file.read(self.offsets[at], size)
        except OSError as exc:
            raise CassetteError(
                f"cannot read cassette: {exc.strerror}", file=self.path, line=line_no
            ) from None
        end = (at + 1) * _DIGEST_SIZE
        if len(raw) != size or (
            hashlib.blake2b(raw, digest_size=_DIGEST_SIZE).digest()
            != self.digests[end - _DIGEST_SIZE : end]
        ):
            raise CassetteError(
                "expected the recording trialrun loaded before the case started, found other "
                "bytes: the cassette changed during the run (replay serves only what it loaded)",
                file=self.path,
                line=line_no,
            )
        return _parsed_again(raw.decode("utf-8"), line_no)


class RecordingFile:
    """A cassette file opened, on first use, to read recordings again; one per replaying case.

    The descriptor is close-on-exec (``os.open``'s default): no agent inherits it.
    """

    __slots__ = ("__weakref__", "_closer", "_fd", "path")

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = -1
        self._closer: weakref.finalize[[int], RecordingFile] | None = None

    def read(self, offset: int, size: int) -> bytes:
        if self._fd < 0:
            self._fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
            self._closer = weakref.finalize(self, os.close, self._fd)
        if _pread is not None:
            return _pread(self._fd, size, offset)
        os.lseek(self._fd, offset, os.SEEK_SET)
        return os.read(self._fd, size)

    def close(self) -> None:
        """Let go of the file; a later read opens it again."""
        if self._closer is not None:
            self._closer()
            self._closer = None
        self._fd = -1


_pread: Callable[[int, int, int], bytes] | None = getattr(os, "pread", None)  # not on Windows


def read_recordings(path: Path) -> tuple[Recordings | None, str, list[CassetteError]]:
    """A cassette file's recordings, the SHA-256 of its bytes, and every problem in it.

    None when the file cannot be read at all; a file with problems still yields its good lines.
    """
    problems: list[CassetteError] = []
    try:
        with open(path, "rb") as file:
            if os.fstat(file.fileno()).st_size > KEPT_IN_MEMORY:
                digest = hashlib.sha256()
                recordings = _located(file, digest, path, problems)
                return recordings, digest.hexdigest(), problems
            data = file.read()
    except FileNotFoundError:
        return None, "", [CassetteError("cassette file not found", file=path.resolve())]
    except IsADirectoryError:
        return None, "", [CassetteError("expected a cassette file, found a directory", file=path)]
    except OSError as exc:
        return None, "", [CassetteError(f"cannot read cassette: {exc.strerror}", file=path)]
    sha256 = hashlib.sha256(data).hexdigest()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        # Each bad line is a problem; the cassette will not be replayed, so where its good
        # lines are read from later does not matter.
        return _located(io.BytesIO(data), None, path, problems), sha256, problems
    return _kept(text, data, path, problems), sha256, problems


def _kept(text: str, data: bytes, path: Path, problems: list[CassetteError]) -> Recordings:
    """The recordings of a small file, each kept as its line of text: one decode, one split."""
    recordings = Recordings(path, kept=True)
    names: dict[str, str] = {}
    crowded = _crowded_lines(data)
    # Editors on Windows like to start files with a byte-order mark; it is not part of the JSON.
    for line_no, line in enumerate(text.removeprefix("\ufeff").split("\n"), start=1):
        if not line.strip():
            continue
        try:
            entry = _entry_of(line, line_no in crowded, path, line_no)
        except CassetteError as exc:
            problems.append(exc)
            continue
        recordings.keep(entry, line, names)
    return recordings


def _located(file: BinaryIO, digest: Any, path: Path, problems: list[CassetteError]) -> Recordings:
    """The recordings of a file read one line at a time, each kept as where its line lies."""
    recordings = Recordings(path, kept=False)
    names: dict[str, str] = {}
    for line_no, offset, raw in _raw_lines(file, digest):
        text = _text_of(raw, path, line_no, problems)
        if text is None:
            continue
        crowded = raw.count(b"[") + raw.count(b"{") > MAX_NESTING
        try:
            entry = _entry_of(text, crowded, path, line_no)
        except CassetteError as exc:
            problems.append(exc)
            continue
        recordings.locate(entry, offset, raw, names)
    return recordings


def _raw_lines(file: BinaryIO, digest: Any) -> Iterator[tuple[int, int, bytes]]:
    """``(line number, offset, bytes)`` of every line, without its newline; the file's bytes go
    through ``digest`` (unless None) on the way. One line is in memory at a time."""
    offset = 0
    for line_no, raw in enumerate(file, start=1):
        if digest is not None:
            digest.update(raw)
        start = offset
        offset += len(raw)
        if raw.endswith(b"\n"):
            raw = raw[:-1]
        if line_no == 1 and raw.startswith(_BOM):
            # Editors on Windows like to start files with a byte-order mark; it is not JSON.
            raw = raw[len(_BOM) :]
            start += len(_BOM)
        yield line_no, start, raw


def _text_of(raw: bytes, path: Path, line_no: int, problems: list[CassetteError]) -> str | None:
    """The line as text, None for a blank line or one that is not UTF-8 (then a problem)."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        problems.append(
            CassetteError(
                f"expected UTF-8 text, found byte 0x{raw[exc.start]:02x} that is not valid UTF-8",
                file=path,
                line=line_no,
            )
        )
        return None
    return line if line.strip() else None


def _lines(data: bytes, path: Path, problems: list[CassetteError]) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of every non-blank line of a cassette's bytes, as loading reads
    them; lines that are not UTF-8 go to problems."""
    for line_no, _, raw in _raw_lines(io.BytesIO(data), None):
        text = _text_of(raw, path, line_no, problems)
        if text is not None:
            yield line_no, text


def _entry_of(text: str, crowded: bool, path: Path, line_no: int) -> CassetteEntry:
    """The recording of a non-blank line, or ``CassetteError``. Only a line with more opening
    brackets than ``MAX_NESTING`` (``crowded``) can nest too deeply: it takes the full parse,
    which checks."""
    entry = None if crowded else _well_formed_entry(text, line_no)
    return _parse_entry(text, path, line_no) if entry is None else entry


_NOT_BRACKETS = bytes(byte for byte in range(256) if byte not in b"[{\n")


def _crowded_lines(data: bytes) -> set[int]:
    """Numbers of the lines with more opening brackets than ``MAX_NESTING``: usually none. One
    pass in C over the file instead of a count per line."""
    brackets = data.translate(None, delete=_NOT_BRACKETS).split(b"\n")
    return {n for n, line in enumerate(brackets, start=1) if len(line) > MAX_NESTING}


# Loading refused what the finite decoder refuses, so a checked line parses alike with the
# plain decoder, which reads floats in C instead of calling ``finite_float`` for each.
_CHECKED_JSON = json.JSONDecoder()


def _parsed_again(text: str, line_no: int) -> CassetteEntry:
    """A recording's line that loading checked, parsed again: the same entry, no checks left."""
    raw = _CHECKED_JSON.decode(text)
    error = raw.get("error")
    if error is not None and not isinstance(error, str):
        error = canonjson.dumps(error)
    return CassetteEntry(raw["tool"], raw["args"], raw["ok"], raw.get("result"), error, line_no)


_JSON_SPACE = " \t\n\r"


def _well_formed_entry(text: str, line_no: int) -> CassetteEntry | None:
    """The entry of a line that is exactly one well-formed recording, else None.

    The common case, taken in a few steps: ``raw_decode`` straight from column 0 (no
    whitespace skipping, no second pass for trailing data) and exact type checks. Anything else
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
