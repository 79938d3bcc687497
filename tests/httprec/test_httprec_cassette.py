"""HTTP cassettes: the file round-trips, bad lines are named by file and line, and any text
either loads or raises CassetteError (never anything else)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trialrun.errors import CassetteError
from trialrun.httprec.cassette import HEADER, dump_cassette, load_cassette, parse_cassette
from trialrun.httprec.exchange import Exchange, Request, Response, recorded, redact_url

PATH = Path("case.http.jsonl")
HEAD = json.dumps(HEADER, sort_keys=True)

header_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=20
)
exchanges = st.builds(
    Exchange,
    method=st.sampled_from(["GET", "POST", "PUT", "DELETE"]),
    url=st.builds(
        lambda host, path: f"https://{host}/{path}",
        st.from_regex(r"[a-z]{1,10}\.example", fullmatch=True),
        st.text(alphabet="abcxyz019/-_", max_size=20),
    ),
    status=st.integers(100, 599),
    request_body=st.binary(max_size=60) | st.text(max_size=40).map(str.encode),
    response_body=st.binary(max_size=60) | st.text(max_size=40).map(str.encode),
    request_headers=st.dictionaries(st.sampled_from(["content-type", "accept"]), header_text),
    response_headers=st.lists(st.tuples(header_text, header_text), max_size=3),
    elapsed_ms=st.floats(0, 1e6).map(lambda value: round(value, 3)),
    inside_tool=st.none() | st.text(max_size=20),
)


@given(st.lists(exchanges, max_size=5))
def test_a_dumped_cassette_loads_back_the_same_exchanges(recorded: list[Exchange]) -> None:
    loaded = parse_cassette(dump_cassette(recorded).decode("utf-8"), PATH)
    assert [
        (e.method, e.url, e.status, e.request_body, e.response_body, e.request_headers)
        for e in loaded
    ] == [
        (e.method, e.url, e.status, e.request_body, e.response_body, e.request_headers)
        for e in recorded
    ]
    assert [e.response_headers for e in loaded] == [e.response_headers for e in recorded]
    assert [e.inside_tool for e in loaded] == [e.inside_tool for e in recorded]
    assert [e.line for e in loaded] == list(range(2, 2 + len(recorded)))


def test_an_unmarked_exchange_is_written_as_before_the_mark_existed() -> None:
    exchange = Exchange("GET", "https://a.example/x", 200)
    [_, line] = dump_cassette([exchange]).decode("utf-8").splitlines()
    assert "inside_tool" not in json.loads(line)
    marked = dump_cassette([Exchange("GET", "https://a.example/x", 200, inside_tool="research")])
    assert json.loads(marked.decode("utf-8").splitlines()[1])["inside_tool"] == "research"


@given(st.text(max_size=300))
def test_any_text_loads_or_raises_a_cassette_error(text: str) -> None:
    try:
        parse_cassette(text, PATH)
    except CassetteError as exc:
        assert str(exc).startswith(f"{PATH}")


@given(st.dictionaries(st.text(max_size=12), st.none() | st.integers() | st.text(), max_size=6))
def test_any_object_as_an_exchange_loads_or_names_its_line(data: dict[str, object]) -> None:
    try:
        parse_cassette(f"{HEAD}\n{json.dumps(data)}\n", PATH)
    except CassetteError as exc:
        assert str(exc).startswith(f"{PATH}:2: ")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"method": "GET", "url": "https://a/"}', "missing required field 'status'"),
        ('{"method": "GET", "url": "ftp://a/", "status": 200}', "must start with http://"),
        ('{"method": "GET", "url": "https://a/", "status": 99}', "field 'status' must be"),
        ('{"method": "GET", "url": "https://a/", "status": 200, "stauts": 1}', "did you mean"),
        (
            '{"method": "GET", "url": "https://a/", "status": 200, "response_body": "x", '
            '"response_body_base64": "eA=="}',
            "found both",
        ),
        (
            '{"method": "GET", "url": "https://a/", "status": 200, "request_body_base64": "%%"}',
            "not valid base64",
        ),
        (
            '{"method": "GET", "url": "https://a/", "status": 200, "response_headers": [["a"]]}',
            "[name, value] pairs",
        ),
        (
            '{"method": "GET", "url": "https://a/", "status": 200, "inside_tool": null}',
            "field 'inside_tool' must be a tool name (a string); found null",
        ),
        ("[1, 2]", "expected a recorded exchange (a JSON object); found a list"),
        ("{not json", "not valid JSON"),
    ],
)
def test_a_bad_line_is_named_with_what_is_wrong(line: str, message: str) -> None:
    with pytest.raises(CassetteError) as caught:
        parse_cassette(f"{HEAD}\n\n{line}\n", PATH)
    assert str(caught.value).startswith(f"{PATH}:3: ")
    assert message in str(caught.value)


def test_the_header_is_required_and_versioned(tmp_path: Path) -> None:
    with pytest.raises(CassetteError, match=r":1: expected the header line"):
        parse_cassette('{"tool": "x"}\n', PATH)
    with pytest.raises(CassetteError, match=r"schema_version 2 is not supported"):
        parse_cassette('{"format": "trialrun-http-cassette", "schema_version": 2}\n', PATH)
    with pytest.raises(CassetteError, match="HTTP cassette file not found"):
        load_cassette(tmp_path / "missing.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(HEAD.encode() + b"\n\xff\n")
    with pytest.raises(CassetteError, match=r":2: not valid UTF-8 \(byte 0xff at offset 58\)"):
        load_cassette(bad)


def test_recording_redacts_urls_headers_and_bodies() -> None:
    secret = "sk-proj-" + "H1j2K3l4Z5x6C7v8B9n0" * 2
    request = Request(
        "post",
        "https",
        "API.Example.com",
        443,
        f"/v1/search?access_token={secret}&q=rain",
        [("Authorization", f"Bearer {secret}"), ("Content-Type", "application/json")],
        json.dumps({"api_key": secret, "q": "rain"}).encode(),
    )
    response = Response(
        200,
        [("Set-Cookie", "sid=abc"), ("Date", "now"), ("X-Note", f"key {secret}")],
        json.dumps({"token": secret}).encode(),
    )
    exchange = recorded(request, response, 12.5)
    text = dump_cassette([exchange]).decode()
    assert secret not in text and "sid=abc" not in text
    assert exchange.method == "POST"
    assert exchange.url == "https://api.example.com/v1/search?access_token=[REDACTED]&q=rain"
    assert exchange.request_headers == {"content-type": "application/json"}
    assert [name for name, _ in exchange.response_headers] == ["Set-Cookie", "X-Note"]
    assert ("Content-Length", str(len(exchange.response_body))) in exchange.response().headers


def test_a_url_keeps_its_port_and_loses_its_user_info() -> None:
    assert redact_url("http://me:pw@h.example:8080/a?b=1") == "http://h.example:8080/a?b=1"
    assert redact_url("http://[::1]:81/x") == "http://[::1]:81/x"
