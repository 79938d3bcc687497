"""Stale recordings: older than the suite's ``max_recording_age_days``, or of a model the suite
no longer asks for (``model_gateway.models``).

Each recording says when it was made (``recorded_at``, see ``base/recordtime``); a recording
without it (written before trialrun kept it, or by hand) has no known age and is never called
old. A model recording names its model in its request. The clock is passed in (``now``, epoch
seconds), so a test sets it instead of waiting. Nothing here is read unless the suite sets one
of the two keys: a suite that asks for neither pays nothing.

Doctor names them per file; a run names them per case (console, summary.json
``stale_recordings``, report.html). They never fail a case: they still replay.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from trialrun.base.recordtime import parse_recorded_at
from trialrun.config import Case, Suite
from trialrun.errors import CassetteError
from trialrun.running.recording_paths import (
    http_cassette_path,
    mcp_cassette_path,
    model_cassette_path,
)

__all__ = ["StaleRecording", "stale_recordings"]

_DAY_S = 86400


@dataclass(frozen=True, slots=True)
class StaleRecording:
    """One stale recording: its file and line, and why it is stale."""

    path: Path
    line: int
    why: str

    def text(self, shown: str) -> str:
        """``cassettes/t1.jsonl:3: tool search: recorded 2026-01-02T00:00:00Z, 337 days ago
        (max_recording_age_days: 90)``"""
        return f"{shown}:{self.line}: {self.why}"


def stale_recordings(suite: Suite, case: Case, now: float) -> list[StaleRecording]:
    """The case's stale recordings (tool cassette, MCP, model and HTTP recordings), file by file.

    A file that is missing or cannot be read is skipped: loading and replay report that.
    """
    limit = suite.config.max_recording_age_days
    gateway = suite.config.model_gateway
    models = frozenset(gateway.models) if gateway is not None else frozenset()
    if limit is None and not models:
        return []
    found: list[StaleRecording] = []
    moment = datetime.fromtimestamp(now, UTC)
    if limit is not None:
        found += _old_tool_recordings(case.cassette_path, moment, limit)
        for server in suite.config.mcp_servers:
            path = mcp_cassette_path(case, server)
            found += _old_tool_recordings(path, moment, limit, f"mcp:{server}/")
        found += _old_http_recordings(http_cassette_path(case), moment, limit)
    found += _model_recordings(model_cassette_path(case), moment, limit, models)
    return found


def _age(value: object, moment: datetime, limit: int) -> str | None:
    """Why a recording made at ``value`` is too old, or None."""
    made = parse_recorded_at(value)
    if made is None:
        return None
    # Whole days: a recording made 30 days and some hours ago is 30 days old, as people count.
    days = int((moment - made).total_seconds() // _DAY_S)
    if days <= limit:
        return None
    return f"recorded {value}, {days} days ago (max_recording_age_days: {limit})"


def _old_tool_recordings(
    path: Path, moment: datetime, limit: int, prefix: str = ""
) -> list[StaleRecording]:
    """Tool cassette lines, and the tools/call lines of an MCP recording (same shape)."""
    try:
        data = path.read_bytes()
    except OSError:
        return []
    found: list[StaleRecording] = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if b"recorded_at" not in raw:
            continue  # cheap: most lines of an old cassette say nothing of their age
        try:
            line = json.loads(raw)
        except ValueError:
            continue
        if isinstance(line, dict):
            why = _age(line.get("recorded_at"), moment, limit)
            if why is not None:
                tool = f"{prefix}{line.get('tool')}"
                found.append(StaleRecording(path, number, f"tool {tool}: {why}"))
    return found


def _old_http_recordings(path: Path, moment: datetime, limit: int) -> list[StaleRecording]:
    if not path.exists():
        return []
    from trialrun.httprec.cassette import load_cassette

    try:
        exchanges = load_cassette(path)
    except (CassetteError, OSError):
        return []
    found: list[StaleRecording] = []
    for exchange in exchanges:
        why = _age(exchange.recorded_at, moment, limit)
        if why is not None:
            found.append(
                StaleRecording(path, exchange.line, f"http {exchange.method} {exchange.url}: {why}")
            )
    return found


def _model_recordings(
    path: Path, moment: datetime, limit: int | None, models: frozenset[str]
) -> list[StaleRecording]:
    if not path.exists():
        return []
    from trialrun.gateway.cassette import check_cassette_file

    try:
        recordings, _problems = check_cassette_file(path)
    except (CassetteError, OSError):
        return []
    found: list[StaleRecording] = []
    for recording in recordings:
        model = recording.model
        reasons = []
        if models and model is not None and model not in models:
            asked = ", ".join(sorted(models))
            reasons.append(
                f"the suite no longer asks for this model (model_gateway.models: {asked})"
            )
        if limit is not None:
            why = _age(recording.recorded_at, moment, limit)
            if why is not None:
                reasons.append(why)
        if reasons:
            found.append(
                StaleRecording(path, recording.line, f"model {model}: {'; '.join(reasons)}")
            )
    return found
