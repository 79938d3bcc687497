"""Record mode: run tools live and write each call down, committing the cassette only at the end.

RunLedger truncated the cassette when a case started, so an agent that crashed or hung left an
empty or partial cassette where a good one had been, and two cases naming one cassette overwrote
each other. Here entries go to a temporary file beside the cassette, which replaces it only when
the case ends cleanly; and a cassette can be recorded by one case at a time per process.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from pathlib import Path
from typing import Any

from trialrun.base.fsutil import fsync_directory, temporary_beside, write_all
from trialrun.base.recordtime import recorded_at
from trialrun.base.redact import redact
from trialrun.base.results import JsonObject
from trialrun.errors import CassetteError
from trialrun.tools.base import LocalTool, ToolOutcome
from trialrun.tools.live import LiveBackend

_recording: set[Path] = set()
_recording_lock = threading.Lock()


class CassetteInUseError(CassetteError):
    """Another case of this run is already recording the same cassette file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        super().__init__(
            "cassette is already being recorded by another case in this run; "
            "expected each case in record mode to name its own cassette file",
            file=path,
        )


class RecordingBackend:
    """Answers calls with a live backend and appends each call, redacted, to a temporary file."""

    def __init__(self, live: LiveBackend, cassette_path: Path) -> None:
        self._live = live
        self.cassette_path = cassette_path
        self._key = cassette_path.resolve()
        with _recording_lock:
            if self._key in _recording:
                raise CassetteInUseError(cassette_path)
            _recording.add(self._key)
        self.temp_path = temporary_beside(cassette_path)
        try:
            cassette_path.parent.mkdir(parents=True, exist_ok=True)
            # A descriptor, not a buffered file: each entry is one os.write, and a failed write
            # (a full disk) is seen at the call that made it.
            self._fd: int | None = os.open(
                self.temp_path,
                os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_BINARY", 0),
                0o666,
            )
        except OSError as exc:
            self._release()
            raise CassetteError(
                f"cannot start recording: {exc.strerror or exc}", file=self.cassette_path
            ) from None
        self.recorded = 0

    async def call(
        self, name: str, args: JsonObject, local: LocalTool | None = None
    ) -> ToolOutcome:
        outcome = await self._live.call(name, args, local)
        entry: JsonObject = {"tool": name, "args": args, "ok": outcome.ok, "result": outcome.result}
        # RunLedger wrote ``error`` only when there was one; cassettes stay byte-compatible.
        if outcome.error is not None:
            entry["error"] = outcome.error
        # Optional for every reader, RunLedger 0.2.3 included: it ignores keys it does not know.
        entry["recorded_at"] = recorded_at()
        line = self._append(redact(entry))
        if local is None:
            return outcome
        # An agent-run tool gets its answer as replay will give it (redacted, keys sorted): SDK
        # frameworks show the model ``str(result)``, and the model's next request must be the
        # same in record and replay for the model gateway to match it.
        replayed = json.loads(line)
        return ToolOutcome(outcome.ok, replayed.get("result"), replayed.get("error"))

    def close(self, *, clean: bool) -> None:
        """Commit the recording onto the cassette (``clean``) or throw it away; idempotent."""
        fd = self._fd
        if fd is None:
            return
        self._fd = None
        try:
            if clean:
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
                os.replace(self.temp_path, self.cassette_path)
                fsync_directory(self.cassette_path.parent)
            else:
                os.close(fd)
                self.temp_path.unlink(missing_ok=True)
        except OSError as exc:
            with contextlib.suppress(OSError):
                self.temp_path.unlink(missing_ok=True)
            raise CassetteError(
                f"cannot save the recorded cassette: {exc.strerror or exc}",
                file=self.cassette_path,
            ) from None
        finally:
            self._release()

    def unused(self) -> int:
        return 0

    def _append(self, entry: Any) -> bytes:
        if self._fd is None:
            raise CassetteError(
                "expected an open recording, found it already closed", file=self.cassette_path
            )
        try:
            line = _entry_line(entry)
        except (ValueError, TypeError) as exc:
            raise CassetteError(f"cannot record call: {exc}", file=self.cassette_path) from None
        self.copy_line(line)
        return line

    def copy_line(self, line: bytes) -> None:
        """Append a line as it is (update mode: a replayed recording, byte for byte)."""
        if self._fd is None:
            raise CassetteError(
                "expected an open recording, found it already closed", file=self.cassette_path
            )
        if not line.endswith(b"\n"):
            line += b"\n"
        try:
            write_all(self._fd, line)
        except OSError as exc:
            raise CassetteError(
                f"cannot write recording: {exc.strerror or exc}", file=self.cassette_path
            ) from None
        self.recorded += 1

    def _release(self) -> None:
        with _recording_lock:
            _recording.discard(self._key)


def _entry_line(entry: Any) -> bytes:
    """One cassette line in RunLedger's recorder layout: sorted keys, ``", "`` and ``": "``."""
    text = json.dumps(entry, sort_keys=True, ensure_ascii=False, allow_nan=False)
    try:
        return (text + "\n").encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate cannot be UTF-8; as a \u escape it still round-trips exactly.
        return (json.dumps(entry, sort_keys=True, allow_nan=False) + "\n").encode("ascii")
