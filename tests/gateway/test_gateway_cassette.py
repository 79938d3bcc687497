"""Model-call cassettes: format round trip, corrupt files, matching order, miss explanations."""

from __future__ import annotations

import json
import string
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trialrun.errors import CassetteError
from trialrun.gateway.cassette import (
    ModelCassette,
    Recording,
    check_cassette,
    check_cassette_file,
    dump_cassette,
    parse_cassette,
    write_cassette,
)
from trialrun.gateway.normalize import RequestNormalizer, request_key
from trialrun.gateway.usage import Usage
from trialrun.httprec.difference import first_difference

HEADER = '{"format": "trialrun-model-cassette", "schema_version": 1}'
NORMALIZER = RequestNormalizer()


def chat(text: str, **extra: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": text}], **extra}


def recording(request: Any, body: str = "{}", path: str = "/v1/chat/completions") -> Recording:
    return Recording(
        provider="openai",
        method="POST",
        path=path,
        request=request,
        status=200,
        content_type="application/json",
        body=body,
        key=request_key("openai", path, request),
    )


def loaded(tmp_path: Path, *recordings: Recording) -> ModelCassette:
    path = tmp_path / "c.jsonl"
    write_cassette(path, recordings)
    return ModelCassette.load(path, NORMALIZER)


def key_of(request: Any, path: str = "/v1/chat/completions") -> str:
    return request_key("openai", path, NORMALIZER.normalize(request))


def test_identical_requests_get_their_recordings_in_order_once_each(tmp_path: Path) -> None:
    cassette = loaded(
        tmp_path,
        recording(chat("a"), body="first"),
        recording(chat("b"), body="other"),
        recording(chat("a"), body="second"),
    )
    assert cassette.take(key_of(chat("a"))).body == "first"  # type: ignore[union-attr]
    assert cassette.take(key_of(chat("a"))).body == "second"  # type: ignore[union-attr]
    assert cassette.take(key_of(chat("a"))) is None
    assert [r.body for r in cassette.unused()] == ["other"]
    assert [r.line for r in cassette.recordings] == [2, 3, 4]


def test_lenient_take_next_serves_the_endpoints_recordings_in_file_order(tmp_path: Path) -> None:
    cassette = loaded(
        tmp_path,
        recording(chat("a"), body="1"),
        recording({"input": "x"}, body="emb", path="/v1/embeddings"),
        recording(chat("b"), body="2"),
    )
    assert cassette.take(key_of(chat("b"))).body == "2"  # type: ignore[union-attr]
    assert cassette.take_next(("openai", "POST", "/v1/chat/completions")).body == "1"  # type: ignore[union-attr]
    assert cassette.take_next(("openai", "POST", "/v1/chat/completions")) is None
    assert cassette.take(key_of(chat("a"))) is None  # consumed through the other index


def test_a_miss_names_the_nearest_recording_and_the_first_difference(tmp_path: Path) -> None:
    history = [{"role": "user", "content": "q1"}, {"role": "assistant", "content": "a1"}]
    cassette = loaded(
        tmp_path,
        recording({"model": "m", "messages": [{"role": "user", "content": "zzz"}]}),
        recording({"model": "m", "messages": [*history, {"role": "user", "content": "q2"}]}),
    )
    asked = {"model": "m", "messages": [*history, {"role": "user", "content": "Q2!"}]}
    message = cassette.explain_miss("openai", "POST", "/v1/chat/completions", asked, "k")
    assert message.startswith(
        "cassette mismatch: c.jsonl has no unused recording of POST openai /v1/chat/completions "
        "for this request (model 'm', 3 messages)"
    )
    assert (
        'nearest recording: line 3; first difference at messages[2].content: recorded "q2", '
        'requested "Q2!"' in message
    )


def test_a_miss_on_an_endpoint_without_recordings_says_so(tmp_path: Path) -> None:
    cassette = loaded(tmp_path, recording(chat("a")))
    message = cassette.explain_miss("openai", "POST", "/v1/responses", {"input": "x"}, "k")
    assert "holds no recording of openai /v1/responses (1 of other endpoints)" in message
    empty = loaded(tmp_path)
    assert "(it is empty)" in empty.explain_miss("anthropic", "POST", "/v1/messages", {}, "k")


def test_a_miss_after_the_identical_recordings_were_used_counts_them(tmp_path: Path) -> None:
    cassette = loaded(tmp_path, recording(chat("a")))
    key = key_of(chat("a"))
    assert cassette.take(key) is not None
    message = cassette.explain_miss("openai", "POST", "/v1/chat/completions", chat("a"), key)
    assert "1 identical recording was already used" in message
    assert "line 2 (already used) has the same request" in message
    # Also when the endpoint's cursor was used up by lenient replay.
    cassette = loaded(tmp_path, recording(chat("a")))
    assert cassette.take_next(("openai", "POST", "/v1/chat/completions")) is not None
    message = cassette.explain_miss("openai", "POST", "/v1/chat/completions", chat("b"), "k")
    assert "nearest recording: line 2 (already used); first difference at messages[0]" in message


def test_keys_are_computed_again_on_load_under_the_current_rules(tmp_path: Path) -> None:
    # Recorded before the date rule existed (or by hand): the stored request has a raw date.
    cassette = loaded(tmp_path, recording(chat("today is 2024-05-01"), body="dated"))
    found = cassette.take(key_of(chat("today is 2031-12-31")))
    assert found is not None and found.body == "dated"


@pytest.mark.parametrize(
    ("lines", "line", "message"),
    [
        ([], 1, "expected the header line"),
        (['{"tool": "search", "args": {}}'], 1, "this looks like a tool cassette"),
        (['{"format": "trialrun-model-cassette", "schema_version": 9}'], 1, "schema_version 9"),
        ([HEADER, "", "[1, 2]"], 3, "expected a recorded call (a JSON object); found a list"),
        ([HEADER, '{"provider": "openai"'], 2, "not valid JSON"),
        ([HEADER, '{"provider": "openai"}'], 2, "missing required field 'method'"),
        ([HEADER, "{RECORD, 'stauts': 200}"], 2, "unknown field 'stauts' (did you mean 'status'?)"),
        ([HEADER, "{RECORD, 'provider': 'mistral'}"], 2, "field 'provider' must be one of"),
        ([HEADER, "{RECORD, 'status': '200'}"], 2, "field 'status' must be an HTTP status"),
        ([HEADER, "{RECORD, 'status': true}"], 2, "found boolean true"),
        ([HEADER, "{RECORD, 'path': 'v1/x'}"], 2, "field 'path' must start with '/'"),
        ([HEADER, "{RECORD, 'body': 3}"], 2, "field 'body' must be a string"),
        ([HEADER, "{RECORD, 'headers': {'a': 1}}"], 2, "field 'headers' must be a mapping"),
        ([HEADER, "{RECORD, 'elapsed_ms': -1}"], 2, "field 'elapsed_ms' must be a number >= 0"),
        ([HEADER, "{RECORD, 'occurrence': 1.5}"], 2, "field 'occurrence' must be an integer"),
        ([HEADER, "{RECORD, 'usage': []}"], 2, "field 'usage' must be a mapping or null"),
        ([HEADER, "{RECORD, 'body': '\\ud800'}"], 2, "escaped surrogate that is not a byte"),
        ([HEADER, "{RECORD, 'status': NaN}"], 2, "not valid JSON"),
        ([HEADER, "{RECORD, 'elapsed_ms': 1e400}"], 2, "1e400 is beyond the range of a JSON"),
        (
            [HEADER, "{RECORD, 'usage': {'x': " + "[" * 99 + "]" * 99 + "}}"],
            2,
            "the recording nests objects and arrays more than 100 levels deep",
        ),
    ],
)
def test_corrupt_cassettes_name_file_and_line(
    tmp_path: Path, lines: list[str], line: int, message: str
) -> None:
    record = json.dumps(recording(chat("x")).to_json())[1:-1]
    path = tmp_path / "bad.jsonl"
    path.write_text(
        "\n".join(
            text.replace("{RECORD, ", "{" + record + ", ").replace("'", '"')
            if "RECORD" in text
            else text
            for text in lines
        )
    )
    with pytest.raises(CassetteError) as caught:
        ModelCassette.load(path, NORMALIZER)
    assert caught.value.line == line
    assert str(caught.value).startswith(f"{path}:{line}: ")
    assert message in str(caught.value)


def test_unreadable_cassettes(tmp_path: Path) -> None:
    with pytest.raises(CassetteError, match="cassette file not found"):
        ModelCassette.load(tmp_path / "nope.jsonl", NORMALIZER)
    with pytest.raises(CassetteError, match="expected a cassette file, found a directory"):
        ModelCassette.load(tmp_path, NORMALIZER)
    bad = tmp_path / "latin1.jsonl"
    bad.write_bytes(HEADER.encode() + b'\n{"body": "caf\xe9"}\n')
    with pytest.raises(CassetteError) as caught:
        ModelCassette.load(bad, NORMALIZER)
    assert caught.value.line == 2 and "not valid UTF-8" in str(caught.value)


def test_non_utf8_response_bytes_survive_the_round_trip(tmp_path: Path) -> None:
    raw = b"data: \xff\xfe caf\xc3\xa9\n\n"
    stored = recording(chat("x"), body=raw.decode("utf-8", "surrogateescape"))
    (back,) = loaded(tmp_path, stored).recordings
    assert back.body_bytes() == raw


def test_first_difference_walks_models_then_messages_then_the_rest() -> None:
    assert first_difference({"a": 1}, {"a": 1.0}) is None
    assert first_difference({"z": 1, "model": "a"}, {"z": 2, "model": "b"})[0] == "model"  # type: ignore[index]
    where, _, new = first_difference({"messages": [1]}, {"messages": [1, 2]})  # type: ignore[misc]
    assert (where, new) == ("messages[1]", 2)
    assert first_difference("text", "other") == ("the request body", "text", "other")


# ---- hypothesis: the parser ----------------------------------------------------------------

_TEXT = st.text(alphabet=string.printable + "é☃\U0001f600", max_size=20)
_JSON: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | _TEXT,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(_TEXT, children, max_size=3),
    max_leaves=8,
)
_RECORDING = st.builds(
    Recording,
    provider=st.sampled_from(["openai", "anthropic"]),
    method=st.just("POST"),
    path=st.sampled_from(["/v1/messages", "/v1/chat/completions"]),
    request=_JSON,
    status=st.integers(100, 599),
    content_type=_TEXT,
    body=st.binary(max_size=40).map(lambda b: b.decode("utf-8", "surrogateescape")),
    query=_TEXT,
    headers=st.dictionaries(_TEXT, _TEXT, max_size=2),
    key=_TEXT,
    occurrence=st.integers(0, 5),
    elapsed_ms=st.floats(0, 1e6, allow_nan=False).map(lambda x: round(x, 3)),
    usage=st.none() | st.builds(Usage, st.none() | _TEXT, st.none() | st.integers(0, 10**6)),
)


