"""A case's ``tool_call`` receipt events, whose canonical JSON ``suite_run`` writes itself.

The writer's own path (redact the data, then encode it) is the reference: the text written
ahead of it must be what that path writes, byte for byte, or the data must go that path.
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_receipt_writer import _data_values, ticking_clock

from trialrun.base import canonjson
from trialrun.base.results import ToolCall
from trialrun.errors import ReceiptError
from trialrun.receipt.suite_run import _emit_calls, _tool_call_data
from trialrun.receipt.writer import EncodedData, ReceiptWriter

_names = st.sampled_from(["lookup", "reset_password", "get_token", "é", "a\ud800"]) | st.text()
_durations = (
    st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([0.0, -0.0, 1.0, 2.5e-5, 1e-4, 0.0004, 1e16, 123456.0005])
    | st.integers(min_value=0, max_value=10**6)
)
_calls = st.builds(
    ToolCall,
    call_id=st.text(max_size=3),
    name=_names,
    args=st.dictionaries(st.sampled_from(["q", "password", "url"]) | st.text(), _data_values),
    ok=st.booleans(),
    duration_ms=_durations,
)


def _receipt(case: str, datas: list[Any]) -> bytes:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "receipt.jsonl"
        with ReceiptWriter(path, clock=ticking_clock()) as writer:
            writer.emit("run_start", {"goal": "g"})
            writer.emit_each("tool_call", datas)
        return path.read_bytes()


@settings(max_examples=300)
@given(case=st.sampled_from(["case1", "c\u00e9", "token-case"]) | st.text(), calls=st.lists(_calls))
def test_tool_calls_written_ahead_are_what_the_writer_writes_from_the_data(
    case: str, calls: list[ToolCall]
) -> None:
    items = list(_tool_call_data(case, calls))
    datas = [item.data if isinstance(item, EncodedData) else item for item in items]
    for item in items:
        if isinstance(item, EncodedData):
            assert item.data_json == canonjson.dumps(item.data)
    assert _receipt(case, items) == _receipt(case, datas)


def test_the_usual_calls_are_written_ahead_and_the_others_are_left_to_the_writer() -> None:
    usual = ToolCall("c1", "lookup", {"q": "x"}, True, duration_ms=0.25)
    items = list(
        _tool_call_data(
            "case",
            [
                usual,
                ToolCall("c2", "lookup", {"q": "x"}, True, duration_ms=3),  # an int
                ToolCall("c3", "lookup", {"q": "x"}, True, duration_ms=math.nan),
            ],
        )
    )
    assert isinstance(items[0], EncodedData)
    assert items[0].data_json == (
        '{"argsSummary":"{\\"q\\":\\"x\\"}","attempt":1,"case":"case","durationMs":0.25,'
        '"name":"lookup","ok":true,"redacted":false}'
    )
    assert [type(item) for item in items[1:]] == [dict, dict]
    with pytest.raises(ReceiptError, match="not JSON"):
        _receipt("case", items)


def test_a_secret_in_the_arguments_is_redacted_and_flagged(tmp_path: Path) -> None:
    path = tmp_path / "receipt.jsonl"
    call = ToolCall("c1", "login", {"password": "hunter2", "user": "ann"}, True, duration_ms=1.5)
    with ReceiptWriter(path, clock=ticking_clock()) as writer:
        writer.emit("run_start", {"goal": "g"})
        _emit_calls(writer, "case", [call])
    text = path.read_text(encoding="utf-8")
    assert "hunter2" not in text
    assert '"redacted":true' in text
