"""Cassette files line by line: what the HTTP and the model cassettes share.

A cassette is JSONL, UTF-8, one JSON object a line with its keys sorted; the first line is a
header naming the format and its ``schema_version``. Files are read one line at a time (a large
cassette holds its records, not its bytes and its text beside them), every problem is a
``CassetteError`` at its file and line, and a file is replaced atomically. What a record line
holds is the caller's: ``parse`` turns one line's JSON into a record or raises.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

from trialrun.base.fsutil import atomic_write_bytes, dumps_json
from trialrun.base.jsonnumbers import loads_finite
from trialrun.base.nesting import nests_deeper_than, too_deep, unreadable_json
from trialrun.base.quoting import excerpt
from trialrun.base.suggest import did_you_mean
from trialrun.errors import CassetteError

T = TypeVar("T")


class Fail:
    """Makes the ``CassetteError`` of one line (``fail("message")``); ``line`` is its number."""

    __slots__ = ("line", "path")

    def __init__(self, path: Path, line: int) -> None:
        self.path, self.line = path, line

    def __call__(self, message: str) -> CassetteError:
        return CassetteError(message, file=self.path, line=self.line)


Parse = Callable[[Any, Fail], T]
"""A record from one line's JSON value."""


class Format:
    """A cassette format: its header line, and what one line holds (``the exchange``)."""

    def __init__(self, name: str, version: int, record: str) -> None:
        self.header: dict[str, Any] = {"format": name, "schema_version": version}
        self.record = record

    def dump(self, records: Iterable[dict[str, Any] | str]) -> bytes:
        """The file's bytes: the header line, then one sorted-key line per record (a record
        given as a string is a line kept from an older file, copied as it is)."""
        lines = [dumps_json(self.header, indent=None)]
        lines.extend(r if isinstance(r, str) else dumps_json(r, indent=None) for r in records)
        return ("\n".join(lines) + "\n").encode("utf-8")

    def write(self, path: Path, records: Iterable[dict[str, Any] | str]) -> None:
        """Replace ``path`` atomically (a temporary file renamed over it)."""
        atomic_write_bytes(path, self.dump(records))

    def read(
        self, path: Path, parse: Parse[T], *, label: str = "cassette"
    ) -> tuple[list[T], list[CassetteError]]:
        """``check`` of a file; ``CassetteError`` when it cannot be read or is not UTF-8."""
        try:
            with open(path, "rb") as stream:
                return self._check(_decoded_lines(stream, path), path, parse)
        except FileNotFoundError:
            raise CassetteError(f"{label} file not found", file=path) from None
        except IsADirectoryError:
            raise CassetteError("expected a cassette file, found a directory", file=path) from None
        except OSError as exc:
            raise CassetteError(f"cannot read cassette: {exc.strerror or exc}", file=path) from None

    def check(self, text: str, path: Path, parse: Parse[T]) -> tuple[list[T], list[CassetteError]]:
        """The records of a cassette's text and every problem in it (a suite load shows all)."""
        return self._check(iter(text.split("\n")), path, parse)

    def _check(
        self, lines: Iterator[str], path: Path, parse: Parse[T]
    ) -> tuple[list[T], list[CassetteError]]:
        problems: list[CassetteError] = []
        header = next(lines, "")  # outside the try: an unreadable file is not a line's problem
        try:
            self._check_header(header, path)
        except CassetteError as exc:
            problems.append(exc)
        records: list[T] = []
        for number, line in enumerate(lines, start=2):
            if not line.strip():
                continue
            try:
                value = self._load_line(line, path, number)
                records.append(parse(value, Fail(path, number)))
            except CassetteError as exc:
                problems.append(exc)
        return records, problems

    def _load_line(self, line: str, path: Path, number: int) -> Any:
        try:
            value = loads_finite(line)
        except (ValueError, RecursionError) as exc:
            raise CassetteError(
                f"not valid JSON: {unreadable_json(exc)}", file=path, line=number
            ) from None
        if nests_deeper_than(value, text=line):
            raise CassetteError(too_deep(self.record), file=path, line=number)
        return value

    def _check_header(self, line: str, path: Path) -> None:
        expected = json.dumps(self.header, sort_keys=True)
        if not line.strip():
            raise CassetteError(
                f"expected the header line {expected}; found an empty line", file=path, line=1
            )
        data = self._load_line(line, path, 1)
        if isinstance(data, dict) and data.get("format") == self.header["format"]:
            version = data.get("schema_version")
            if version == self.header["schema_version"]:
                return
            raise CassetteError(
                f"schema_version {excerpt(repr(version))} is not supported (this trialrun reads "
                f"{self.header['schema_version']}); was it written by a newer trialrun?",
                file=path,
                line=1,
            )
        hint = ""
        other = data.get("format") if isinstance(data, dict) else None
        if isinstance(other, str) and other.startswith("trialrun-"):  # another trialrun file
            hint = f" (this is a {excerpt(other)} file)"
        elif isinstance(data, dict) and "tool" in data:
            hint = " (this looks like a tool cassette)"
        raise CassetteError(f"expected the header line {expected}{hint}", file=path, line=1)


def raw_lines(path: Path) -> list[str]:
    """The lines of a cassette as they are in the file (line ``n`` at index ``n - 1``), for
    copying a recording into a new file byte for byte; empty when there is no file."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    return data.decode("utf-8").split("\n")


def first(result: tuple[list[T], list[CassetteError]]) -> list[T]:
    """The records, or the first problem raised."""
    records, problems = result
    if problems:
        raise problems[0]
    return records


def known_fields(data: dict[str, Any], fields: tuple[str, ...], fail: Fail) -> None:
    """Refuse a field not in ``fields`` (with a did-you-mean)."""
    for name in data:
        if name not in fields:
            raise fail(f"unknown field {excerpt(repr(name))}{did_you_mean(name, fields)}")


def status_of(data: dict[str, Any], fail: Fail) -> int:
    status = data["status"]
    if not is_int(status) or not 100 <= status <= 599:
        raise fail(f"field 'status' must be an HTTP status (100-599); found {kind(status)}")
    return int(status)


def elapsed_of(data: dict[str, Any], fail: Fail) -> float:
    elapsed = data.get("elapsed_ms", 0.0)
    if isinstance(elapsed, bool) or not isinstance(elapsed, int | float) or not elapsed >= 0:
        raise fail(f"field 'elapsed_ms' must be a number >= 0; found {kind(elapsed)}")
    return float(elapsed) if math.isfinite(elapsed) else 0.0


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def kind(value: Any) -> str:
    """A JSON value as an error message names it (``string 'abc'``, ``a list``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, int | float):
        return f"number {value}"
    if isinstance(value, str):
        return f"string {excerpt(value)!r}"
    return "a list" if isinstance(value, list) else "an object"


def _decoded_lines(stream: BinaryIO, path: Path) -> Iterator[str]:
    offset = 0
    for number, raw in enumerate(stream, start=1):
        try:
            yield raw.removesuffix(b"\n").decode("utf-8")
        except UnicodeDecodeError as exc:
            where = f"byte 0x{raw[exc.start]:02x} at offset {offset + exc.start}"
            raise CassetteError(f"not valid UTF-8 ({where})", file=path, line=number) from None
        offset += len(raw)
