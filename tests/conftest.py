"""Shared test fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[2] / "shared"


def shared_dir() -> Path:
    """The workplace's shared/ folder (peer fixtures and conformance vectors), beside the repo."""
    for candidate in (SHARED, Path(__file__).resolve().parents[1].parent / "shared"):
        if candidate.is_dir():
            return candidate
    pytest.skip("shared/ folder with fixtures not found beside the repository")


@pytest.fixture
def peer_fixtures() -> Path:
    return shared_dir() / "peer-fixtures" / "runledger"


@pytest.fixture
def conformance() -> Path:
    return shared_dir() / "conformance" / "receipt-v0"
