"""Progress of a long ``trialrun run`` or ``trialrun compare``: what the progress line says.

A tracker counts what finished and words two things: the live status line (polled by a terminal
display a few times a second) and one plain line per finished case or unit (written by the display
for logs, where a redrawn bar would be noise). Where the text goes is ``progress_display``'s
business; nothing here writes anywhere or imports rich.

Trackers are called from the event loop and, for compare rows, from judge threads: every method
takes the tracker's lock.

* run: a case is done as soon as its verdict is known (in the order cases finish, so with ``-j``
  a fast case does not wait for a slower one); the line counts passed, failed and errored
  (crashed) cases apart, elapsed time
  and the ETA.
* compare: the arms run first; a unit (case, rep) is done when all its arms ended, and the line
  names the arms whose agent runs now and counts those still in setup or waiting for an
  ``agent.max_concurrent`` slot. Rows are decided once the arms ran (the judge needs both
  transcripts), so W / L / T appear while they are scored.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from trialrun.base.visible import visible_name
from trialrun.base.words import counted

__all__ = ["CompareTracker", "Display", "RunTracker", "format_duration"]

Clock = Callable[[], float]
_RUNNING_SHOWN = 3
"""Running arms named on the live line; the rest are counted."""


class Display(Protocol):
    """Where a tracker's words go (``progress_display`` has the terminal, log and null ones)."""

    def changed(self) -> None:
        """Something moved: a terminal display redraws the status line."""

    def finished(self, line: str) -> None:
        """One case or unit finished: a log display writes ``line``."""


