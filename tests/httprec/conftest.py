"""The recording proxy and a test upstream's certificate authority, for the recorder's tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from http_upstream import UpstreamAuthority
from trialrun.httprec.authority import RunAuthority
from trialrun.httprec.front import HttpRecorder


@pytest.fixture
def recorder(tmp_path: Path) -> Iterator[HttpRecorder]:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    proxy = HttpRecorder(RunAuthority(scratch))
    yield proxy
    proxy.stop()


@pytest.fixture
def test_ca(tmp_path: Path) -> UpstreamAuthority:
    directory = tmp_path / "upstream"
    directory.mkdir()
    return UpstreamAuthority(directory)
