"""Score one arm's run: its checks, the commands it ran, its efficiency, whether it fired.

Everything here reads what an arm left behind (its transcript and its sandbox); nothing runs the
agent. Two transcript formats exist (``agent.transcript``):

* ``stream-json``: Claude Code's ``--output-format stream-json``, one JSON event a line. The
  *agent's words* are the ``text`` blocks of ``assistant`` messages, the ``result`` event's
  ``result`` text and the inputs of its ``tool_use`` blocks, as in the seed engine. Tool results,
  user messages and the ``system`` init event (which lists every installed skill, the subject's
  name included) are not the agent's words and are never searched. Lines that are not JSON
  objects are skipped.
* ``text``: the whole transcript is the agent's words; a line ``$ cmd`` (leading blanks allowed)
  records a shell command the agent ran.

Check kinds (seed engine, reference §1.4), evaluated in the order written, all-or-nothing per
arm being the caller's business:

* ``transcript_mentions`` / ``transcript_omits``: case-insensitive substring over the agent's
  words.
* ``command_matching`` / ``no_command_matching``: the compiled regex ``search``-ed in each shell
  command (``Bash`` tool uses in stream-json).
* ``file_exists`` / ``file_absent``: a path inside the sandbox. One that escapes it, lexically or
  through a symlink the agent made, fails either kind.
* ``command_succeeds``: ``bash -c`` in the sandbox, in its own process group, passing on exit 0.
  It runs after the agent, so a later check sees what it changed.

Where this differs from the seed engine, on purpose:

* Case folding uses ``str.casefold`` rather than lower-casing, so ``STRASSE`` finds ``straße``.
* A tool input is searched as JSON *and* through its string values. The engine searched only the
  JSON, where ``git commit -m "fix"`` is spelled ``git commit -m \\"fix\\"`` and a check quoting it
  could never match; non-ASCII is kept as written rather than escaped.
* A repeated ``tool_use`` id (partial-message streams repeat the message) is one command, not two.
* ``command_succeeds`` writes its output to a file, not a pipe, and waits for the shell alone: a
  background process it left behind cannot turn a finished command into a timeout. The whole
  group is killed afterwards so nothing outlives the check.
* A check that cannot be evaluated (a regex kind arriving without its compiled pattern, an
  unknown kind) fails that check with a reason and never errors the run, as the engine promised.

Triggers: the engine asked one tool-free selection call per prompt, answered with
``{"selected": [...]}``. Here the trigger prompt runs through the arm's own agent, and the subject
*fired* when the agent invoked it: a ``Skill`` tool use naming it (``plugin:name`` included), a
``Read`` of its ``<name>/SKILL.md``, or a selection answer listing it, so a selection-style agent
keeps working. Counting errored runs symmetrically (reference §1.10 item 7) is the caller's job:
an arm that died has no transcript to ask.
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import tempfile
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any, Literal

from trialrun.base import leftovers
from trialrun.base.linesplit import jsonl_lines
from trialrun.base.linesredact import redacting_sink
from trialrun.base.redact import redact_text
from trialrun.base.reported import as_cost_usd, as_count, as_ms
from trialrun.base.signals import signal_group
from trialrun.compare.checkspec import Check

__all__ = [
    "COMMAND_SUCCEEDS_TIMEOUT_S",
    "CheckOutcome",
    "Efficiency",
    "TranscriptFormat",
    "commands_in",
    "efficiency_of",
    "evaluate_checks",
    "measured_efficiency",
    "trigger_fired",
]

TranscriptFormat = Literal["stream-json", "text"]
COMMAND_SUCCEEDS_TIMEOUT_S = 120.0
"""The seed engine's cap on one ``command_succeeds`` check."""
_OUTPUT_TAIL_CHARS = 500
_SHOWN_CHARS = 200
_LINE_READ_BYTES = 1 << 20
_REAP_S = 5.0
_SHELL_COULD_NOT_RUN = (126, 127)
"""bash's exit codes for a command it found but could not execute, and one it did not find."""
_TEXT_COMMAND = re.compile(r"^[ \t]*\$ (.*\S)", re.MULTILINE)


