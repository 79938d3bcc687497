"""Fixtures of the HTTP recorder's end-to-end tests: a test CA and two scripted APIs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from http_upstream import ScriptedApi, UpstreamAuthority


@pytest.fixture
def upstream_ca(tmp_path: Path) -> UpstreamAuthority:
    directory = tmp_path / "upstream-ca"
    directory.mkdir()
    return UpstreamAuthority(directory)


@pytest.fixture
def apis(upstream_ca: UpstreamAuthority) -> Iterator[tuple[ScriptedApi, ScriptedApi]]:
    plain, secure = ScriptedApi(), ScriptedApi(upstream_ca)
    yield plain, secure
    for api in (plain, secure):
        api.stop()
