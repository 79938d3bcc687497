"""The cassette line core both cassette kinds share (``httprec.jsonl``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trialrun.errors import CassetteError
from trialrun.gateway.cassette import CASSETTE as MODEL
from trialrun.httprec.cassette import CASSETTE as HTTP
from trialrun.httprec.jsonl import Fail, Format

PATH = Path("c.jsonl")
TOY = Format("toy-cassette", 3, "the toy")


def parse(data: Any, fail: Fail) -> int:
    if not isinstance(data, int):
        raise fail("expected a number")
    return data * 100 + fail.line


@pytest.mark.parametrize(
    ("cassette", "other"), [(HTTP, MODEL), (MODEL, HTTP)], ids=["http", "model"]
)
def test_a_cassette_of_the_other_kind_is_named_in_the_header_error(
    cassette: Format, other: Format
) -> None:
    records, problems = cassette.check(json.dumps(other.header) + "\n", PATH, parse)
    assert records == [] and [p.line for p in problems] == [1]
    assert problems[0].message.endswith(f" (this is a {other.header['format']} file)")


def test_every_bad_line_is_reported_and_good_ones_kept_with_their_numbers() -> None:
    text = '{"format": "toy-cassette", "schema_version": 3}\n1\n\n"x"\n[[\n2\n'
    records, problems = TOY.check(text, PATH, parse)
    assert records == [102, 206]
    assert [(p.line, p.message.split(":")[0]) for p in problems] == [
        (4, "expected a number"),
        (5, "not valid JSON"),
    ]


def test_a_file_reads_as_its_text_does_and_names_bad_bytes(tmp_path: Path) -> None:
    path = tmp_path / "toy.jsonl"
    TOY.write(path, [{"b": 1, "a": 2}])
    assert path.read_text() == '{"format": "toy-cassette", "schema_version": 3}\n{"a": 2, "b": 1}\n'
    assert TOY.read(path, lambda data, fail: data) == ([{"a": 2, "b": 1}], [])
    path.write_bytes(b'{"format": "toy-cassette", "schema_version": 3}\n7\n\xfe\n')
    with pytest.raises(CassetteError, match=r":3: not valid UTF-8 \(byte 0xfe at offset 50\)"):
        TOY.read(path, parse)
    with pytest.raises(CassetteError, match="toy file not found"):
        TOY.read(tmp_path / "missing.jsonl", parse, label="toy")


@given(st.lists(st.one_of(st.integers(-5, 5), st.text(max_size=4), st.just("{")), max_size=8))
def test_any_lines_give_records_or_errors_at_their_own_lines(lines: list[Any]) -> None:
    texts = [v if v == "{" else json.dumps(v) for v in lines]
    text = "\n".join([json.dumps(TOY.header), *texts])
    records, problems = TOY.check(text, PATH, parse)
    assert len(records) + len(problems) == len(texts)
    assert all(2 <= p.line <= len(texts) + 1 for p in problems if p.line is not None)
    assert records == [v * 100 + n for n, v in enumerate(lines, start=2) if isinstance(v, int)]


def test_a_foreign_format_gets_no_hint() -> None:
    problems = TOY.check('{"format": "other", "schema_version": 1}', PATH, parse)[1]
    assert problems[0].message == (
        'expected the header line {"format": "toy-cassette", "schema_version": 3}'
    )
