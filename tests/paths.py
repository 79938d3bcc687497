"""Where the test suite's files are, so a test finds them from whichever folder it lives in.

Tests live in ``tests/<package>/``; the fake agents, servers and data they use stay in folders
directly under ``tests/``. A test names these constants instead of counting ``parents``.
"""

from __future__ import annotations

from pathlib import Path

TESTS_DIR = Path(__file__).resolve().parent
REPO_ROOT = TESTS_DIR.parent
SRC_DIR = REPO_ROOT / "src"
PACKAGE_DIR = SRC_DIR / "trialrun"

# Small real programs the tests run as agents or servers.
AGENTS_DIR = TESTS_DIR / "agents"
ATTEMPT_AGENTS_DIR = TESTS_DIR / "attempt_agents"
COMPARE_AGENTS_DIR = TESTS_DIR / "compare_agents"
INCIDENT_AGENTS_DIR = TESTS_DIR / "incident_agents"
SDK_AGENTS_DIR = TESTS_DIR / "sdk_agents"
MCP_SERVERS_DIR = TESTS_DIR / "mcp_servers"
# The agent whose behaviour each case picks with its input's ``behaviour`` key.
BEHAVING_AGENT = AGENTS_DIR / "behaving_agent.py"

# Fixtures: incident exports, golden runs, transcripts, receipt vectors.
DATA_DIR = TESTS_DIR / "data"
