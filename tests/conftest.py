"""Shared test fixtures."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway_fake_upstream import FakeUpstream

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


@pytest.fixture
def upstream() -> Iterator[FakeUpstream]:
    """A loopback stand-in for the OpenAI and Anthropic APIs (the model gateway's tests)."""
    fake = FakeUpstream()
    fake.start()
    yield fake
    fake.stop()
