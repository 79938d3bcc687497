"""The commands of ``trialrun``: what ``trialrun --help`` lists, and where each one lives.

Both ways the top-level help is printed read this table: ``trialrun.cli.quick`` (no click) and
the click group of ``trialrun.cli.group``, which imports a command's module only when it runs.
"""

from __future__ import annotations

DESCRIPTION = "Deterministic CI and trustworthy evaluation for tool-using AI agents."

# name -> (module, attribute, one-line help shown by --help without importing the module). The
# help repeats the command's own short_help: tests/test_cli_quick.py checks the two agree.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "init": (
        "trialrun.cli.init_cmd",
        "init",
        "Write a demo suite, its agent, a baseline and a CI workflow.",
    ),
    "run": ("trialrun.cli.run_cmd", "run", "Run a suite: replay, record or live."),
    "compare": (
        "trialrun.cli.compare_cmd",
        "compare",
        "Compare a subject against the baseline and incumbent (`compare merge`: join shards).",
    ),
    "diff": ("trialrun.cli.diff_cmd", "diff", "Show what changed between two runs."),
    "gateway": (
        "trialrun.cli.gateway_cmd",
        "gateway",
        "Serve the model gateway: record and replay OpenAI and Anthropic calls.",
    ),
    "doctor": ("trialrun.cli.doctor_cmd", "doctor", "Check a suite's setup."),
    "publish": (
        "trialrun.cli.publish_cmd",
        "publish",
        "Publish a subject's bytes as a team version and attach its local receipts.",
    ),
    "scenario": (
        "trialrun.cli.scenario_cmd",
        "scenario",
        "Write or verify an action-scenario pack.",
    ),
    "baseline": ("trialrun.cli.baseline_cmd", "baseline", "Manage baseline files."),
    "merge": ("trialrun.cli.merge_cmd", "merge", "Merge shard runs into one run and verdict."),
    "receipt": ("trialrun.cli.receipt_cmd", "receipt", "Verify, sign and view run receipts."),
    "scores": (
        "trialrun.cli.scores_cmd",
        "scores",
        "Show the score of a subject's current bytes, or of every subject in a team.",
    ),
    "attempt": (
        "trialrun.cli.attempt_cmd",
        "attempt",
        "Let a coding agent work on a goal under a verifier, with rollback and a receipt.",
    ),
    "incident": (
        "trialrun.cli.incident_cmd",
        "incident",
        "Import a production trace; inspect, promote or replay it as a regression case.",
    ),
    "verify": ("trialrun.cli.verify_cmd", "verify", "Prove the gate catches planted regressions."),
    "mcp-proxy": (
        "trialrun.cli.mcp_proxy_cmd",
        "mcp_proxy",
        "Record or replay an MCP server (stdio or streamable HTTP).",
    ),
}
