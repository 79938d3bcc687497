"""Fixtures of the compare tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A trialrun home of the test's own, and none of the scripted agents' switches set."""
    home = tmp_path / "home"
    monkeypatch.setenv("TRIALRUN_HOME", str(home))
    for switch in ("SCRIPTED_FLIP", "SCRIPTED_WAIT_FOR", "COMPARE_AGENT_PLAN"):
        monkeypatch.delenv(switch, raising=False)
    return home
