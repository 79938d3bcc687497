"""The agent protocol: one JSON object per line on the agent's stdin and stdout.

Runner -> agent: ``task_start`` and ``tool_result``. Agent -> runner: ``tool_call``,
``final_output``, ``log``, ``task_error`` and (ours) ``usage``.

Ours too, for agents that hold their tools in-process (the ``trialrun.agent`` SDK): a
``tool_call`` with ``"local": true`` is answered from the cassette in replay; in record and live
mode the runner sends ``tool_run`` instead, the agent runs its own function and sends
``tool_report`` (``ok``, ``result``, ``error``), and the runner records it and answers with the
usual ``tool_result``. The agent sees the same message sequence in every mode.

What we send is pure ASCII (``\\u`` escapes), so an agent reads it correctly whatever its locale
or code page. What we read must be UTF-8; anything else an agent prints becomes a
``ProtocolError`` that names the line, never an exception of another kind.

Compared with RunLedger we are lenient where it cannot hurt (unknown extra fields are ignored, a
UTF-8 byte-order mark is skipped, ``log.level`` may be omitted) and as strict where leniency would
hide a bug: ``call_id`` must be a string because we echo it back and an agent comparing ``"1"`` with
``1`` would wait forever; ``final_output.output`` must be an object because assertions address
its fields.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trialrun.base.jsonnames import json_type
from trialrun.base.jsonnumbers import FINITE_JSON
from trialrun.base.nesting import MAX_NESTING, nests_deeper_than
from trialrun.base.redact import redact_text
from trialrun.base.reported import MAX_COUNT, as_cost_usd
from trialrun.base.results import JsonObject
from trialrun.base.visible import visible_name
from trialrun.errors import ProtocolError

AGENT_MESSAGE_TYPES = (
    "tool_call",
    "final_output",
    "log",
    "task_error",
    "usage",
    "tool_report",
    "handoff",
)
"""Message types an agent may send, in the order the protocol documents them."""

_RUNNER_MESSAGE_TYPES = frozenset({"task_start", "tool_result", "tool_run"})
_PREVIEW_CHARS = 200
_BOM = "\ufeff"


class StdoutNoiseError(ProtocolError):
    """A stdout line that is not JSON at all: a log line or a pretty-printed document."""


class InvalidJsonError(ProtocolError):
    """A line that starts a JSON object and breaks off or goes wrong: a message cut short or
    written wrongly, not a log line (so not stdout noise)."""


# Not frozen, though nothing changes a message once parsed: a deep case parses thousands of
# calls, and a frozen dataclass's __init__ sets each field through object.__setattr__.
@dataclass(slots=True)
class ToolCallMsg:
    """A call the agent asks for; read-only."""

    name: str
    call_id: str
    args: JsonObject
    local: bool = False
    """The agent holds the real tool and runs it itself when asked (``tool_run``)."""


@dataclass(frozen=True, slots=True)
class ToolReportMsg:
    """What the agent's own tool returned, after the runner asked it to run (``tool_run``)."""

    call_id: str
    ok: bool
    result: Any
    error: str | None


@dataclass(frozen=True, slots=True)
class FinalOutputMsg:
    output: JsonObject


@dataclass(frozen=True, slots=True)
class LogMsg:
    level: str
    message: str
    data: JsonObject | None


@dataclass(frozen=True, slots=True)
class TaskErrorMsg:
    message: str
    data: JsonObject | None


@dataclass(frozen=True, slots=True)
class UsageMsg:
    """Tokens and cost the agent spent since its previous ``usage`` message (counts add up)."""

    tokens_in: int | None
    tokens_out: int | None
    cost_usd: float | None
    model: str | None


@dataclass(frozen=True, slots=True)
class HandoffMsg:
    """The agent's framework handed the conversation to another agent (OpenAI Agents SDK)."""

    to: str
    source: str | None
    """The agent that handed off (the wire's ``from``), when the framework says."""


AgentMessage = (
    ToolCallMsg | FinalOutputMsg | LogMsg | TaskErrorMsg | UsageMsg | ToolReportMsg | HandoffMsg
)

_WIRE_TYPES: dict[type, str] = {
    ToolCallMsg: "tool_call",
    FinalOutputMsg: "final_output",
    LogMsg: "log",
    TaskErrorMsg: "task_error",
    UsageMsg: "usage",
    ToolReportMsg: "tool_report",
    HandoffMsg: "handoff",
}


def encode(message: Mapping[str, Any]) -> bytes:
    """One compact, ASCII-only JSON line ending in ``\\n``.

    Lone surrogates (PyYAML turns ``"\\ud83d"`` in a case file into one) become ``\\ud83d``
    escapes instead of failing. Raises ``TypeError`` / ``ValueError`` for values JSON cannot hold.
    """
    return _ENCODER.encode(message).encode("ascii") + b"\n"


