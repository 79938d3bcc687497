"""The arms' transcripts as the compare page shows them: redacted, readable, and within a budget.

The store keeps each transcript raw (``transcripts/<case>.<arm>.<rep>.jsonl|txt``); the page may
leave the machine as a CI artifact, so what it embeds is redacted first. A stream-json transcript
reads as one line per message block (``[assistant → Bash] {"command": ...}``); any other text is
shown as written. Each transcript is cut at ``TRANSCRIPT_CHARS_MAX`` characters and the page at
``PAGE_TRANSCRIPT_CHARS_MAX``, each cut named with the file that holds the whole text, so a big
run still gives a page a browser opens.

A session's sub-cases share one run per arm, stored under the session's name: its transcript is
shown once per (arm, rep), with the first sub-case, and the others point to it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trialrun.base.linesplit import jsonl_lines
from trialrun.base.nesting import nests_deeper_than
from trialrun.base.redact import redact_text
from trialrun.compare.arms import SESSION_RUN_NAME

__all__ = ["PAGE_TRANSCRIPT_CHARS_MAX", "TRANSCRIPT_CHARS_MAX", "TranscriptShelf"]

TRANSCRIPT_CHARS_MAX = 20_000
"""Characters of one transcript embedded in the page; the rest stays in ``transcripts/``."""
PAGE_TRANSCRIPT_CHARS_MAX = 2_000_000
"""Characters of transcripts in the whole page: a big run still opens in a browser."""


class TranscriptShelf:
    """Hands out the transcript views of one page, keeping count of what it has embedded."""

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory
        self.left = PAGE_TRANSCRIPT_CHARS_MAX
        self.sessions_shown: dict[tuple[str, int], str] = {}

    def view(self, case: str, rep: int, arm: str) -> dict[str, Any]:
        """What the page shows of ``arm``'s transcript of (``case``, ``rep``)."""
        view: dict[str, Any] = {"arm": arm, "file": None, "text": None, "note": None}
        found = self._file(case, rep, arm)
        if found is None:
            found = self._file(SESSION_RUN_NAME, rep, arm)
            if found is None:
                view["note"] = "no transcript kept for this arm in this run directory"
                return view
            first = self.sessions_shown.setdefault((arm, rep), case)
            if first != case:
                view["file"] = found.name
                view["note"] = f"the shared session's transcript: shown with {first} rep {rep}"
                return view
        view["file"] = found.name
        try:
            raw = found.read_text(encoding="utf-8", errors="replace")
        except OSError as error:
            view["note"] = f"cannot read transcripts/{found.name}: {error.strerror or error}"
            return view
        text = readable(redact_text(raw))
        shown = min(len(text), TRANSCRIPT_CHARS_MAX, self.left)
        self.left -= shown
        view["text"] = text[:shown] if shown else None
        if shown == 0 and text:
            view["note"] = (
                f"not embedded: the page already holds {PAGE_TRANSCRIPT_CHARS_MAX:,} characters "
                f"of transcripts; read transcripts/{found.name}"
            )
        elif shown < len(text):
            view["note"] = (
                f"truncated: {shown:,} of {len(text):,} characters shown; "
                f"the whole transcript is transcripts/{found.name}"
            )
        return view

    def _file(self, case: str, rep: int, arm: str) -> Path | None:
        if self.directory is None:
            return None
        for extension in ("jsonl", "txt"):
            path = self.directory / f"{case}.{arm}.{rep}.{extension}"
            if path.is_file():
                return path
        return None


def readable(text: str) -> str:
    """A stream-json transcript as one line per block (who said or called what); other text as
    it is. A line that is not a JSON event is kept as written."""
    lines = jsonl_lines(text)
    if not lines or not all(line.lstrip().startswith("{") for line in lines if line.strip()):
        return text
    shown: list[str] = []
    for line in lines:
        try:
            event = json.loads(line)
        except (ValueError, RecursionError):
            shown.append(line)
            continue
        if nests_deeper_than(event, text=line):  # writing it out again would recurse as deep
            shown.append(line)
            continue
        shown.extend(_event_lines(event) if isinstance(event, dict) else [line])
    return "\n".join(shown)


def _event_lines(event: dict[str, Any]) -> list[str]:
    kind = str(event.get("type", "event"))
    if kind == "result":
        numbers = {key: event.get(key) for key in ("num_turns", "duration_ms", "total_cost_usd")}
        facts = " ".join(f"{key}={value}" for key, value in numbers.items() if value is not None)
        return [f"[result] {facts} {_compact(event.get('result', ''))}".rstrip()]
    message = event.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return [f"[{kind}] {_compact({k: v for k, v in event.items() if k != 'type'})}"]
    lines = []
    for block in content:
        if not isinstance(block, dict):
            lines.append(f"[{kind}] {_compact(block)}")
        elif block.get("type") == "text":
            lines.append(f"[{kind}] {block.get('text', '')}")
        elif block.get("type") == "tool_use":
            lines.append(f"[{kind} → {block.get('name')}] {_compact(block.get('input'))}")
        elif block.get("type") == "tool_result":
            lines.append(f"[tool result] {_compact(block.get('content'))}")
        else:
            lines.append(f"[{kind}] {_compact(block)}")
    return lines


def _compact(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
