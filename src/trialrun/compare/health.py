"""Did the user's commands work? How often each was asked in a compare run and how often it failed.

A compare run asks three kinds of user-supplied command: the agent (``agent.command``, once per
arm run), the judge (``judge.command`` and its escalation, once per judged row) and the trigger
probes (``triggers.command``, or the agent again). Each failure already has a safe local meaning:
a dead arm is a hole, a failed judge call a tie, an errored probe counts in no cell. Summed over a
run, though, a command that failed on *every* call is not noise but a broken setup (a misspelt
path, an unexpanded placeholder, a missing API key), and the verdict it leaves (ties everywhere,
so NEUTRAL) measures nothing. The rules, the same for every command:

* **some calls failed**: the count is shown next to the verdict (the judge's ties otherwise hide
  in the tie count); a dead arm or errored probe is already named as a hole or an ERROR line.
* **more than half failed**: that line becomes a ``warning:`` and is repeated on stderr.
* **every call failed** (at least one asked, none answered): ``BROKEN SETUP:`` under the verdict
  and on stderr, named in the receipt's ``broken_setup`` and in ``run.jsonl``'s ``run_end``, and
  ``--gate`` exits 1 whatever the verdict.

A judge *answered* when both orderings gave a parseable verdict (``judge`` or ``judge-split``):
a split is the judge working, not failing. A refusal is a failure here: a judge that refuses every
call is as useless as one that cannot start.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trialrun.compare.outcome import ArmSampleResult, CompareRow, TriggerOutcome

__all__ = ["CommandHealth", "command_health"]

_JUDGE_ANSWERED = ("judge", "judge-split")


@dataclass(frozen=True)
class CommandHealth:
    """One kind of user command over one run: calls asked, calls failed and why."""

    command: str
    """``agent``, ``judge`` or ``triggers``: the key in the receipt's ``command_health``."""
    asked: int
    failed: int
    causes: tuple[tuple[str, int], ...]
    """How the failed calls ended, by cause, sorted."""
    first_error: str | None
    """The first failure's message, for the report and stderr (it may name local paths, so the
    receipt keeps only the counts)."""

    @property
    def broken(self) -> bool:
        return self.asked > 0 and self.failed == self.asked

    @property
    def mostly_failed(self) -> bool:
        return 2 * self.failed > self.asked

    def message(self) -> str | None:
        """The line shown under the verdict, or None when every call was answered."""
        if not self.failed:
            return None
        causes = ", ".join(f"{count} {cause}" for cause, count in self.causes)
        first = f"; first error: {self.first_error}" if self.first_error else ""
        if self.broken:
            counts = f"{self.failed} of {self.asked}: {causes}"
            return f"BROKEN SETUP: {_BROKEN[self.command]} ({counts}){first}"
        prefix = "warning: " if self.mostly_failed else ""
        return (
            f"{prefix}{self.command}: {self.failed} of {self.asked} calls failed ({causes}); "
            f"{_MEANING[self.command]}{first}"
        )


_BROKEN = {
    "judge": "the judge failed on every call it was asked, so every judged row is a tie and the "
    "verdict measures nothing",
    "agent": "every agent run died, so no row was scored and the verdict measures nothing",
    "triggers": "every trigger probe errored, so recall and precision measure nothing",
}
_MEANING = {
    "judge": "each failed call is a tie",
    "agent": "each dead arm is a hole",
    "triggers": "each errored probe counts in no cell",
}


def command_health(
    rows: Sequence[CompareRow],
    samples: Sequence[ArmSampleResult],
    triggers: TriggerOutcome | None,
    session_cases: Collection[str] = (),
) -> tuple[CommandHealth, ...]:
    """The health of every kind of command the run asked at least once, agent first."""
    found = [_agent(samples, session_cases), _judge(rows), _triggers(triggers)]
    return tuple(health for health in found if health.asked)


def _health(command: str, asked: int, failures: Iterable[tuple[str, str | None]]) -> CommandHealth:
    failed = list(failures)
    causes = Counter(cause for cause, _ in failed)
    first = next((error for _, error in failed if error), None)
    return CommandHealth(command, asked, len(failed), tuple(sorted(causes.items())), first)


def _agent(samples: Sequence[ArmSampleResult], session_cases: Collection[str]) -> CommandHealth:
    # A session's one run gives a sample per sub-case: count each arm run once.
    runs = {
        (s.case in session_cases, "" if s.case in session_cases else s.case, s.rep, s.arm): s
        for s in samples
    }
    dead = [(s.status, s.error) for s in runs.values() if s.died]
    return _health("agent", len(runs), dead)


def _judge(rows: Sequence[CompareRow]) -> CommandHealth:
    judged = [row.row.judge for row in rows if row.row.judge is not None]
    failed = [
        (decision.cause, decision.errors[0] if decision.errors else decision.reason)
        for decision in judged
        if decision.cause not in _JUDGE_ANSWERED
    ]
    return _health("judge", len(judged), failed)


def _triggers(triggers: TriggerOutcome | None) -> CommandHealth:
    probes = triggers.probes if triggers is not None else ()
    errored = [("errored", probe.error) for probe in probes if probe.fired is None]
    return _health("triggers", len(probes), errored)
