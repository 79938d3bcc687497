"""What a compare tells whoever watches it (the progress line of ``trialrun compare``).

The engine calls these as work starts and ends; nothing it decides depends on them. Arm events
come from the event loop in the order arms really start and finish (not plan order), row events
from the judge threads, so an observer that keeps state guards it with a lock. Arguments are
plain values: watchers (``trialrun.report.progress``) live below this layer and import nothing
from it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

__all__ = ["CompareObserver", "NullObserver"]


class CompareObserver(Protocol):
    def arms_planned(self, units: Sequence[tuple[str, int]], arms: Sequence[str]) -> None:
        """The (case, rep) units about to run, each once per arm in ``arms``."""

    def arm_started(self, case: str, rep: int, arm: str) -> None:
        """An arm got its ``-j`` slot: its sandbox and setup come first."""

    def agent_started(self, case: str, rep: int, arm: str) -> None:
        """An arm's agent command starts (it got an ``agent.max_concurrent`` slot); a retry
        starts it again."""

    def arm_finished(self, case: str, rep: int, arm: str, status: str, duration_s: float) -> None:
        """An arm ended: ``ok``, ``failed`` or ``timeout``; ``duration_s`` of its agent."""

    def phase(self, name: str) -> None:
        """The arms are done and the compare moved on (``triggers``, ``scoring``)."""

    def rows_planned(self, rows: Sequence[tuple[str, int, str]]) -> None:
        """The (case, rep, opponent) rows about to be decided."""

    def row_decided(
        self, case: str, rep: int, opponent: str, outcome: str, decided_by: str
    ) -> None:
        """One row decided: ``win``, ``loss`` or ``tie`` for the candidate, and by what rule."""


class NullObserver:
    """Watches nothing (``--quiet``, the API, tests)."""

    def arms_planned(self, units: Sequence[tuple[str, int]], arms: Sequence[str]) -> None:
        pass

    def arm_started(self, case: str, rep: int, arm: str) -> None:
        pass

    def agent_started(self, case: str, rep: int, arm: str) -> None:
        pass

    def arm_finished(self, case: str, rep: int, arm: str, status: str, duration_s: float) -> None:
        pass

    def phase(self, name: str) -> None:
        pass

    def rows_planned(self, rows: Sequence[tuple[str, int, str]]) -> None:
        pass

    def row_decided(
        self, case: str, rep: int, opponent: str, outcome: str, decided_by: str
    ) -> None:
        pass