@dataclass(frozen=True)
class CheckOutcome:
    """One check's result on one arm's run; ``detail`` says what was found (raw, not redacted)."""

    kind: str
    param: str
    passed: bool
    detail: str
    line: int
    could_not_run: bool = False
    """A ``command_succeeds`` whose command never ran (bash missing, exit 126 / 127: not
    executable, not found): a failure of the setup rather than of the arm."""

    @property
    def name(self) -> str:
        """The check as written, ``kind: param``: the receipt's check name."""
        return f"{self.kind}: {self.param}"


@dataclass(frozen=True)
class Efficiency:
    """What the agent reported in its ``result`` event; a value it left out, or one no report
    can hold (``base.reported``: negative, infinite, beyond its bound), is None."""

    turns: int | None
    tokens: int | None
    """Input plus output tokens, as in run receipts."""
    cost_usd: float | None
    """``total_cost_usd``, falling back to ``cost_usd`` as the engine did."""
    duration_ms: float | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class _Transcript:
    words: str
    """The agent's words, case-folded."""
    commands: tuple[str, ...]


def evaluate_checks(
    checks: Sequence[Check],
    *,
    transcript: str,
    transcript_format: TranscriptFormat,
    sandbox: Path,
    timeout_s: float = COMMAND_SUCCEEDS_TIMEOUT_S,
) -> tuple[int, int, list[CheckOutcome]]:
    """``(passed, total, outcomes)`` for ``checks`` in order; ``timeout_s`` caps each command."""
    view = _read_transcript(transcript, transcript_format)
    outcomes = [_evaluate(check, view, sandbox, timeout_s) for check in checks]
    return sum(outcome.passed for outcome in outcomes), len(outcomes), outcomes


def commands_in(transcript: str, transcript_format: TranscriptFormat) -> list[str]:
    """The shell commands the agent ran, in order."""
    return list(_read_transcript(transcript, transcript_format).commands)


def efficiency_of(transcript: str, transcript_format: TranscriptFormat) -> Efficiency | None:
    """The last ``result`` event's numbers; None for text, no result event, or nothing usable."""
    if transcript_format != "stream-json":
        return None
    results = [event for event in _events(transcript) if event.get("type") == "result"]
    if not results:
        return None
    result = results[-1]
    usage = result.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    token_counts = [as_count(usage.get(key)) for key in ("input_tokens", "output_tokens")]
    present = [count for count in token_counts if count is not None]
    cost = as_cost_usd(result.get("total_cost_usd"))
    efficiency = Efficiency(
        turns=as_count(result.get("num_turns")),
        tokens=sum(present) if present else None,
        cost_usd=cost if cost is not None else as_cost_usd(result.get("cost_usd")),
        duration_ms=as_ms(result.get("duration_ms")),
    )
    if all(value is None for value in efficiency.as_dict().values()):
        return None
    return efficiency


def measured_efficiency(duration_s: float) -> Efficiency:
    """An arm run's efficiency when its transcript reports none: the duration trialrun timed."""
    return Efficiency(turns=None, tokens=None, cost_usd=None, duration_ms=round(duration_s * 1000))


def trigger_fired(transcript: str, transcript_format: TranscriptFormat, name: str) -> bool:
    """Whether the agent invoked the subject ``name`` (see the module docstring)."""
    if transcript_format == "text":
        return any(name in _selection_names(line) for line in transcript.splitlines())
    for event in _events(transcript):
        if event.get("type") == "result" and name in _selection_names(event.get("result")):
            return True
        for block in _blocks(event, "assistant"):
            if block.get("type") == "text" and name in _selection_names(block.get("text")):
                return True
            if block.get("type") == "tool_use" and _tool_invokes(block, name):
                return True
    return False


# ---- reading transcripts ---------------------------------------------------------------------


