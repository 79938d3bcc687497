"""The one exception tree of trialrun.

    TrialrunError                 anything trialrun reports to a user
     +-- ConfigError              an input file is invalid (file, line, key)
     |    +-- ConfigErrors        several ConfigErrors found in one pass
     +-- ProtocolError            an agent broke the JSONL protocol (line number, offending text)
     +-- CassetteError            a cassette file is unreadable or corrupt (file, line)
     +-- CassetteMismatch         a replayed call has no unused recording (tool, args, nearest)
     +-- ReceiptError             a receipt cannot be written or read
     +-- JudgeError               a judge could not give a verdict

Messages say what was expected, what was found and where. The CLI prints ``error: <str(exc)>``
and exits 2 for ConfigError; it never shows a traceback for a TrialrunError.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class TrialrunError(Exception):
    """Base class of every error trialrun reports to a user."""


class ConfigError(TrialrunError):
    """An input file is invalid. ``str()`` is ``<file>:<line>: <message>``.

    ``line`` is None for an error about the file as a whole (missing, unreadable, a directory,
    empty); ``str()`` is then ``<file>: <message>``. An error at a place in a file gives its line.
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | Path | None = None,
        line: int | None = None,
        key: str | None = None,
    ) -> None:
        self.message = message
        self.file = str(file) if file is not None else None
        self.line = line
        self.key = key
        super().__init__(self.location_prefix() + message)

    def location_prefix(self) -> str:
        # No line for an error about the file as a whole (missing, unreadable, a directory,
        # empty): a made-up ":1:" would send the reader to a line that is not at fault.
        if self.file is None:
            return ""
        if self.line is None:
            return f"{self.file}: "
        return f"{self.file}:{self.line}: "


class ConfigErrors(ConfigError):
    """Every problem found while loading, reported at once (one line each)."""

    def __init__(self, errors: Sequence[ConfigError]) -> None:
        if not errors:
            raise ValueError("ConfigErrors needs at least one error")
        self.errors = list(errors)
        first = self.errors[0]
        super().__init__(first.message, file=first.file, line=first.line, key=first.key)
        self.args = ("\n".join(str(e) for e in self.errors),)

    def __str__(self) -> str:
        return "\n".join(str(e) for e in self.errors)

    @classmethod
    def collect(cls, errors: Iterable[ConfigError]) -> ConfigErrors | None:
        flat: list[ConfigError] = []
        for error in errors:
            flat.extend(error.errors if isinstance(error, ConfigErrors) else [error])
        return cls(flat) if flat else None


class ProtocolError(TrialrunError):
    """The agent sent something that is not a valid protocol message."""

    def __init__(
        self, message: str, *, line_no: int | None = None, text: str | None = None
    ) -> None:
        self.message = message
        self.line_no = line_no
        self.text = text
        super().__init__(message)


class CassetteError(TrialrunError):
    """A cassette file is missing, unreadable or corrupt."""

    def __init__(self, message: str, *, file: str | Path, line: int | None = None) -> None:
        self.message = message
        self.file = str(file)
        self.line = line
        where = f"{self.file}:{line}" if line is not None else self.file
        super().__init__(f"{where}: {message}")


@dataclass(frozen=True)
class NearestRecording:
    """A recorded call shown when a replayed call has no match."""

    tool: str
    args_json: str
    score: float


class CassetteMismatch(TrialrunError):
    """A tool call in replay mode found no unused matching recording."""

    def __init__(
        self,
        *,
        tool: str,
        args: Any,
        args_json: str,
        nearest: Sequence[NearestRecording],
        exhausted: int = 0,
        difference: str | None = None,
    ) -> None:
        self.tool = tool
        self.call_args = args
        self.args_json = args_json
        self.nearest = list(nearest)
        self.exhausted = exhausted
        self.difference = difference
        """``nearest recording: line 7; first difference at args.q: recorded ..., requested
        ...``: the best match's line and the first place it differs (None: no recording)."""
        super().__init__(self._render())

    def _render(self) -> str:
        lines = [
            "Cassette mismatch.",
            f"Requested tool: {_preview(self.tool, 200)}",
            # The whole call is in run.jsonl; a megabyte of it here would be the whole report.
            f"Requested args: {_preview(self.args_json, 2000)}",
        ]
        if self.exhausted:
            lines.append(
                f"{self.exhausted} identical recording(s) exist but were already used "
                "by earlier calls."
            )
        if self.nearest:
            lines.append("Closest matches:")
            lines.extend(
                f"- {n.tool} args={_preview(n.args_json)} score={n.score:.2f}" for n in self.nearest
            )
            if self.difference is not None:
                lines.append(self.difference[:1].upper() + self.difference[1:])
        else:
            lines.append("No cassette entries found.")
        return "\n".join(lines)


def _preview(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


class ReceiptError(TrialrunError):
    """A receipt cannot be written or read."""


class JudgeError(TrialrunError):
    """A judge could not give a verdict."""
