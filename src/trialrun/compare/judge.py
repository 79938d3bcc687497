"""The pairwise judge of ``trialrun compare``: one row's tie-break, asked in both orders.

Protocol (issue 6): the judge is the user's own command (an argv list, no shell). It reads one
JSON object ``{"task", "rubric", "a", "b"}`` on stdin, where ``a`` and ``b`` are the last
``TRANSCRIPT_TAIL_CHARS`` characters of two transcripts, and prints
``{"winner": "A" | "B" | "tie", "reason": "..."}`` on stdout. It never learns which arm is which.

``ask_both_orders`` asks with the candidate as A, then swapped. Only two agreeing answers decide;
everything else is a tie whose cause is kept (``JudgeDecision.cause``) so the receipt can count
splits, refusals, unparseable answers, timeouts and errors per comparison instead of hiding a
flaky judge inside the tie count (reference §1.10 item 6, R8).

Decisions:

* **Redaction.** The transcripts are passed through ``trialrun.base.redact.redact_text``
  *before* the tail is cut (cutting first could split a key into an unrecognisable, still-secret
  half). The judge is the user's own command, but it usually forwards its input to a hosted
  model, and a credential the agent printed (an ``env`` dump) has no bearing on which answer is
  better. The task and rubric are authored eval assets and are sent as written.
* **Retries.** One ordering walks the chain ``[command, command, escalate_command]``: an
  unparseable answer, a non-zero exit or a command that cannot start moves to the next link. A
  refusal ends the chain at once (asking again rarely helps and costs a model call), and so does
  a timeout (a hung judge would otherwise cost three timeouts per ordering).
* **Short cut.** When the first ordering gives no answer, the second is not asked: the row is a
  tie whatever it would say.
* **Process.** Each ask runs in its own session so a timeout kills the whole process group
  (wrappers that spawn a model client die with it). The environment is inherited: the judge
  needs its own API keys.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from trialrun.base.linesplit import jsonl_lines
from trialrun.base.quoting import shortened
from trialrun.base.redact import redact_text
from trialrun.compare.oneshot import CommandTimeout, ask_command
from trialrun.errors import JudgeError

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "TRANSCRIPT_TAIL_CHARS",
    "JudgeAnswer",
    "JudgeCause",
    "JudgeDecision",
    "JudgeWinner",
    "ask_both_orders",
    "judge_payload",
    "parse_answer",
]

TRANSCRIPT_TAIL_CHARS = 6000
DEFAULT_TIMEOUT_S = 120.0
RAW_ANSWER_LIMIT = 2000
"""Characters of each raw answer kept for the receipt's audit trail."""
REASON_LIMIT = 1000

JudgeWinner = Literal["candidate", "opponent", "tie"]
JudgeCause = Literal[
    "judge", "judge-split", "judge-unparseable", "judge-refused", "judge-timeout", "judge-error"
]
"""How the judge step ended; it is the row's ``decided_by``. Every cause but ``judge`` is a tie."""

_REFUSAL = re.compile(
    r"usage policy|policy violation|can'?t help|cannot help|unable to assist", re.I
)
_VERDICTS = ("A", "B", "tie")


@dataclass(frozen=True)
class JudgeAnswer:
    """One parsed answer, in the judge's own labels."""

    winner: Literal["A", "B", "tie"]
    reason: str


@dataclass(frozen=True)
class JudgeDecision:
    """The outcome of both orderings, from the candidate's side."""

    winner: JudgeWinner
    reason: str
    agreed: bool
    """Both orderings answered and named the same arm (or both said tie)."""
    split: bool
    """Both orderings answered but disagreed."""
    errors: tuple[str, ...]
    """One line per failed attempt: which ordering, which attempt, what went wrong."""
    raw_answers: tuple[str, ...]
    """Every attempt's stdout in the order asked (each cut to ``RAW_ANSWER_LIMIT``)."""
    cause: JudgeCause
    escalated: bool = False
    """Whether ``escalate_command`` was run for either ordering."""


class _AskFailed(Exception):
    def __init__(self, cause: JudgeCause, message: str, *, final: bool) -> None:
        super().__init__(message)
        self.cause = cause
        self.final = final
        """No further link of the chain is worth trying (refusal, timeout)."""


def judge_payload(task: str, rubric: str, a: str, b: str) -> str:
    """The stdin document of one ask: redacted transcript tails labelled A and B."""
    document = {"task": task, "rubric": rubric, "a": _tail(a), "b": _tail(b)}
    return json.dumps(document, ensure_ascii=False)


def _tail(transcript: str) -> str:
    return redact_text(transcript)[-TRANSCRIPT_TAIL_CHARS:]


def parse_answer(stdout: str) -> JudgeAnswer:
    """The judge's answer: the whole stdout as JSON, else its last line that is a JSON object.

    Raises ``ValueError`` saying what was expected and what was found.
    """
    text = stdout.strip()
    if not text:
        raise ValueError('expected {"winner": "A"|"B"|"tie", "reason": ...}, found empty output')
    document = _load_object(text)
    if document is None:
        for line in reversed(jsonl_lines(text)):
            document = _load_object(line.strip())
            if document is not None:
                break
    if document is None:
        raise ValueError(f"expected a JSON object on stdout, found {_preview(text)!r}")
    winner = document.get("winner")
    if winner not in _VERDICTS:
        raise ValueError(f'expected "winner" to be "A", "B" or "tie", found {winner!r}')
    reason = document.get("reason", "")
    if not isinstance(reason, str):
        raise ValueError(f'expected "reason" to be a string, found {type(reason).__name__}')
    verdict: Literal["A", "B", "tie"] = "A" if winner == "A" else "B" if winner == "B" else "tie"
    return JudgeAnswer(winner=verdict, reason=reason[:REASON_LIMIT])


