"""The commands a failed case names for its fix: record it again, or update its recordings."""

from __future__ import annotations

import shlex

from trialrun.base.results import AgentRun
from trialrun.config import Case, Suite
from trialrun.config.paths import display_path

__all__ = ["UPDATE_HINT", "name_update_command", "rerecord_command", "update_command"]

UPDATE_HINT = "\nTo update just this case: "
"""How a replay miss names the command that updates its case (the tool call's miss says it
itself; an MCP, model or HTTP miss gets it here)."""


def rerecord_command(suite: Suite, case: Case) -> str:
    """The command that records just ``case`` again, as a person would type it here."""
    return _case_command(suite, case, "record")


def update_command(suite: Suite, case: Case) -> str:
    """The command that replays ``case`` and records again only the calls that miss."""
    return _case_command(suite, case, "update")


def _case_command(suite: Suite, case: Case, mode: str) -> str:
    argv = ["trialrun", "run", display_path(suite.suite_dir), "--mode", mode]
    return shlex.join([*argv, "--case", case.config.id])


def name_update_command(run: AgentRun, command: str) -> None:
    """Add ``command`` to a replay miss that does not name it yet, in the failure and run.jsonl."""
    failure = run.failure
    if failure is None or failure.kind != "cassette_mismatch" or UPDATE_HINT in failure.message:
        return
    said = failure.message
    failure.message = said + UPDATE_HINT + command
    for event in reversed(run.events):  # run.jsonl says what the summary says
        if event.get("type") == "agent_error" and event.get("message") == said:
            event["message"] = failure.message
            break
