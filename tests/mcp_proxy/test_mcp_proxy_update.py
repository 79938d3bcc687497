"""``trialrun mcp-proxy --mode update`` on its own: matching calls answered from the old cassette
(their lines copied byte for byte), the rest forwarded to a real server that logs what it got."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from builders import call_cli
from mcp_proxy_support import RawProxy  # type: ignore[import-not-found]
from paths import MCP_SERVERS_DIR
from trialrun.mcp_proxy import proxy_command, read_events

HEADER = {"kind": "header", "schema_version": 1, "server": "docs", "era": None, "upstream": []}
# Written as a person might edit it (spacing, key order): update must copy it as it is.
ALPHA = b'{"tool": "search",  "args": {"q": "alpha"}, "ok": true, "error": null, "result": {"content": [{"type": "text", "text": "old alpha"}], "isError": false}}\r\n'  # noqa: E501


def line(q: str) -> bytes:
    result = {"content": [{"type": "text", "text": f"old {q}"}], "isError": False}
    record = {"args": {"q": q}, "error": None, "ok": True, "result": result, "tool": "search"}
    return (json.dumps(record) + "\n").encode()


@pytest.fixture
def old_cassette(tmp_path: Path) -> Path:
    path = tmp_path / "docs.jsonl"
    path.write_bytes((json.dumps(HEADER) + "\n").encode() + ALPHA + line("beta") + line("gamma"))
    return path


def update_proxy(tmp_path: Path, cassette: Path, *extra: str) -> RawProxy:
    server = [sys.executable, str(MCP_SERVERS_DIR / "echo_server.py"), str(tmp_path / "log")]
    argv = proxy_command(
        server,
        cassette=cassette,
        mode="update",
        name="docs",
        events=tmp_path / "events.jsonl",
        keep_unused="--keep-unused" in extra,
    )
    return RawProxy(argv)


def call(request_id: int, q: str) -> dict[str, Any]:
    params = {"name": "search", "arguments": {"q": q}, "_meta": {"progressToken": "p"}}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def session(proxy: RawProxy, queries: list[str]) -> list[Any]:
    proxy.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}})
    proxy.recv_until_response(0)
    answers = []
    for number, q in enumerate(queries, start=1):
        proxy.send(call(number, q))
        answers.append(proxy.recv_until_response(number)[-1])
    return answers


def test_update_in_place_answers_what_matches_and_forwards_the_rest(
    tmp_path: Path, old_cassette: Path
) -> None:
    proxy = update_proxy(tmp_path, old_cassette)
    answers = session(proxy, ["alpha", "BETA"])
    code, stderr = proxy.close()
    assert code == 0, stderr
    texts = [a["result"]["content"][0]["text"] for a in answers]
    assert texts == ["old alpha", "found BETA"]
    assert [a["id"] for a in answers] == [1, 2]  # the caller's ids
    # Only the call without a recording reached the server.
    assert (tmp_path / "log").read_text().splitlines() == ['search {"q": "BETA"}']
    lines = old_cassette.read_bytes().splitlines(keepends=True)
    assert json.loads(lines[0])["kind"] == "header"
    assert json.loads(lines[1])["method"] == "initialize"
    assert lines[2] == ALPHA  # byte for byte, its own line ending included
    assert json.loads(lines[3])["args"] == {"q": "BETA"}
    assert len(lines) == 4  # beta and gamma, unused, were dropped
    events = read_events(tmp_path / "events.jsonl")
    assert [(e["args"]["q"], e["replayed"], e["recording"]) for e in events] == [
        ("alpha", True, 2),
        ("BETA", False, None),
    ]


def test_keep_unused_keeps_the_unused_calls_after_the_others(
    tmp_path: Path, old_cassette: Path
) -> None:
    proxy = update_proxy(tmp_path, old_cassette, "--keep-unused")
    session(proxy, ["gamma"])
    code, stderr = proxy.close()
    assert code == 0, stderr
    assert not (tmp_path / "log").exists()  # no call reached the server
    lines = old_cassette.read_bytes().splitlines(keepends=True)
    assert lines[2:] == [line("gamma"), ALPHA, line("beta")]


def test_update_without_an_old_cassette_records_every_call(tmp_path: Path) -> None:
    cassette = tmp_path / "new.jsonl"
    proxy = update_proxy(tmp_path, cassette)
    session(proxy, ["alpha"])
    code, stderr = proxy.close()
    assert code == 0, stderr
    assert (tmp_path / "log").read_text().splitlines() == ['search {"q": "alpha"}']
    assert b'"found alpha"' in cassette.read_bytes()


def test_a_corrupt_old_cassette_exits_2_naming_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cassette = tmp_path / "bad.jsonl"
    cassette.write_bytes(line("alpha") + b"{not json\n")
    done = call_cli(
        ["mcp-proxy", "--mode", "update", "--cassette", str(cassette), "--", "true"], capsys
    )
    assert done.code == 2
    assert f"{cassette}:2:" in done.err
    assert cassette.read_bytes() == line("alpha") + b"{not json\n"


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--mode", "record", "--keep-unused"], "--update-from and --keep-unused go with"),
        (["--mode", "replay", "--update-from", "x.jsonl"], "--update-from and --keep-unused"),
        (["--mode", "update"], "update mode needs the MCP server command"),
    ],
)
def test_update_options_are_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], said: str
) -> None:
    cassette = str(tmp_path / "c.jsonl")
    server = [] if argv == ["--mode", "update"] else ["--", "true"]
    done = call_cli(["mcp-proxy", "--cassette", cassette, *argv, *server], capsys)
    assert done.code == 2
    assert said in done.err


def test_proxy_command_refuses_update_options_outside_update(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="go with mode 'update'"):
        proxy_command(["true"], cassette=tmp_path / "c", mode="record", name="d", keep_unused=True)
    argv = proxy_command(
        ["srv"], cassette="new", mode="update", name="d", update_from="old", keep_unused=True
    )
    assert argv[-5:] == ["--update-from", "old", "--keep-unused", "--", "srv"]