def _read_transcript(transcript: str, transcript_format: TranscriptFormat) -> _Transcript:
    if transcript_format == "text":
        typed = tuple(match.group(1) for match in _TEXT_COMMAND.finditer(transcript))
        return _Transcript(transcript.casefold(), typed)
    if transcript_format != "stream-json":
        raise ValueError(
            f"expected transcript format 'stream-json' or 'text', found {transcript_format!r}"
        )
    words: list[str] = []
    commands: list[str] = []
    seen_ids: set[str] = set()
    for event in _events(transcript):
        if event.get("type") == "result" and isinstance(event.get("result"), str):
            words.append(event["result"])
        for block in _blocks(event, "assistant"):
            if block.get("type") == "text" and isinstance(block.get("text"), str):
                words.append(block["text"])
            elif block.get("type") == "tool_use":
                call_id = block.get("id")
                if isinstance(call_id, str) and call_id:
                    if call_id in seen_ids:
                        continue
                    seen_ids.add(call_id)
                tool_input = block.get("input")
                words.append(json.dumps(tool_input, ensure_ascii=False))
                words.extend(_string_leaves(tool_input))
                command = tool_input.get("command") if isinstance(tool_input, dict) else None
                if block.get("name") == "Bash" and isinstance(command, str):
                    commands.append(command)
    return _Transcript("\n".join(words).casefold(), tuple(commands))


def _events(transcript: str) -> Iterator[dict[str, Any]]:
    for line in jsonl_lines(transcript):
        stripped = line.strip().lstrip("\ufeff")
        if not stripped.startswith("{"):
            continue
        try:
            # NaN and Infinity are not JSON; read them as text so the line is not lost.
            value = json.loads(stripped, parse_constant=str)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict):
            yield value


def _blocks(event: dict[str, Any], event_type: str) -> Iterator[dict[str, Any]]:
    if event.get("type") != event_type:
        return
    message = event.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list):
        yield from (block for block in content if isinstance(block, dict))


