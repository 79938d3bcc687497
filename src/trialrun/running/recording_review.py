"""The review of a re-recording: a case's old and new recording files, recording by recording.

Record and update modes rewrite a case's recording files (the tool cassette, one per MCP server,
the model gateway's, the HTTP recorder's). Before the case runs their bytes are kept; once the
case ended cleanly and the new files are in place, each new recording is paired with an old one:

1. first with the first unused old recording of the same request (same tool, server method,
   model endpoint or URL, with the same arguments or body), in file order;
2. then, among those left, with the first old recording of the same identity (same tool, method,
   endpoint or URL) whose request differed: the recording it *replaced*;
3. a new recording left over was *added*, an old one *removed*.

A pair is ``identical`` (same JSON), ``volatile-only`` (equal once what the suite declares
volatile is removed: its ``normalization`` rules, the built-in volatile text of the model
gateway (UUIDs, date-times, temporary paths), timings and HTTP headers) or ``changed``, with
the first differing field (``result.items[2].price``) and a short excerpt of both sides.
Update mode's counts come from the same pairing: ``kept`` (an identical pair), ``replaced``
(any other pair), ``added`` and ``dropped`` (removed).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trialrun.base import canonjson
from trialrun.base.nesting import MAX_NESTING
from trialrun.base.results import JsonObject

if TYPE_CHECKING:
    from trialrun.config import Case, Suite
    from trialrun.config.models import Normalization

COUNTS = ("kept", "replaced", "added", "dropped")
EXCERPT_CHARS = 120

# Fields that change on every call without changing what was asked or answered.
_TIMING_KEYS = frozenset({"elapsed_ms", "duration_ms", "recorded_at"})
_HEADER_KEYS = frozenset({"headers", "request_headers", "response_headers"})
# The model key and occurrence are derived from the request (kept for people reading the file).
_DERIVED_KEYS = frozenset({"key", "occurrence"})
_BODY_KEYS = frozenset({"body", "request_body", "response_body"})


@dataclass(frozen=True)
class _Recording:
    line: int
    identity: str
    request: str
    data: Any


def case_recording_files(suite: Suite, case: Case) -> list[Path]:
    """Every file record or update mode may rewrite for ``case``: tool cassette first."""
    from trialrun.running.recording_paths import (
        http_cassette_path,
        mcp_cassette_path,
        model_cassette_path,
    )

    files = [case.cassette_path]
    files.extend(mcp_cassette_path(case, name) for name in suite.config.mcp_servers)
    files.append(model_cassette_path(case))
    files.append(http_cassette_path(case))
    return files


def snapshot(paths: Sequence[Path]) -> dict[Path, bytes | None]:
    """Each file's bytes before the case (None: there was none, or it cannot be read)."""
    return {path: _read(path) for path in paths}


def review_case(
    before: dict[Path, bytes | None],
    rules: Normalization | None,
    show: Callable[[Path], str] = str,
) -> list[JsonObject]:
    """One block per file the case rewrote: ``{file, counts, recordings}``."""
    volatile = _VolatileView(rules)
    blocks: list[JsonObject] = []
    for path, old in before.items():
        new = _read(path)
        if new is None:  # a service the suite has but this case did not record
            continue
        recordings = review_file(old, new, volatile)
        counts = counts_of(recordings)
        blocks.append({"file": show(path), "counts": counts, "recordings": recordings})
    return blocks


def review_file(old: bytes | None, new: bytes, volatile: _VolatileView) -> list[JsonObject]:
    """Every recording of ``new`` in file order, then every removed one of ``old``."""
    olds = _recordings(old or b"")
    news = _recordings(new)
    partner: list[int | None] = [None] * len(news)
    taken = [False] * len(olds)
    # Queues of old recordings in file order, by request and by identity: each new recording
    # takes the first one not yet taken, in one pass per rule (a big cassette is not scanned
    # once per recording).
    by_request: dict[tuple[str, str], deque[int]] = {}
    by_identity: dict[str, deque[int]] = {}
    for index, old_recording in enumerate(olds):
        by_request.setdefault((old_recording.identity, old_recording.request), deque()).append(
            index
        )
        by_identity.setdefault(old_recording.identity, deque()).append(index)
    for at, recording in enumerate(news):
        partner[at] = _first_free(by_request.get((recording.identity, recording.request)), taken)
    for at, recording in enumerate(news):
        if partner[at] is None:
            partner[at] = _first_free(by_identity.get(recording.identity), taken)
    out: list[JsonObject] = []
    for at, recording in enumerate(news):
        paired = partner[at]
        if paired is None:
            out.append(_entry("added", recording.identity, None, recording.line))
            continue
        out.append(_compared(olds[paired], recording, volatile))
    for at, recording in enumerate(olds):
        if not taken[at]:
            out.append(_entry("removed", recording.identity, recording.line, None))
    return out


