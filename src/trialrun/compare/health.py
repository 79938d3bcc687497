"""Did the user's commands work? How often each was asked in a compare run and how often it failed.

A compare run asks four kinds of user-supplied command: the agent (``agent.command``, once per
arm run, after the case's ``setup``), the ``command_succeeds`` checks (once per arm run), the
judge (``judge.command`` and its escalation, once per judged row) and the trigger probes
(``triggers.command``, or the agent again). Each failure already has a safe local meaning: a dead
arm is a hole, a failed judge call a tie, an errored probe counts in no cell, a check command
that could not run (bash exit 126 / 127) fails its arm. Summed over a
run, though, a command that failed on *every* call is not noise but a broken setup (a misspelt
path, an unexpanded placeholder, a missing API key), and the verdict it leaves (ties everywhere,
so NEUTRAL) measures nothing. The rules, the same for every command:

* **some calls failed**: the count is shown next to the verdict (the judge's ties otherwise hide
  in the tie count); a dead arm or errored probe is already named as a hole or an ERROR line.
* **more than half failed**: that line becomes a ``warning:`` and is repeated on stderr.
* **every call failed** (at least one asked, none answered), or for checks, one check could not
  run in any arm (it then fails every arm alike, a tie that looks like a measurement):
  ``BROKEN SETUP:`` under the verdict
  and on stderr, named in the receipt's ``broken_setup`` and in ``run.jsonl``'s ``run_end``, and
  ``--gate`` exits 1 whatever the verdict.

A judge *answered* when both orderings gave a parseable verdict (``judge`` or ``judge-split``):
a split is the judge working, not failing. A refusal is a failure here: a judge that refuses every
call is as useless as one that cannot start.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, replace

from trialrun.compare.records import ArmSampleResult, CompareRow, TriggerOutcome

__all__ = ["CommandHealth", "command_health"]

_JUDGE_ANSWERED = ("judge", "judge-split")
_COMMAND_CHECK = "command_succeeds: "


@dataclass(frozen=True)
class CommandHealth:
    """One kind of user command over one run: calls asked, calls failed and why."""

    command: str
    """``agent``, ``checks``, ``judge`` or ``triggers``: the key in ``command_health``."""
    asked: int
    failed: int
    causes: tuple[tuple[str, int], ...]
    """How the failed calls ended, by cause, sorted."""
    first_error: str | None
    """The first failure's message, for the report and stderr (it may name local paths, so the
    receipt keeps only the counts)."""
    never_ran: tuple[str, ...] = ()
    """For ``checks``: each ``case: check`` that could not run in any arm it was evaluated in."""

    @property
    def broken(self) -> bool:
        return (self.asked > 0 and self.failed == self.asked) or bool(self.never_ran)

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
            if self.never_ran:
                counts = f"{'; '.join(self.never_ran)}; {counts}"
            return f"BROKEN SETUP: {_BROKEN[self.command]} ({counts}){first}"
        prefix = "warning: " if self.mostly_failed else ""
        counts = f"{self.failed} of {self.asked} {_CALLS[self.command]} failed ({causes})"
        return f"{prefix}{self.command}: {counts}; {_MEANING[self.command]}{first}"


_BROKEN = {
    "judge": "the judge failed on every call it was asked, so every judged row is a tie and the "
    "verdict measures nothing",
    "agent": "every arm run died (its setup or agent command failed), so no row was scored and "
    "the verdict measures nothing",
    "triggers": "every trigger probe errored, so recall and precision measure nothing",
    "checks": "a command_succeeds check could not run in any arm, so it fails every arm alike "
    "and decides nothing",
}
_CALLS = {"judge": "calls", "agent": "arm runs", "triggers": "probes", "checks": "check runs"}
_MEANING = {
    "judge": "each failed call is a tie",
    "agent": "each dead arm is a hole",
    "triggers": "each errored probe counts in no cell",
    "checks": "each check that could not run fails its arm",
}


def command_health(
    rows: Sequence[CompareRow],
    samples: Sequence[ArmSampleResult],
    triggers: TriggerOutcome | None,
    session_cases: Collection[str] = (),
) -> tuple[CommandHealth, ...]:
    """The health of every kind of command the run asked at least once, agent first."""
    found = [
        _agent(samples, session_cases),
        _checks(samples),
        _judge(rows),
        _triggers(triggers),
    ]
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


def _checks(samples: Sequence[ArmSampleResult]) -> CommandHealth:
    runs: Counter[tuple[str, str]] = Counter()
    failed: list[tuple[str, str | None]] = []
    unrunnable: Counter[tuple[str, str]] = Counter()
    for sample in samples:
        blocked = dict(sample.unrunnable)
        for name, _ in sample.checks:
            if not name.startswith(_COMMAND_CHECK):
                continue
            runs[sample.case, name] += 1
            if name in blocked:
                unrunnable[sample.case, name] += 1
                failed.append(("could-not-run", blocked[name]))
    never_ran = tuple(
        f"{case}: {name}" for (case, name), count in unrunnable.items() if count == runs[case, name]
    )
    health = _health("checks", sum(runs.values()), failed)
    return replace(health, never_ran=never_ran)


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
