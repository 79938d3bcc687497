"""Where a case's service recordings lie: beside its tool cassette, one file per service.

``<stem>.mcp-<server>.jsonl`` per MCP server, ``<stem>.model.jsonl`` for the gateway,
``<stem>.http.jsonl`` for the HTTP recorder (``<stem>.jsonl`` being the tool cassette).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

    from trialrun.config import Case


def mcp_cassette_path(case: Case, server: str) -> Path:
    return _beside(case.cassette_path, f"mcp-{server}")


def model_cassette_path(case: Case) -> Path:
    return _beside(case.cassette_path, "model")


def http_cassette_path(case: Case) -> Path:
    return _beside(case.cassette_path, "http")


def _beside(cassette: Path, part: str) -> Path:
    stem = cassette.name.removesuffix(".jsonl")
    return cassette.with_name(f"{stem}.{part}.jsonl")