# Built once: json.dumps with options builds a new encoder for every message.
_ENCODER = json.JSONEncoder(separators=(",", ":"))


def task_start(task_id: str, task_input: Any) -> JsonObject:
    return {"type": "task_start", "task_id": task_id, "input": task_input}


def tool_result(call_id: str, ok: bool, result: Any, error: str | None) -> JsonObject:
    return {"type": "tool_result", "call_id": call_id, "ok": ok, "result": result, "error": error}


def tool_run(call_id: str) -> JsonObject:
    return {"type": "tool_run", "call_id": call_id}


def parse_line(raw: bytes, line_no: int, source: str = "stdout") -> AgentMessage | None:
    """Parse one line the agent sent on ``source`` (its stdout, or the ``channel`` socket).

    Returns None for a blank line and for ``task_start`` / ``tool_result`` echoed by the agent
    (ignored, as RunLedger does). Raises ``StdoutNoiseError`` when the line is not JSON and
    ``ProtocolError`` for any other violation; nothing else escapes, whatever the bytes.
    """
    try:
        return _parse_line(raw, line_no)
    except ProtocolError as exc:
        if source == "stdout":
            raise
        # Messages are phrased for stdout, by far the common case; name the real source.
        message = exc.message.replace("stdout", source).replace("; print logs to stderr", "")
        raise type(exc)(message, line_no=exc.line_no, text=exc.text) from None


def message_type(message: AgentMessage) -> str:
    """The wire ``type`` of a parsed message, for diagnostics."""
    return _WIRE_TYPES[type(message)]


def _parse_line(raw: bytes, line_no: int) -> AgentMessage | None:
    if not raw or raw.isspace():
        return None
    text = _decode(raw, line_no)
    try:
        value = FINITE_JSON.decode(text)
    except RecursionError:
        raise ProtocolError(
            f"agent message on stdout line {line_no} is nested too deeply to parse",
            line_no=line_no,
            text=_preview(text),
        ) from None
    except ValueError as exc:
        if isinstance(exc, json.JSONDecodeError):
            if _starts_an_object(text):
                raise _invalid_json(text, line_no, exc) from None
            raise _noise(text, line_no) from None
        # json accepts the syntax but Python refuses the value (an integer with > 4300 digits).
        raise ProtocolError(
            f"agent message on stdout line {line_no} holds a value that cannot be read: {exc}",
            line_no=line_no,
            text=_preview(text),
        ) from None
    if not isinstance(value, dict):
        raise _violation(
            line_no, text, f"a protocol message must be a JSON object, found {json_type(value)}"
        )
    if nests_deeper_than(value, text=text):
        raise ProtocolError(
            f"agent message on stdout line {line_no} nests objects and arrays more than "
            f"{MAX_NESTING} levels deep; trialrun takes at most {MAX_NESTING}",
            line_no=line_no,
            text=_preview(text),
        )
    return _message(value, line_no, text)


def _decode(raw: bytes, line_no: int) -> str:
    try:
        text = raw.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError as exc:
        # Replacing the bad bytes would silently change data the assertions compare, so an agent
        # writing another encoding is told so. Text that is not JSON anyway is plain noise.
        lenient = raw.decode("utf-8", "replace").strip()
        try:
            json.loads(lenient)
        except (ValueError, RecursionError):
            raise _noise(lenient, line_no) from None
        raise ProtocolError(
            f"agent wrote invalid UTF-8 on stdout (line {line_no}, byte {exc.start}): "
            f"{_preview(lenient)}; protocol messages must be UTF-8 encoded",
            line_no=line_no,
            text=_preview(lenient),
        ) from None
    return text[1:] if text.startswith(_BOM) else text


def _message(value: JsonObject, line_no: int, text: str) -> AgentMessage | None:
    kind = value.get("type")
    if not isinstance(kind, str):
        raise _violation(
            line_no,
            text,
            'a protocol message needs a string "type" field, '
            f"found {json_type(kind) if 'type' in value else 'none'}",
        )
    if kind in _RUNNER_MESSAGE_TYPES:
        return None
    if kind == "tool_call":
        name, call_id, args = value.get("name"), value.get("call_id"), value.get("args")
        local = value.get("local")
        if (
            type(name) is str
            and type(call_id) is str
            and type(args) is dict
            and (local is None or type(local) is bool)
        ):
            # The well-formed call, checked in one go: thousands of them make a deep case.
            return ToolCallMsg(name, call_id, args, bool(local))
        return ToolCallMsg(
            name=_field(value, "name", str, line_no, text),
            call_id=_field(value, "call_id", str, line_no, text),
            args=_field(value, "args", dict, line_no, text),
            local=_field(value, "local", bool, line_no, text, default=False),
        )
    if kind == "tool_report":
        return ToolReportMsg(
            call_id=_field(value, "call_id", str, line_no, text),
            ok=_field(value, "ok", bool, line_no, text),
            result=value.get("result"),
            error=_field(value, "error", str, line_no, text, default=None),
        )
    if kind == "final_output":
        return FinalOutputMsg(output=_field(value, "output", dict, line_no, text))
    if kind == "log":
        return LogMsg(
            level=_field(value, "level", str, line_no, text, default="info"),
            message=_field(value, "message", str, line_no, text),
            data=_optional_object(value, "data", line_no, text),
        )
    if kind == "task_error":
        return TaskErrorMsg(
            message=_field(value, "message", str, line_no, text),
            data=_optional_object(value, "data", line_no, text),
        )
    if kind == "usage":
        return UsageMsg(
            tokens_in=_count(value, "tokens_in", line_no, text),
            tokens_out=_count(value, "tokens_out", line_no, text),
            cost_usd=_cost(value, line_no, text),
            model=_field(value, "model", str, line_no, text, default=None),
        )
    if kind == "handoff":
        return HandoffMsg(
            to=_field(value, "to", str, line_no, text),
            source=_field(value, "from", str, line_no, text, default=None),
        )
    raise _violation(
        line_no,
        text,
        f"unknown message type {kind!r}; expected one of {', '.join(AGENT_MESSAGE_TYPES)}",
    )


