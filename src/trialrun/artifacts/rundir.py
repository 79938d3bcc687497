"""The run directory ``<out>/<suite>/<run_id>/`` and the files in it.

``run.jsonl`` is streamed case by case to a temporary name and renamed when the run ends (or is
interrupted), so a reader never sees half a file under the final name. The other artifacts are
rendered from the finished ``RunResult`` and written atomically. The runner has already redacted
each case's trace; the verdict events, which quote agent output, are redacted here.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from trialrun.base.fsutil import (
    atomic_write_text,
    make_output_dir,
    naming,
    write_all,
    write_json,
)
from trialrun.base.redact import redact
from trialrun.base.results import CaseResult, CheckFailure, RunResult

_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def new_run_id(now: float | None = None) -> str:
    """Sortable by time to the microsecond, unique across parallel runs."""
    now = time.time() if now is None else now
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now))
    micros = int((now % 1) * 1_000_000)
    return f"{stamp}-{micros:06d}-{os.urandom(3).hex()}"


def safe_dir_name(name: str) -> str:
    """A suite name usable as one directory level (never ``..`` or a path)."""
    cleaned = _UNSAFE_NAME.sub("_", name).strip("._") or "suite"
    return cleaned[:100]


class RunDirectory:
    """Owns one run's directory and its streamed event log."""

    def __init__(self, out_dir: Path, suite_name: str, run_id: str) -> None:
        self.path = out_dir / safe_dir_name(suite_name) / run_id
        make_output_dir(out_dir)
        self.path.mkdir(parents=True, exist_ok=False)
        self._events_tmp = self.path / ".run.jsonl.partial"
        self._events_path = self.path / "run.jsonl"
        try:
            self._events: int | None = os.open(
                self._events_tmp,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0),
                0o666,
            )
        except OSError as exc:
            raise naming(exc, self._events_path) from None

    def write_case_events(self, result: CaseResult, *, run: int | None = None) -> str:
        """Append one finished case's events, then those of its verdict; SHA-256 of the lines.

        ``run``: which run of a case run more than once (``--repeat``, ``--retries``) this is;
        each of its events then carries it as ``run``, so no run's trace hides another's.
        """
        assert self._events is not None, "event log already closed"
        events = [*result.run.events, *(redact(event) for event in verdict_events(result))]
        if run is not None:
            events = [{**event, "run": run} for event in events]
        lines = _event_lines(events)
        try:
            write_all(self._events, lines)
        except OSError as exc:
            self.abandon()
            raise naming(exc, self._events_path) from None
        return hashlib.sha256(lines).hexdigest()

    def finish(self, run: RunResult, summary: dict[str, Any], junit: str, html: str) -> None:
        self.close_events()
        write_json(self.path / "summary.json", summary)
        atomic_write_text(self.path / "junit.xml", junit)
        atomic_write_text(self.path / "report.html", html)

    def close_events(self) -> None:
        if self._events is None:
            return
        try:
            try:
                os.fsync(self._events)
            finally:
                os.close(self._events)
                self._events = None
            os.replace(self._events_tmp, self._events_path)
        except OSError as exc:
            self.abandon()
            raise naming(exc, self._events_path) from None

    def abandon(self) -> None:
        """Drop the unfinished event log: a run whose files cannot be written leaves no
        temporary file behind (the receipt, written as it goes, reads as truncated)."""
        if self._events is not None:
            with contextlib.suppress(OSError):
                os.close(self._events)
            self._events = None
        with contextlib.suppress(OSError):
            self._events_tmp.unlink()


def verdict_events(result: CaseResult) -> list[dict[str, Any]]:
    """The peer's ``assertion_failure`` / ``budget_failure`` events, then ``case_end``."""
    now = time.time()
    base = {"case_id": result.case_id, "timestamp": now}
    budget = [f for f in result.check_failures if f.type.startswith("budget:")]
    asserted = [f for f in result.check_failures if not f.type.startswith("budget:")]
    events: list[dict[str, Any]] = []
    if asserted:
        failures = [
            {"type": f.type, "message": f.message, "details": f.details, **_explained(f)}
            for f in asserted
        ]
        events.append({"type": "assertion_failure", **base, "failures": failures})
    if budget:
        failures = [
            {"field": f.type.removeprefix("budget:"), **(f.details or {}), **_explained(f)}
            for f in budget
        ]
        events.append({"type": "budget_failure", **base, "failures": failures})
    end: dict[str, Any] = {
        "type": "case_end",
        **base,
        "passed": result.passed,
        "status": result.status,
        "wall_ms": result.run.wall_ms,
    }
    if result.failure is not None:
        end["failure_kind"] = result.failure.kind
        end["failure_reason"] = result.failure.message
    events.append(end)
    return events


def _explained(failure: CheckFailure) -> dict[str, Any]:
    """What the console shows for a check, kept in run.jsonl so merged runs can show it too."""
    return {
        "message": failure.message,
        "expected": failure.expected,
        "observed": failure.observed,
    }


# Built once: json.dumps with options builds a new encoder for every event.
_EVENT_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str)


def _event_lines(events: Iterable[dict[str, Any]]) -> bytes:
    """``events`` as run.jsonl lines: compact JSON, one event a line, UTF-8."""
    lines = [_EVENT_ENCODER.encode(event) for event in events]
    lines.append("")  # the newline after the last line, without copying the text again
    text = "\n".join(lines)
    # Lone surrogates from the agent survive as \ud800 escapes instead of crashing the writer;
    # json only writes them inside strings, where the escape reads back as the same value.
    return text.encode("utf-8", "backslashreplace")