def _first_free(queue: deque[int] | None, taken: list[bool]) -> int | None:
    """The first index of ``queue`` not taken yet, now taken; None when there is none."""
    while queue:
        index = queue.popleft()
        if not taken[index]:
            taken[index] = True
            return index
    return None


def counts_of(recordings: Sequence[JsonObject]) -> dict[str, int]:
    """Update mode's words for a file's review: kept, replaced, added, dropped."""
    counts = dict.fromkeys(COUNTS, 0)
    for recording in recordings:
        status = recording["status"]
        if status == "identical":
            counts["kept"] += 1
        elif status in ("volatile-only", "changed"):
            counts["replaced"] += 1
        elif status == "added":
            counts["added"] += 1
        else:
            counts["dropped"] += 1
    return counts


def changed_recordings(blocks: Sequence[JsonObject]) -> list[str]:
    """``file line N: identity (field)`` for each changed recording, in order."""
    named: list[str] = []
    for block in blocks:
        for recording in block["recordings"]:
            if recording["status"] == "changed":
                named.append(
                    f"{block['file']} line {recording['new_line']}: {recording['recording']} "
                    f"({recording['field']})"
                )
    return named


def _entry(status: str, identity: str, old_line: int | None, new_line: int | None) -> JsonObject:
    return {"status": status, "recording": identity, "old_line": old_line, "new_line": new_line}


def _compared(old: _Recording, new: _Recording, volatile: _VolatileView) -> JsonObject:
    # When it was recorded is not what was recorded: a recording made again unchanged is identical.
    if _without_stamp(old.data) == _without_stamp(new.data):
        return _entry("identical", new.identity, old.line, new.line)
    if volatile(old.data) == volatile(new.data):
        return _entry("volatile-only", new.identity, old.line, new.line)
    entry = _entry("changed", new.identity, old.line, new.line)
    where, before, after = first_difference(volatile(old.data), volatile(new.data))
    entry["field"] = where or "(whole recording)"
    start = _first_unequal_char(before, after)
    entry["old"] = _excerpt(before, start)
    entry["new"] = _excerpt(after, start)
    return entry


_MISSING = object()
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_$-]+")