_JSON_NAMES: dict[type, str] = {str: "a string", dict: "a JSON object", bool: "a boolean"}
_MISSING = object()


def _field(
    value: JsonObject,
    key: str,
    expected: type,
    line_no: int,
    text: str,
    default: Any = _MISSING,
) -> Any:
    found = value.get(key, _MISSING)
    if found is _MISSING or (found is None and default is not _MISSING):
        if default is not _MISSING:
            return default
        raise _violation(
            line_no, text, f"{value['type']}.{key} is missing; it must be {_JSON_NAMES[expected]}"
        )
    if not isinstance(found, expected):
        raise _violation(
            line_no,
            text,
            f"{value['type']}.{key} must be {_JSON_NAMES[expected]}, found {json_type(found)}",
        )
    return found


def _optional_object(value: JsonObject, key: str, line_no: int, text: str) -> JsonObject | None:
    found = value.get(key)
    if found is None or isinstance(found, dict):
        return found
    raise _violation(
        line_no,
        text,
        f"{value['type']}.{key} must be a JSON object or null, found {json_type(found)}",
    )


def _count(value: JsonObject, key: str, line_no: int, text: str) -> int | None:
    found = value.get(key)
    if found is None:
        return None
    if isinstance(found, bool) or not isinstance(found, int) or not 0 <= found <= MAX_COUNT:
        raise _violation(
            line_no,
            text,
            f"usage.{key} must be a non-negative integer up to 2**53 - 1, found {_shown(found)}",
        )
    return found


def _cost(value: JsonObject, line_no: int, text: str) -> float | None:
    found = value.get("cost_usd")
    if found is None:
        return None
    cost = as_cost_usd(found)
    if cost is None:
        raise _violation(
            line_no,
            text,
            f"usage.cost_usd must be a non-negative number up to 1e9, found {_shown(found)}",
        )
    return cost


def _shown(found: Any) -> str:
    if isinstance(found, int | float) and not isinstance(found, bool):
        return repr(found)
    return json_type(found)


def _violation(line_no: int, text: str, problem: str) -> ProtocolError:
    return ProtocolError(
        f"agent sent an invalid protocol message (stdout line {line_no}): {problem}",
        line_no=line_no,
        text=_preview(text),
    )


def _starts_an_object(text: str) -> bool:
    """More than a lone ``{`` (the first line of a pretty-printed document, which is noise)."""
    stripped = text.strip()
    return stripped.startswith("{") and stripped != "{"


def _invalid_json(text: str, line_no: int, exc: json.JSONDecodeError) -> InvalidJsonError:
    shown = _preview(text.strip())
    if exc.msg.startswith("Unterminated string") or exc.pos >= len(text.rstrip()):
        problem = "the line ends before its JSON does (was it cut short?)"
    else:
        problem = f"{exc.msg} at column {exc.colno}"
    return InvalidJsonError(
        f"agent sent invalid JSON on stdout (line {line_no}): {problem}; found {shown}; "
        "each message must be whole JSON on one line",
        line_no=line_no,
        text=shown,
    )


def _noise(text: str, line_no: int) -> StdoutNoiseError:
    shown = _preview(text.strip())
    return StdoutNoiseError(
        f"agent printed non-protocol text on stdout (line {line_no}): {shown}; "
        "print logs to stderr",
        line_no=line_no,
        text=shown,
    )


def _preview(text: str) -> str:
    """The start of a line the agent sent, control and bidi characters written as escapes
    (``base.visible``): a line of binary garbage shows as something, and none can colour or
    reorder the message around it."""
    text = redact_text(text)
    text = text if len(text) <= _PREVIEW_CHARS else text[:_PREVIEW_CHARS] + "..."
    return visible_name(text)