def _load_object(text: str) -> dict[str, object] | None:
    if not text.startswith("{"):
        return None
    try:
        loaded = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: nested past Python's stack
        return None
    return loaded if isinstance(loaded, dict) else None


def _preview(text: str, limit: int = 120) -> str:
    return shortened(text, limit)


def ask_both_orders(
    command: Sequence[str],
    *,
    task: str,
    rubric: str,
    candidate_transcript: str,
    opponent_transcript: str,
    escalate_command: Sequence[str] | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    retry_backoff_s: float = 0.5,
) -> JudgeDecision:
    """Ask ``command`` with the candidate as A, then as B; return the combined decision.

    Never raises for anything the judge does; a judge failure is a tie with its cause. Raises
    ``JudgeError`` only for an empty ``command`` (a configuration mistake, not a judge answer).
    """
    if not command:
        raise JudgeError("judge command is empty: expected an argv list such as ['my-judge']")
    chain = [list(command), list(command)]
    if escalate_command:
        chain.append(list(escalate_command))
    asker = _Asker(chain, timeout_s=timeout_s, backoff_s=retry_backoff_s)
    first = asker.ask(
        "candidate as A", judge_payload(task, rubric, candidate_transcript, opponent_transcript)
    )
    if isinstance(first, _AskFailed):
        return asker.failed(first)
    second = asker.ask(
        "candidate as B", judge_payload(task, rubric, opponent_transcript, candidate_transcript)
    )
    if isinstance(second, _AskFailed):
        return asker.failed(second)
    in_first = _as_arm(first.winner, candidate_label="A")
    in_second = _as_arm(second.winner, candidate_label="B")
    if in_first != in_second:
        return asker.decision(
            winner="tie",
            reason=f"orderings disagree ({in_first} vs {in_second})",
            cause="judge-split",
            agreed=False,
            split=True,
        )
    return asker.decision(
        winner=in_first, reason=first.reason, cause="judge", agreed=True, split=False
    )


def _as_arm(verdict: str, *, candidate_label: str) -> JudgeWinner:
    if verdict == "tie":
        return "tie"
    return "candidate" if verdict == candidate_label else "opponent"


class _Asker:
    """Runs the attempt chain of each ordering and remembers what every attempt produced."""

    def __init__(self, chain: list[list[str]], *, timeout_s: float, backoff_s: float) -> None:
        self.chain = chain
        self.timeout_s = timeout_s
        self.backoff_s = backoff_s
        self.errors: list[str] = []
        self.raw_answers: list[str] = []
        self.escalated = False

    def ask(self, ordering: str, payload: str) -> JudgeAnswer | _AskFailed:
        failure = _AskFailed("judge-error", "no attempt was made", final=True)
        for attempt, argv in enumerate(self.chain, start=1):
            if attempt > 1:
                time.sleep(self.backoff_s * (attempt - 1))
            if attempt == 3:
                self.escalated = True
            try:
                return self._attempt(argv, payload)
            except _AskFailed as failed:
                failure = failed
                link = "escalation" if attempt == 3 else "judge"
                self.errors.append(f"{ordering}, attempt {attempt} ({link}): {failed}")
                if failed.final:
                    break
        return failure

    def _attempt(self, argv: list[str], payload: str) -> JudgeAnswer:
        stdout, stderr, exit_code = _run(argv, payload, self.timeout_s)
        self.raw_answers.append(stdout[:RAW_ANSWER_LIMIT])
        if exit_code != 0:
            if _REFUSAL.search(stdout):
                raise _AskFailed(
                    "judge-refused", f"refused: {_preview(stdout.strip())!r}", final=True
                )
            last = stderr.strip().splitlines()[-1:] or [""]
            raise _AskFailed(
                "judge-error",
                f"expected exit code 0, found {exit_code}: {_preview(last[0])}",
                final=False,
            )
        try:
            return parse_answer(stdout)
        except ValueError as error:
            if _REFUSAL.search(stdout):
                raise _AskFailed(
                    "judge-refused", f"refused: {_preview(stdout.strip())!r}", final=True
                ) from None
            raise _AskFailed("judge-unparseable", str(error), final=False) from None

    def failed(self, failure: _AskFailed) -> JudgeDecision:
        return self.decision(
            winner="tie", reason=str(failure), cause=failure.cause, agreed=False, split=False
        )

    def decision(
        self, *, winner: JudgeWinner, reason: str, cause: JudgeCause, agreed: bool, split: bool
    ) -> JudgeDecision:
        return JudgeDecision(
            winner=winner,
            reason=reason,
            agreed=agreed,
            split=split,
            errors=tuple(self.errors),
            raw_answers=tuple(self.raw_answers),
            cause=cause,
            escalated=self.escalated,
        )


def _run(argv: list[str], payload: str, timeout_s: float) -> tuple[str, str, int]:
    """Run one ask; return ``(stdout, stderr, exit code)`` or raise ``_AskFailed``."""
    try:
        answer = ask_command(argv, payload, timeout_s=timeout_s)
    except OSError as error:
        raise _AskFailed(
            "judge-error", f"cannot start {argv[0]!r}: {error.strerror or error}", final=False
        ) from None
    except CommandTimeout:
        raise _AskFailed(
            "judge-timeout",
            f"no answer within {timeout_s:g}s (its process group was killed)",
            final=True,
        ) from None
    return answer.stdout, answer.stderr, answer.returncode