def first_difference(old: Any, new: Any, path: str = "") -> tuple[str, Any, Any]:
    """The dotted path of the first place ``old`` and ``new`` differ, and both values there.

    Keys are visited in sorted order, list items by index (``items[2]``); a key on one side only
    is a difference at that key (its missing side is ``None``)."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new)):
            if old.get(key, _MISSING) != new.get(key, _MISSING) or (key in old) != (key in new):
                inner = _key_path(path, key)
                if key not in old or key not in new:
                    return inner, old.get(key), new.get(key)
                return first_difference(old[key], new[key], inner)
        return path, old, new
    if isinstance(old, list) and isinstance(new, list):
        for index in range(max(len(old), len(new))):
            inner = f"{path}[{index}]"
            if index >= len(old) or index >= len(new):
                return (
                    inner,
                    old[index] if index < len(old) else None,
                    new[index] if index < len(new) else None,
                )
            if old[index] != new[index]:
                return first_difference(old[index], new[index], inner)
        return path, old, new
    return path, old, new


def _key_path(path: str, key: str) -> str:
    """``path.key``; a key that is not a plain name is quoted: ``path["a.b"]``."""
    if _PLAIN_KEY.fullmatch(key):
        return f"{path}.{key}" if path else key
    return f"{path}[{json.dumps(key, ensure_ascii=False)}]"


def _without_stamp(data: Any) -> Any:
    if isinstance(data, dict) and "recorded_at" in data:
        return {key: value for key, value in data.items() if key != "recorded_at"}
    return data


def _first_unequal_char(old: Any, new: Any) -> int:
    """Where two texts first differ (0 for anything else): their excerpts start near there."""
    if not (isinstance(old, str) and isinstance(new, str)):
        return 0
    for at, (a, b) in enumerate(zip(old, new, strict=False)):
        if a != b:
            return at
    return min(len(old), len(new))


def _excerpt(value: Any, differs_at: int = 0) -> str:
    """At most ``EXCERPT_CHARS`` of ``value`` as text, from a little before ``differs_at``."""
    text = value if isinstance(value, str) else canonjson.dumps(value)
    if len(text) <= EXCERPT_CHARS:
        return text
    start = max(0, min(differs_at - EXCERPT_CHARS // 3, len(text) - EXCERPT_CHARS))
    head = "..." if start > 0 else ""
    end = start + EXCERPT_CHARS
    tail = "..." if end < len(text) else ""
    return head + text[start:end] + tail


def _recordings(data: bytes) -> list[_Recording]:
    found: list[_Recording] = []
    for line_no, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        text = raw.decode("utf-8", "replace").lstrip("\ufeff")
        parsed: Any = text
        # Too deep a line is compared as text: the parser would hit Python's recursion limit,
        # and on some versions a RecursionError caught in C leaves the interpreter unwell.
        if not _brackets_deeper_than(raw, MAX_NESTING):
            with contextlib.suppress(ValueError):
                parsed = json.loads(text)
        if _is_header(parsed):
            continue
        identity, request = _identity(parsed)
        found.append(_Recording(line_no, identity, request, parsed))
    return found


def _brackets_deeper_than(raw: bytes, limit: int) -> bool:
    """Whether JSON text opens more than ``limit`` brackets inside one another (outside strings)."""
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return False
    depth = 0
    in_string = escaped = False
    for byte in raw:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):
            depth += 1
            if depth > limit:
                return True
        elif byte in (0x5D, 0x7D):
            depth -= 1
    return False


def _is_header(data: Any) -> bool:
    return isinstance(data, dict) and (data.get("kind") == "header" or "format" in data)


def _identity(data: Any) -> tuple[str, str]:
    """What a recording answers (its identity) and the request it answers, by its format."""
    if not isinstance(data, dict):
        return "line", canonjson.dumps(data)
    if isinstance(data.get("tool"), str):  # tool cassettes, and MCP tool calls
        return f"tool {data['tool']}", canonjson.dumps(data.get("args"))
    if "provider" in data:  # the model gateway
        identity = f"model {data.get('provider')} {data.get('method')} {data.get('path')}"
        return identity, canonjson.dumps(data.get("request"))
    if "url" in data:  # the HTTP recorder
        url = str(data.get("url"))
        request = [url, data.get("request_body"), data.get("request_body_base64")]
        return f"http {data.get('method')} {url.split('?', 1)[0]}", canonjson.dumps(request)
    if "method" in data:  # MCP exchanges
        return f"mcp {data['method']}", canonjson.dumps(data.get("params"))
    return "recording", canonjson.dumps(data)


class _VolatileView:
    """A recording with what the suite declares volatile removed (see the module docstring)."""

    def __init__(self, rules: Normalization | None) -> None:
        from trialrun.config.normalize import compile_text_rules
        from trialrun.gateway.normalize import DEFAULT_TEXT_RULES

        self._rules = None if rules is None or rules.is_empty else rules
        self._text_rules = compile_text_rules(DEFAULT_TEXT_RULES)

    def __call__(self, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        view = {
            key: _parsed_body(value) if key in _BODY_KEYS else value
            for key, value in data.items()
            if key not in _TIMING_KEYS and key not in _HEADER_KEYS and key not in _DERIVED_KEYS
        }
        view = self._texts(view)
        if self._rules is not None:
            from trialrun.config.normalize import normalize

            # Each field on its own: the rules' paths start at a tool's result, as when the
            # result was recorded (``items.*.rand``), and at a body's top.
            view = {key: normalize(value, self._rules) for key, value in view.items()}
        return view

    def _texts(self, value: Any) -> Any:
        from trialrun.config.normalize import normalize_text

        if isinstance(value, str):
            return normalize_text(value, self._text_rules)
        if isinstance(value, dict):
            return {key: self._texts(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self._texts(item) for item in value]
        return value


def _parsed_body(value: Any) -> Any:
    """A JSON body stored as text, parsed, so that a volatile field inside it can be found."""
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def volatile_view(rules: Normalization | None) -> _VolatileView:
    """The volatile view under ``rules`` (for a caller reviewing files itself)."""
    return _VolatileView(rules)
