"""JSON files nested past Python's stack, or holding a number of more than 4,300 digits, are one
error naming the file: ``json.loads`` raises RecursionError or a plain ValueError for them, not
the JSONDecodeError these readers word with its line and column (they were tracebacks)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from trialrun.artifacts.baseline import load_baseline
from trialrun.artifacts.diffing import _events, _read_summary
from trialrun.artifacts.shards import MergeError
from trialrun.artifacts.shards import _event as shard_event
from trialrun.base.assertion_api import AssertionParamError
from trialrun.checks.builtin import _load_schema_file
from trialrun.errors import CassetteError, ConfigError, TrialrunError
from trialrun.gateway.cassette import parse_cassette
from trialrun.incident.importers import read_records
from trialrun.mcp_proxy.events import read_events

NESTED = '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}"
LONG_NUMBER = '{"a": ' + "9" * 5000 + "}"


def schema(path: Path) -> Any:
    return _load_schema_file(path, key="schema_path")


READERS: dict[str, tuple[Callable[[Path], Any], type[Exception]]] = {
    "baseline": (load_baseline, ConfigError),
    "run.jsonl of a diff": (lambda path: list(_events(path)), ConfigError),
    "incident export": (read_records, ConfigError),
    "JSON Schema file": (schema, AssertionParamError),
    "run summary of a diff": (_read_summary, ConfigError),
    "gateway cassette": (lambda path: parse_cassette(path.read_text(), path), CassetteError),
    "MCP proxy events": (read_events, TrialrunError),
    "run.jsonl of a shard": (lambda path: shard_event(path.read_text(), path, 1), MergeError),
}


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize(
    ("text", "said"),
    [(NESTED, "nested too deeply to read"), (LONG_NUMBER, "Exceeds the limit (4300 digits)")],
)
def test_unreadable_json_is_one_error_naming_the_file(
    tmp_path: Path, reader: str, text: str, said: str
) -> None:
    read, error = READERS[reader]
    path = tmp_path / "file.json"
    path.write_text(text + "\n", encoding="utf-8")
    with pytest.raises(error) as caught:
        read(path)
    assert said in str(caught.value)
    assert "file.json" in str(caught.value)
