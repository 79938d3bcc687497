"""The agent protocol's ``handoff`` message: parsed exactly, refused with its line when wrong."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trialrun.conversation.protocol import HandoffMsg, message_type, parse_line
from trialrun.errors import ProtocolError


@given(to=st.text(), source=st.one_of(st.none(), st.text()))
def test_any_names_round_trip(to: str, source: str | None) -> None:
    line = json.dumps({"type": "handoff", "to": to, "from": source}).encode()
    message = parse_line(line, 3)
    assert message == HandoffMsg(to, source)
    assert message_type(message) == "handoff"


def test_from_is_optional() -> None:
    assert parse_line(b'{"type":"handoff","to":"billing"}', 1) == HandoffMsg("billing", None)


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        (b'{"type":"handoff"}', "handoff.to is missing"),
        (b'{"type":"handoff","to":7}', "handoff.to"),
        (b'{"type":"handoff","to":"b","from":["a"]}', "handoff.from"),
    ],
)
def test_a_malformed_handoff_is_a_protocol_error_at_its_line(line: bytes, problem: str) -> None:
    with pytest.raises(ProtocolError) as raised:
        parse_line(line, 12)
    assert raised.value.line_no == 12
    assert problem in str(raised.value)
