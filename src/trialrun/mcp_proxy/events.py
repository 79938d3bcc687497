"""The events file: one JSON line per ``tools/call`` as it completes, for the runner to read.

The runner reads the file while the proxy is still running (and after it was killed), so each
event is one ``write`` of one whole line to a file opened for appending, and ``read_events``
ignores a last line that was cut short. Line layout::

    {"server": str, "tool": str, "args": object, "ok": bool, "result": any, "error": str|null,
     "timestamp": float, "duration_ms": float, "replayed": bool, "recording": int|null}

``timestamp`` is when the call arrived (epoch seconds), so ``timestamp + duration_ms`` is when
it was answered; lines are in the order calls completed. ``recording`` is the cassette line of
the recording that answered the call (replay, and update for a call it replayed; null for a miss
and for a call the server answered): the runner tells the recordings no call used from it
without reading the cassette again. Everything is redacted.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from pathlib import Path
from typing import Any

from trialrun.base.fsutil import escape_lone_surrogates
from trialrun.base.nesting import unreadable_json
from trialrun.base.redact import redact
from trialrun.errors import TrialrunError
from trialrun.mcp_proxy.jsonrpc import JsonObject


def failure_path(events: Path) -> Path:
    """``FILE.failure`` beside the events file ``FILE``: why the server did not start."""
    return events.with_name(events.name + ".failure")


def note_failure(events: Path, message: str) -> None:
    """Record why the server never served (one line of text, redacted) for the runner: the
    agent's MCP client usually buries the same line on stderr under its own traceback."""
    from trialrun.base.fsutil import atomic_write_text
    from trialrun.base.redact import redact_text

    with contextlib.suppress(OSError):  # the error is still on stderr and in the exit code
        atomic_write_text(failure_path(events), redact_text(message) + "\n")


def read_failure(events: Path) -> str | None:
    """What ``note_failure`` recorded beside ``events``, or None."""
    try:
        return failure_path(events).read_text(encoding="utf-8", errors="replace").strip() or None
    except OSError:
        return None


def call_outcome(result: Any, rpc_error: JsonObject | None) -> tuple[bool, str | None]:
    """``(ok, error text)`` of a tools/call answer, in trialrun's tool-call terms.

    A JSON-RPC error and a result with ``isError: true`` both fail the call; the error text is
    the JSON-RPC message (with its code) or the result's text content.
    """
    if rpc_error is not None:
        return False, f"JSON-RPC error {rpc_error.get('code')}: {rpc_error.get('message')}"
    if isinstance(result, dict) and result.get("isError") is True:
        content = result.get("content")
        texts = [
            block["text"]
            for block in (content if isinstance(content, list) else [])
            if isinstance(block, dict) and isinstance(block.get("text"), str)
        ]
        return False, "\n".join(texts) or "the tool reported an error (isError: true)"
    return True, None


class EventLog:
    """Appends events to one file; safe to call from several threads."""

    def __init__(self, path: Path | None, *, server: str, replayed: bool) -> None:
        self.path = path
        self.server = server
        self.replayed = replayed
        self._lock = threading.Lock()
        self._fd: int | None = None
        if path is not None:
            self._fd = _open_for_append(path)

    def tool_call(
        self,
        *,
        tool: str,
        args: Any,
        ok: bool,
        result: Any,
        error: str | None,
        timestamp: float,
        duration_ms: float,
        recording: int | None = None,
        replayed: bool | None = None,
    ) -> None:
        """One ``tools/call``, the same for a recorded and a replayed call; nothing when the
        proxy keeps no event log. ``replayed`` None: as the log says (update mode's log holds
        both kinds)."""
        if self._fd is None:
            return
        event = redact(
            {
                "server": self.server,
                "tool": tool,
                "args": args,
                "ok": ok,
                "result": result,
                "error": error,
                "timestamp": timestamp,
                "duration_ms": round(duration_ms, 3),
                "replayed": self.replayed if replayed is None else replayed,
                "recording": recording,
            }
        )
        ordered = {key: event[key] for key in sorted(event)}  # result keeps its wire order
        text = json.dumps(ordered, ensure_ascii=False, allow_nan=False)
        data = (escape_lone_surrogates(text) + "\n").encode("utf-8")
        with self._lock:
            view = memoryview(data)
            while view:  # O_APPEND: a regular file takes it in one write; loop for safety
                view = view[os.write(self._fd, view) :]

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


def read_events(path: str | Path) -> list[dict[str, Any]]:
    """The events written so far; a missing file is no events, a cut-off last line is ignored.

    Read one line at a time: the events are kept, not the file's bytes and lines beside them.
    """
    file = Path(path)
    try:
        stream = open(file, "rb")  # noqa: SIM115 - closed below, after the missing-file case
    except FileNotFoundError:
        return []
    events: list[dict[str, Any]] = []
    with stream:
        for line_no, line in enumerate(stream, start=1):
            if not line.endswith(b"\n"):
                if line.strip():
                    # The proxy is still writing this line (or was killed while writing it).
                    with contextlib.suppress(TrialrunError):
                        events.append(_event(line, file, line_no))
                break
            if line.strip():
                events.append(_event(line, file, line_no))
    return events


def _event(line: bytes, file: Path, line_no: int) -> dict[str, Any]:
    try:
        value = json.loads(line)
    except (ValueError, RecursionError) as exc:
        raise TrialrunError(
            f"{file}:{line_no}: expected a JSON event, found {unreadable_json(exc)}"
        ) from None
    if not isinstance(value, dict):
        raise TrialrunError(f"{file}:{line_no}: expected a JSON object per line")
    return value


def _open_for_append(path: Path) -> int:
    from trialrun.base.fsutil import make_output_dir
    from trialrun.errors import ConfigError

    make_output_dir(path.parent)
    try:
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)
    except OSError as exc:
        raise ConfigError(
            f"cannot open the events file: {exc.strerror or exc}", file=path
        ) from None