@settings(max_examples=200)
@given(recordings=st.lists(_RECORDING, max_size=4))
def test_dump_then_parse_gives_the_recordings_back(recordings: list[Recording]) -> None:
    text = dump_cassette(recordings).decode("utf-8")
    parsed = parse_cassette(text, Path("c.jsonl"))
    assert [(r.line, r) for r in parsed] == [
        (number, Recording(**{**_fields(r), "line": number}))
        for number, r in enumerate(recordings, start=2)
    ]


def _fields(recording: Recording) -> dict[str, Any]:
    return {name: getattr(recording, name) for name in Recording.__dataclass_fields__}


@settings(max_examples=300)
@given(lines=st.lists(st.one_of(_TEXT, _JSON.map(json.dumps)), max_size=4))
def test_the_parser_accepts_or_raises_cassette_error_never_anything_else(lines: list[str]) -> None:
    for text in ("\n".join(lines), "\n".join([HEADER, *lines])):
        try:
            parse_cassette(text, Path("c.jsonl"))
        except CassetteError as exc:
            assert exc.line is not None and exc.line >= 1


@settings(max_examples=150, deadline=None)
@given(
    recordings=st.lists(_RECORDING, max_size=3),
    junk=st.lists(st.one_of(_TEXT, _JSON.map(json.dumps)), max_size=3),
    crlf=st.booleans(),
)
def test_a_file_read_line_by_line_checks_as_its_text_does(
    tmp_path_factory: pytest.TempPathFactory,
    recordings: list[Recording],
    junk: list[str],
    crlf: bool,
) -> None:
    # Loading reads the file one line at a time; check_cassette reads the same text whole.
    lines = dump_cassette(recordings).decode("utf-8").split("\n") + junk
    text = ("\r\n" if crlf else "\n").join(lines)
    path = tmp_path_factory.mktemp("model") / "c.model.jsonl"
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    try:
        expected = check_cassette(path.read_bytes().decode("utf-8"), path)
    except UnicodeDecodeError:
        with pytest.raises(CassetteError, match="not valid UTF-8"):
            check_cassette_file(path)
        return
    got = check_cassette_file(path)
    assert (got[0], [str(p) for p in got[1]]) == (expected[0], [str(p) for p in expected[1]])


def test_an_undecodable_byte_is_named_by_its_line_and_offset(tmp_path: Path) -> None:
    path = tmp_path / "c.model.jsonl"
    data = HEADER.encode() + b'\n{"body": "caf\xe9"}\n'
    path.write_bytes(data)
    with pytest.raises(CassetteError) as caught:
        check_cassette_file(path)
    assert caught.value.line == 2
    # The offset in the file, as when the file was decoded whole.
    assert f"byte 0xe9 at offset {data.index(0xE9)}" in str(caught.value)


def test_a_request_body_nested_too_deeply_is_matched_as_text() -> None:
    # Walks over a parsed body recurse (matching, redaction, drift): deep JSON stays text.
    from trialrun.gateway.exchange import parse_json

    shallow = b'{"messages": [{"content": "hi"}]}'
    assert parse_json(shallow) == {"messages": [{"content": "hi"}]}
    deep = b'{"messages": ' + b"[" * 500 + b"]" * 500 + b"}"
    assert parse_json(deep) == deep.decode()
    too_deep_to_parse = b"[" * 100_000 + b"]" * 100_000
    assert parse_json(too_deep_to_parse) == too_deep_to_parse.decode()