def _string_leaves(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _string_leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from _string_leaves(item)


def _tool_invokes(block: dict[str, Any], name: str) -> bool:
    tool_input = block.get("input")
    if not isinstance(tool_input, dict):
        return False
    if block.get("name") == "Skill":
        invoked = tool_input.get("skill", tool_input.get("command"))
        return isinstance(invoked, str) and invoked.strip().split(":")[-1] == name
    if block.get("name") == "Read":
        path = tool_input.get("file_path")
        parts = path.replace("\\", "/").split("/") if isinstance(path, str) else []
        return parts[-2:] == [name, "SKILL.md"]
    return False


def _selection_names(text: Any) -> list[str]:
    """The names of a ``{"selected": [...]}`` answer in ``text``, else none."""
    if not isinstance(text, str):
        return []
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        return []
    try:
        answer = json.loads(text[start : end + 1])
    except (ValueError, RecursionError):
        return []
    selected = answer.get("selected") if isinstance(answer, dict) else None
    if not isinstance(selected, list):
        return []
    return [item.strip() for item in selected if isinstance(item, str)]


# ---- evaluating one check --------------------------------------------------------------------


def _evaluate(check: Check, view: _Transcript, sandbox: Path, timeout_s: float) -> CheckOutcome:
    if check.kind == "command_succeeds":
        passed, detail, ran = _run_command(check.param, sandbox, timeout_s)
        return CheckOutcome(check.kind, check.param, passed, detail, check.line, not ran)
    passed, detail = _judge_check(check, view, sandbox)
    return CheckOutcome(check.kind, check.param, passed, detail, check.line)


def _judge_check(check: Check, view: _Transcript, sandbox: Path) -> tuple[bool, str]:
    kind, param = check.kind, check.param
    if kind in ("transcript_mentions", "transcript_omits"):
        found = param.casefold() in view.words
        shown = f"{'mentions' if found else 'does not mention'} {_shown(param)!r}"
        return found == (kind == "transcript_mentions"), f"the transcript {shown}"
    if kind in ("command_matching", "no_command_matching"):
        if check.pattern is None:
            return False, f"'{kind}' reached evaluation without a compiled pattern"
        return _match_commands(kind, check.pattern, view.commands)
    if kind in ("file_exists", "file_absent"):
        return _check_path(kind, param, sandbox)
    return False, f"unknown check kind '{kind}'"


def _match_commands(
    kind: str, pattern: re.Pattern[str], commands: Sequence[str]
) -> tuple[bool, str]:
    hit = next((command for command in commands if pattern.search(command)), None)
    ran = f"{len(commands)} command{'' if len(commands) == 1 else 's'} ran"
    if hit is None:
        return kind == "no_command_matching", f"no command matched /{pattern.pattern}/ ({ran})"
    return kind == "command_matching", f"/{pattern.pattern}/ matched {_shown(hit)!r} ({ran})"


def _check_path(kind: str, param: str, sandbox: Path) -> tuple[bool, str]:
    root = sandbox.resolve()
    target = sandbox / param.replace("\\", "/")
    try:
        resolved = target.resolve()
    except (OSError, RuntimeError) as error:  # RuntimeError: a symlink loop on older Pythons
        return False, f"cannot resolve '{param}' in the sandbox: {error}"
    if not resolved.is_relative_to(root):
        return False, f"'{param}' resolves to {resolved}, outside the sandbox {root}"
    exists = resolved.exists()
    dangling = not exists and target.is_symlink()
    found = "exists" if exists else "is a dangling symlink" if dangling else "is missing"
    # A dangling link is no file, yet something is at the path: neither kind passes.
    passed = exists if kind == "file_exists" else not (exists or dangling)
    return passed, f"'{param}' {found}"


def _run_command(command: str, sandbox: Path, timeout_s: float) -> tuple[bool, str, bool]:
    """``(passed, detail, ran)``: ``ran`` is False when the command itself could not be run."""
    if not sandbox.is_dir():
        return False, f"the sandbox {sandbox} is not a directory", False
    with tempfile.TemporaryFile() as output:
        try:
            proc = subprocess.Popen(
                ["bash", "-c", command],
                cwd=sandbox,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except (OSError, ValueError) as error:  # ValueError: the command holds a NUL
            return False, f"cannot start bash: {getattr(error, 'strerror', None) or error}", False
        leftovers.note_group(proc.pid)
        try:
            code = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            signal_group(proc.pid)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=_REAP_S)
            return False, f"timed out after {timeout_s:g}s (its process group was killed)", True
        finally:
            # Background helpers the command left must not outlive the check.
            signal_group(proc.pid)
            leftovers.note_ended(proc.pid)
        tail = _redacted_tail(output)
    said = f": {tail}" if tail else ""
    if code == 0:
        return True, "exit 0", True
    if code < 0:
        return False, f"killed by signal {-code}{said}", True
    return False, f"exit {code}{said}", code not in _SHELL_COULD_NOT_RUN


def _redacted_tail(output: IO[bytes]) -> str:
    """The output's last characters, redacted line by line from its start before the cut: a
    private key block that begins earlier is still removed."""
    kept: deque[str] = deque()
    size = 0

    def keep(line: str) -> None:
        nonlocal size
        kept.append(line)
        size += len(line) + 1
        while len(kept) > 1 and size - len(kept[0]) - 1 >= _OUTPUT_TAIL_CHARS:
            size -= len(kept.popleft()) + 1

    sink = redacting_sink(keep)
    output.seek(0)
    for raw in iter(lambda: output.readline(_LINE_READ_BYTES), b""):
        sink(raw.decode("utf-8", "replace").rstrip("\r\n"))
    return "\n".join(kept)[-_OUTPUT_TAIL_CHARS:].strip()


def _shown(text: str) -> str:
    one_line = " ".join(redact_text(text).split())
    return one_line if len(one_line) <= _SHOWN_CHARS else one_line[: _SHOWN_CHARS - 1] + "…"
