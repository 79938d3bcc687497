"""The Run Receipt v0 members a compare's ``run.jsonl`` carries beside its own.

``run.jsonl`` is a Run Receipt v0 chain, so its ``run_start`` and ``run_end`` hold what the
schema requires of them (``receipt verify --schema`` checks it; ``receipt show`` prints them):
the goal (the compare and its subject), the command line, the subject's commit and branch and
the tool; then how the run stopped, whether it verified (a PASS verdict on a run that finished)
and its totals (arm runs as attempts, the tokens and cost the agents reported). Compare's own
members (``content_digest``, ``plan``, ``verdict``, ...) stay as they are beside them.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from trialrun import __version__
from trialrun.base.gitinfo import git_state
from trialrun.compare.records import ArmSampleResult

__all__ = ["end_members", "start_members"]


def start_members(name: str, subject: str | Path, command_line: str) -> dict[str, Any]:
    """``goal``, ``verifyCommand``, ``repoHead``, ``branch`` and ``tool`` for ``run_start``."""
    head, branch = git_state(Path(subject))
    return {
        "goal": f"compare {name}",
        "verifyCommand": command_line,
        "repoHead": head,
        "branch": branch,
        "tool": {"name": "trialrun", "version": __version__},
    }


def end_members(
    *, interrupted: bool, verified: bool, samples: Iterable[ArmSampleResult]
) -> dict[str, Any]:
    """``stopReason``, ``verified`` and ``totals`` for ``run_end``."""
    runs = tokens = 0
    cost = 0.0
    for sample in samples:
        runs += sample.attempts
        efficiency = sample.efficiency
        if efficiency is not None:
            # A session's efficiency sits on one of its samples only: counted once.
            tokens += int(efficiency.tokens or 0)
            cost += efficiency.cost_usd or 0.0
    return {
        "stopReason": "interrupted" if interrupted else "completed",
        "verified": verified and not interrupted,
        "totals": {
            "attempts": runs,
            "totalTokens": max(tokens, 0),
            "costUsd": max(cost, 0.0),
            "filesChanged": 0,
        },
    }