def format_duration(seconds: float) -> str:
    """``0:07``, ``12:30``, ``1:02:03``."""
    whole = max(0, round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def _timing(started: float, now: float, done: int, total: int, since: float | None = None) -> str:
    """``0:42 elapsed`` and, once something finished, the ETA at the pace since ``since``."""
    elapsed = now - started
    text = f"{format_duration(elapsed)} elapsed"
    if 0 < done < total:
        pace = (now - (started if since is None else since)) / done
        text += f" · ETA {format_duration(pace * (total - done))}"
    return text


class RunTracker:
    """``trialrun run``: cases done of the suite's, passed and failed so far."""

    def __init__(self, display: Display, total: int, clock: Clock = time.monotonic) -> None:
        self._display = display
        self._total = total
        self._clock = clock
        self._started = clock()
        self._lock = threading.Lock()
        self._passed = 0
        self._failed = 0
        self._errors = 0
        self._flaky = 0

    def start(self) -> None:
        """Show the line before the first case ends (cases can take minutes)."""
        self._display.changed()

    def case_done(self, case_id: str, status: str) -> None:
        """A case's verdict: ``pass``, ``fail``, ``error`` (a crash) or ``flaky`` (``--repeat``,
        ``--retries``: it both passed and failed); each counted apart."""
        with self._lock:
            if status == "pass":
                self._passed += 1
            elif status == "error":
                self._errors += 1
            elif status == "flaky":
                self._flaky += 1
            else:
                self._failed += 1
            done = self._passed + self._failed + self._errors + self._flaky
            line = (
                f"[{done}/{self._total}] {status:<5} {visible_name(case_id)} · {self._counts(done)}"
            )
        self._display.finished(line)
        self._display.changed()

    def status_line(self) -> str:
        with self._lock:
            done = self._passed + self._failed + self._errors + self._flaky
            return f"run: {done}/{self._total} cases · {self._counts(done)}"

    def _counts(self, done: int) -> str:
        timing = _timing(self._started, self._clock(), done, self._total)
        errors = counted(self._errors, "error")
        flaky = f", {self._flaky} flaky" if self._flaky else ""
        return f"{self._passed} passed, {self._failed} failed, {errors}{flaky} · {timing}"


class CompareTracker:
    """``trialrun compare``: arms and units done, the arms running, then W / L / T per row.

    It is a ``trialrun.compare.observer.CompareObserver`` by shape.
    """

    def __init__(self, display: Display, clock: Clock = time.monotonic) -> None:
        self._display = display
        self._clock = clock
        self._started = clock()
        self._lock = threading.Lock()
        self._phase = "arms"
        self._phase_started = self._started
        self._arms_per_unit = 1
        self._units_total = 0
        self._arms_done = 0
        self._left: dict[tuple[str, int], int] = {}
        self._units_done = 0
        self._ended: dict[tuple[str, int], list[str]] = {}
        self._preparing: set[tuple[str, int, str]] = set()
        self._running: dict[tuple[str, int, str], None] = {}  # insertion-ordered set
        self._rows_total = 0
        self._rows_left: dict[tuple[str, int], int] = {}
        self._rows_of: dict[tuple[str, int], list[str]] = {}
        self._rows_done = 0
        self._scored_units = 0
        self._tally = {"win": 0, "loss": 0, "tie": 0}

    # -- the observer -----------------------------------------------------------------------

    def arms_planned(self, units: Sequence[tuple[str, int]], arms: Sequence[str]) -> None:
        with self._lock:
            self._arms_per_unit = max(1, len(arms))
            self._units_total = len(units)
            self._left = {unit: len(arms) for unit in units}
        self._display.changed()

    def arm_started(self, case: str, rep: int, arm: str) -> None:
        with self._lock:
            self._preparing.add((case, rep, arm))
        self._display.changed()

    def agent_started(self, case: str, rep: int, arm: str) -> None:
        with self._lock:
            self._preparing.discard((case, rep, arm))
            self._running[(case, rep, arm)] = None
        self._display.changed()

    def arm_finished(self, case: str, rep: int, arm: str, status: str, duration_s: float) -> None:
        line = None
        with self._lock:
            self._running.pop((case, rep, arm), None)
            self._preparing.discard((case, rep, arm))
            self._arms_done += 1
            unit = (case, rep)
            self._ended.setdefault(unit, []).append(f"{arm} {status} {duration_s:.1f}s")
            self._left[unit] = self._left.get(unit, 1) - 1
            if self._left[unit] <= 0:
                self._units_done += 1
                arms = ", ".join(self._ended.pop(unit))
                where = f"[unit {self._units_done}/{self._units_total}] {visible_name(case)}"
                line = f"{where} rep {rep}: {arms}"
                line += f" · {self._arm_counts()}"
        if line is not None:
            self._display.finished(line)
        self._display.changed()

    def phase(self, name: str) -> None:
        with self._lock:
            self._phase = name
            self._phase_started = self._clock()
        self._display.changed()

    def rows_planned(self, rows: Sequence[tuple[str, int, str]]) -> None:
        with self._lock:
            self._rows_total = len(rows)
            for case, rep, _ in rows:
                self._rows_left[(case, rep)] = self._rows_left.get((case, rep), 0) + 1
        self._display.changed()

    def row_decided(
        self, case: str, rep: int, opponent: str, outcome: str, decided_by: str
    ) -> None:
        line = None
        with self._lock:
            self._rows_done += 1
            if outcome in self._tally:
                self._tally[outcome] += 1
            unit = (case, rep)
            self._rows_of.setdefault(unit, []).append(f"vs {opponent} {outcome} ({decided_by})")
            self._rows_left[unit] = self._rows_left.get(unit, 1) - 1
            if self._rows_left[unit] <= 0:
                self._scored_units += 1
                rows = ", ".join(self._rows_of.pop(unit))
                where = f"[scored {self._scored_units}/{len(self._rows_left)}] {visible_name(case)}"
                line = f"{where} rep {rep}: {rows} · {self._row_counts()}"
        if line is not None:
            self._display.finished(line)
        self._display.changed()

    # -- the words --------------------------------------------------------------------------

    def status_line(self) -> str:
        with self._lock:
            if self._phase == "arms":
                line = f"compare: units {self._units_done}/{self._units_total} · "
                line += self._arm_counts()
                running = self._running_text()
                line += f" · running: {running}" if running else ""
                waiting = len(self._preparing)
                return line + (f" · {waiting} in setup or waiting for a slot" if waiting else "")
            if self._phase == "triggers":
                elapsed = format_duration(self._clock() - self._started)
                return f"compare: trigger eval · {elapsed} elapsed"
            return f"compare: scoring · {self._row_counts()}"

    def _arm_counts(self) -> str:
        total = self._units_total * self._arms_per_unit
        timing = _timing(self._started, self._clock(), self._arms_done, total)
        return f"arms {self._arms_done}/{total} · {timing}"

    def _row_counts(self) -> str:
        tally = self._tally
        now, done, total = self._clock(), self._rows_done, self._rows_total
        timing = _timing(self._started, now, done, total, since=self._phase_started)
        return (
            f"rows {self._rows_done}/{self._rows_total} · "
            f"W {tally['win']} L {tally['loss']} T {tally['tie']} · {timing}"
        )

    def _running_text(self) -> str:
        running = [f"{visible_name(case)}#{rep} {arm}" for case, rep, arm in self._running]
        shown = ", ".join(running[:_RUNNING_SHOWN])
        more = len(running) - _RUNNING_SHOWN
        return shown + (f" (+{more} more)" if more > 0 else "")
