"""Tool uses and token usage read from a coding agent's stream-json transcript.

``trialrun attempt`` records a ``tool_call`` receipt event for each tool the agent used when the
agent's stdout is a Claude-Code-style ``--output-format stream-json`` transcript: one JSON object
a line, ``assistant`` messages whose ``message.content`` holds ``tool_use`` blocks
(``id``, ``name``, ``input``), ``user`` messages whose content holds ``tool_result`` blocks
(``tool_use_id``, ``content``, ``is_error``) and a final ``result`` line with ``usage`` and
``total_cost_usd``. Anything else (plain text, unknown types, partial-message stream events) is
skipped: an agent that prints prose simply yields no tool calls.

Decisions:

* A line may come with the time it arrived, as ``(seconds, text)``: the harness knows when it
  read each line, the transcript does not. Without it an ISO ``timestamp`` member of the object
  is used (Claude Code session logs carry one). A duration needs both ends; otherwise it is 0.
* Results are matched by id, so they may arrive in any order, even before their ``tool_use``.
  A tool use whose result never came (the agent was killed mid-call) counts as failed.
* ``args_summary`` is redacted *before* it is cut to ``SUMMARY_LIMIT`` characters: cutting first
  could split a secret so that redaction no longer recognises the part left behind.
  ``ToolUse.redacted`` says whether that removed anything, so the receipt's ``redacted`` flag
  stays true (the writer ORs it with its own finding).
* Usage comes from the last ``result`` line only; without one there is no usage (``None``),
  since token counts without the cost would make the receipt's totals look complete.
  ``totalTokens`` is input + output, as in the receipt reference vectors. A count or a cost that
  no report can hold (``base.reported``: negative, fractional, beyond its bound) counts as 0
  there; in a usage file it rejects its line.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from trialrun.base.linesplit import jsonl_lines
from trialrun.base.reported import as_cost_usd, as_count
from trialrun.receipt.args_summary import SUMMARY_LIMIT, summarize_args

__all__ = [
    "SUMMARY_LIMIT",
    "TimedLine",
    "ToolUse",
    "UsageRecords",
    "parse_stream_json",
    "parse_usage_file",
    "summarize_args",
    "usage_from_transcript",
]

_TOKEN_MEMBERS = ("inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens")

TimedLine = tuple[float, str]
"""A transcript line with the time it arrived (any clock in seconds, e.g. ``time.monotonic``)."""


@dataclass(frozen=True, slots=True)
class ToolUse:
    """One ``tool_use`` block of the transcript and how its result came back."""

    name: str
    args_summary: str
    ok: bool
    duration_ms: float
    call_id: str = ""
    redacted: bool = False
    """True when redaction removed something from ``args_summary``."""


@dataclass(slots=True)
class _Line:
    seconds: float | None
    obj: dict[str, Any]


@dataclass(slots=True)
class _Result:
    ok: bool
    seconds: float | None


def parse_stream_json(lines: Iterable[str | TimedLine]) -> list[ToolUse]:
    """Every tool use in the transcript, in the order the agent made them."""
    uses: list[tuple[str, dict[str, Any], _Line]] = []
    results: dict[str, _Result] = {}
    seen_ids: set[str] = set()
    for line in _json_lines(lines):
        kind = line.obj.get("type")
        if kind == "assistant":
            for block in _content_blocks(line.obj, "tool_use"):
                call_id = _string(block.get("id"))
                if call_id and call_id in seen_ids:
                    continue  # the same message repeated, as partial-message streams do
                if call_id:
                    seen_ids.add(call_id)
                uses.append((call_id, block, line))
        elif kind == "user":
            for block in _content_blocks(line.obj, "tool_result"):
                call_id = _string(block.get("tool_use_id"))
                if call_id and call_id not in results:
                    results[call_id] = _Result(block.get("is_error") is not True, line.seconds)
    return [_tool_use(call_id, block, line, results.get(call_id)) for call_id, block, line in uses]


def usage_from_transcript(lines: Iterable[str | TimedLine]) -> dict[str, Any] | None:
    """The receipt ``usage`` members (without ``attempt``) from the last ``result`` line."""
    result: dict[str, Any] | None = None
    model: str | None = None
    for line in _json_lines(lines):
        kind = line.obj.get("type")
        if kind == "result":
            result = line.obj
        elif kind == "assistant":
            message = line.obj.get("message")
            if isinstance(message, dict) and _string(message.get("model")):
                model = _string(message.get("model"))
        elif kind == "system" and model is None and _string(line.obj.get("model")):
            model = _string(line.obj.get("model"))
    if result is None:
        return None
    raw_usage = result.get("usage")
    usage: Mapping[str, Any] = raw_usage if isinstance(raw_usage, dict) else {}
    cost = result.get("total_cost_usd")
    if not usage and not _is_number(cost):
        return None
    members: dict[str, Any] = {
        "inputTokens": _count(usage.get("input_tokens")),
        "outputTokens": _count(usage.get("output_tokens")),
        "cacheReadTokens": _count(usage.get("cache_read_input_tokens")),
        "cacheWriteTokens": _count(usage.get("cache_creation_input_tokens")),
        "costUsd": as_cost_usd(cost) or 0.0,
    }
    members["totalTokens"] = members["inputTokens"] + members["outputTokens"]
    model = model or _single_key(result.get("modelUsage"))
    if model:
        members["model"] = model
    return members


class UsageRecords(list[dict[str, Any]]):
    """The good lines of a usage file; ``rejected`` counts the lines that were not."""

    def __init__(self) -> None:
        super().__init__()
        self.rejected = 0
        self.problems: list[str] = []
        """One ``line N: why`` message per rejected line."""


def parse_usage_file(path: str | Path) -> UsageRecords:
    """Usage lines an agent appended to ``TRIALRUN_USAGE_FILE``, as receipt ``usage`` members.

    Each line is a JSON object with some of ``inputTokens``, ``outputTokens``,
    ``cacheReadTokens``, ``cacheWriteTokens``, ``totalTokens`` (non-negative integers),
    ``costUsd`` (non-negative number) and ``model`` (string). Missing counts and cost are 0,
    a missing ``totalTokens`` is input + output, other members (``attempt`` included: the
    harness sets it) are dropped. A line that is not such an object is skipped and counted.
    A missing file means the agent reported nothing: no records.
    """
    records = UsageRecords()
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return records
    for number, raw in enumerate(jsonl_lines(text), start=1):
        if not raw.strip():
            continue
        record, problem = _usage_record(raw)
        if record is None:
            records.rejected += 1
            records.problems.append(f"line {number}: {problem}")
        else:
            records.append(record)
    return records


def _usage_record(raw: str) -> tuple[dict[str, Any] | None, str]:
    obj = _loads_object(raw)
    if obj is None:
        return None, "expected a JSON object, found other text"
    record: dict[str, Any] = {}
    for member in (*_TOKEN_MEMBERS, "totalTokens"):
        value = obj.get(member, 0)
        count = as_count(value)
        if count is None:
            return (
                None,
                f"expected {member} to be a non-negative integer up to 2**53 - 1, found {value!r}",
            )
        record[member] = count
    cost = as_cost_usd(obj.get("costUsd", 0))
    if cost is None:
        found = obj.get("costUsd")
        return None, f"expected costUsd to be a non-negative number up to 1e9, found {found!r}"
    record["costUsd"] = cost
    if "totalTokens" not in obj:
        record["totalTokens"] = record["inputTokens"] + record["outputTokens"]
    model = obj.get("model")
    if model is not None and not isinstance(model, str):
        return None, f"expected model to be a string, found {model!r}"
    if model:
        record["model"] = model
    if not any(key in obj for key in (*_TOKEN_MEMBERS, "totalTokens", "costUsd")):
        return None, "expected at least one usage member (inputTokens, costUsd, ...), found none"
    return record, ""


# ---- reading lines -------------------------------------------------------------------------


def _json_lines(lines: Iterable[str | TimedLine]) -> Iterator[_Line]:
    for item in lines:
        timed = isinstance(item, tuple)
        text: object
        if isinstance(item, tuple):
            if len(item) != 2:
                continue
            seconds = _as_float(item[0])
            text = item[1]
        else:
            text, seconds = item, None
        if not isinstance(text, str):
            continue
        obj = _loads_object(text)
        if obj is None:
            continue
        if not timed:
            # One clock per transcript: an arrival clock and the agent's own never mix.
            seconds = _iso_seconds(obj.get("timestamp"))
        yield _Line(seconds, obj)


def _loads_object(text: str) -> dict[str, Any] | None:
    stripped = text.strip().lstrip("\ufeff")
    if not stripped.startswith("{"):
        return None
    try:
        # NaN and Infinity are not JSON; keep their spelling rather than lose the line.
        value = json.loads(stripped, parse_constant=str)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _iso_seconds(value: Any) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        if moment.tzinfo is None:
            return None  # a naive time cannot be compared with an aware one
        return moment.timestamp()
    except (ValueError, OverflowError, OSError):
        return None


def _content_blocks(obj: Mapping[str, Any], block_type: str) -> Iterator[dict[str, Any]]:
    message = obj.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return  # a plain string is text the agent said, never a tool block
    for block in content:
        if isinstance(block, dict) and block.get("type") == block_type:
            yield block


# ---- building tool uses ----------------------------------------------------------------------


def _tool_use(call_id: str, block: dict[str, Any], line: _Line, result: _Result | None) -> ToolUse:
    summary, redacted = summarize_args(block.get("input"))
    duration = 0.0
    if result is not None and result.seconds is not None and line.seconds is not None:
        duration = _finite_ms(result.seconds - line.seconds)
    return ToolUse(
        name=_string(block.get("name")) or "unknown",
        args_summary=summary,
        ok=result is not None and result.ok,
        duration_ms=duration,
        call_id=call_id,
        redacted=redacted,
    )


def _finite_ms(seconds: float) -> float:
    millis = seconds * 1000.0
    if not math.isfinite(millis) or millis < 0:
        return 0.0  # a clock that went backwards says nothing about the call
    return round(millis, 3)


# ---- value checks ----------------------------------------------------------------------------


def _string(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _is_number(value: Any) -> bool:
    """A finite JSON number (huge integers included, booleans excluded)."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))


def _as_float(value: Any) -> float | None:
    if not _is_number(value):
        return None
    try:
        return float(value)
    except OverflowError:
        return None


def _count(value: Any) -> int:
    return as_count(value) or 0


def _single_key(value: Any) -> str | None:
    if isinstance(value, dict) and len(value) == 1:
        key = next(iter(value))
        return key if isinstance(key, str) and key else None
    return None
