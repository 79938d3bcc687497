"""run.jsonl: the lines written for each case and the hash the receipt records for them."""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
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


# Values JSON has no form for: run.jsonl writes their str() (the encoder's default=str).
class _Opaque:
    def __str__(self) -> str:
        return "opaque \u00e9"


_line_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats()  # NaN and infinities too: json writes them as NaN / Infinity
    | texts
    | st.builds(_Opaque),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(texts | st.integers() | st.none() | st.booleans(), inner, max_size=4)
    ),
    max_leaves=20,
)


@given(st.lists(st.dictionaries(texts, _line_values, max_size=5), max_size=4))
def test_the_line_encoder_built_once_writes_what_json_encoder_writes(
    events: list[dict[str, Any]],
) -> None:
    from trialrun.artifacts.rundir import _event_lines

    encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str).encode
    expected = "".join(encode(event) + "\n" for event in events)
    assert _event_lines(events) == expected.encode("utf-8", "backslashreplace")


def test_a_circular_event_fails_as_json_encoder_fails_and_spoils_no_later_case() -> None:
    from trialrun.artifacts.rundir import _event_lines

    looped: dict[str, Any] = {"type": "log"}
    looped["self"] = looped
    with pytest.raises(ValueError, match="Circular reference"):
        _event_lines([looped])
    shared = {"k": 1}
    assert _event_lines([{"a": shared, "b": shared}]) == b'{"a":{"k":1},"b":{"k":1}}\n'
