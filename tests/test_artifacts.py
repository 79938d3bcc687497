"""run.jsonl: the lines written for each case and the hash the receipt records for them."""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from trialrun.artifacts.rundir import RunDirectory
from trialrun.base.results import AgentRun, CaseResult

# Any code point, and surrogates often: agents send lone ones as \ud800 escapes.
texts = st.text(st.characters(exclude_categories=()) | st.sampled_from("\ud83d\ude00\udfff"))
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | texts,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=20,
)
events_strategy = st.lists(st.dictionaries(texts, json_values, max_size=5), max_size=4)


def write_case(directory: Path, events: list[dict[str, Any]]) -> tuple[bytes, str]:
    """The bytes run.jsonl holds after one case with ``events``, and the hash returned."""
    run_dir = RunDirectory(directory, "suite", "run")
    case = CaseResult("c1", "pass", AgentRun(case_id="c1", events=events))
    digest = run_dir.write_case_events(case)
    run_dir.close_events()
    return (run_dir.path / "run.jsonl").read_bytes(), digest


def test_lines_are_compact_utf8_and_lone_surrogates_are_escaped(tmp_path: Path) -> None:
    data, digest = write_case(tmp_path, [{"type": "log", "text": "café \ud800 😀", "n": 1.5}])
    first, end = data.splitlines(keepends=True)
    assert first == '{"type":"log","text":"café \\ud800 😀","n":1.5}\n'.encode()
    assert json.loads(end)["type"] == "case_end"
    assert digest == hashlib.sha256(data).hexdigest()


@given(events_strategy)
def test_each_event_is_one_line_that_reads_back(events: list[dict[str, Any]]) -> None:
    with tempfile.TemporaryDirectory() as directory:
        data, digest = write_case(Path(directory), events)
    assert digest == hashlib.sha256(data).hexdigest()
    lines = data.decode("utf-8").split("\n")
    assert lines[-1] == "" and len(lines) == len(events) + 2  # + case_end, + after the last \n
    for line, event in zip(lines, events, strict=False):
        # A lone surrogate reads back as itself; two adjacent ones read back as their pair.
        text = json.dumps(event, ensure_ascii=False).encode("utf-16", "surrogatepass")
        assert json.loads(line) == json.loads(text.decode("utf-16", "surrogatepass"))
