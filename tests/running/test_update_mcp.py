"""``run --mode update`` for MCP servers (stdio and ``transport: http``), and an MCP miss that
explains itself (issue 32).

The server (tests/mcp_servers/echo_server.py) appends each ``tools/call`` it receives to a log,
so each test proves which calls update forwarded; the agent is a small raw JSON-RPC client.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from builders import call_cli, only_run_dir
from paths import MCP_SERVERS_DIR

pytestmark = pytest.mark.slow

AGENT = r"""
import json, os, subprocess, sys, urllib.request

task = json.loads(sys.stdin.readline())
queries = task["input"]["queries"]
if task["input"].get("lookup"):  # a tool of the agent's own, answered from its cassette
    call = {"type": "tool_call", "name": "lookup", "call_id": "c1", "args": {"id": 1}}
    print(json.dumps(call), flush=True)
    sys.stdin.readline()
server = json.loads(os.environ["TRIALRUN_MCP_SERVERS"])["mcpServers"]["docs"]
messages = [
    {"jsonrpc": "2.0", "id": 0, "method": "initialize",
     "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "agent", "version": "1"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
] + [
    {"jsonrpc": "2.0", "id": n, "method": "tools/call",
     "params": {"name": "search", "arguments": {"q": q}}}
    for n, q in enumerate(queries, start=1)
]
answers = []
if server.get("type") == "http":
    for message in messages:
        request = urllib.request.Request(
            server["url"], data=json.dumps(message).encode(),
            headers={"Content-Type": "application/json",
                     "Accept": "application/json, text/event-stream"},
        )
        with urllib.request.urlopen(request, timeout=120) as response:
            body = response.read()
        if "id" in message:
            answers.append(json.loads(body))
else:
    proxy = subprocess.Popen(
        [server["command"], *server["args"]], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    for message in messages:
        proxy.stdin.write((json.dumps(message) + "\n").encode())
        proxy.stdin.flush()
        if "id" in message:
            answers.append(json.loads(proxy.stdout.readline()))
    proxy.stdin.close()
    proxy.wait(timeout=120)
texts = [
    a["result"]["content"][0]["text"] if "result" in a else a["error"]["message"]
    for a in answers[1:]
]
if task["input"].get("fail"):
    sys.exit(3)  # the case fails after its calls: nothing it recorded may be kept
print(json.dumps({"type": "final_output", "output": {"texts": texts}}), flush=True)
"""


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def make_suite(root: Path, transport: str) -> Path:
    suite = root / "suite"
    (suite / "cases").mkdir(parents=True)
    (suite / "agent.py").write_text(AGENT, encoding="utf-8")
    command = [sys.executable, str(MCP_SERVERS_DIR / "echo_server.py"), str(root / "server.log")]
    (suite / "suite.yaml").write_text(
        "suite_name: upd\n"
        f"agent_command: {json.dumps([sys.executable, 'agent.py'])}\n"
        "mode: replay\ncases_path: cases\ntool_registry: []\n"
        f"mcp_servers:\n  docs:\n    command: {json.dumps(command)}\n"
        + ("    transport: http\n" if transport == "http" else ""),
        encoding="utf-8",
    )
    return suite


def set_input(suite: Path, queries: list[str], *, fail: bool = False, lookup: bool = False) -> None:
    value: dict[str, Any] = {"queries": queries, "fail": fail, "lookup": lookup}
    case = {"id": "t1", "input": value, "cassette": "cassettes/t1.jsonl"}
    (suite / "cases" / "t1.yaml").write_text(json.dumps(case), encoding="utf-8")


def run(
    suite: Path, out: str, capsys: pytest.CaptureFixture[str], *extra: str, code: int = 0
) -> dict[str, Any]:
    done = call_cli(["run", str(suite), "--out", out, "--no-baseline", *extra], capsys)
    assert done.code == code, done.out + done.err
    summary: dict[str, Any] = json.loads((only_run_dir(Path(out)) / "summary.json").read_text())
    return summary


def cassette(suite: Path) -> Path:
    return suite / "cassettes" / "t1.mcp-docs.jsonl"


def call_lines(path: Path) -> dict[str, bytes]:
    """Each recorded tools/call line by its query."""
    lines = path.read_bytes().splitlines(keepends=True)
    return {json.loads(line)["args"]["q"]: line for line in lines if b'"tool"' in line}


def server_calls(root: Path) -> list[str]:
    log = root / "server.log"
    lines = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    log.unlink(missing_ok=True)
    return lines


def mcp_review(out: str) -> dict[str, Any]:
    document = json.loads((only_run_dir(Path(out)) / "recordings-diff.json").read_text())
    [case] = document["cases"]
    [block] = [b for b in case["files"] if b["file"].endswith("t1.mcp-docs.jsonl")]
    assert isinstance(block, dict)
    return block


def recorded(root: Path, suite: Path, capsys: pytest.CaptureFixture[str], transport: str) -> None:
    set_input(suite, ["alpha", "beta", "gamma"])
    run(suite, "rec", capsys, "--mode", "record")
    assert server_calls(root) == [f'search {{"q": "{q}"}}' for q in ("alpha", "beta", "gamma")]
    assert set(call_lines(cassette(suite))) == {"alpha", "beta", "gamma"}


TRANSPORTS = pytest.mark.parametrize("transport", ["stdio", "http"])


@TRANSPORTS
def test_update_forwards_only_the_changed_call_and_keeps_the_other_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], transport: str
) -> None:
    suite = make_suite(tmp_path, transport)
    recorded(tmp_path, suite, capsys, transport)
    before = call_lines(cassette(suite))

    set_input(suite, ["alpha", "BETA", "gamma"])
    summary = run(suite, "upd", capsys, "--mode", "update")
    # Only the changed call reached the server; the others were answered from the recording.
    assert server_calls(tmp_path) == ['search {"q": "BETA"}']
    after = call_lines(cassette(suite))
    assert list(after) == ["alpha", "BETA", "gamma"]  # call order
    assert (after["alpha"], after["gamma"]) == (before["alpha"], before["gamma"])
    block = mcp_review("upd")
    tools = [r for r in block["recordings"] if r["recording"] == "tool search"]
    assert [r["status"] for r in tools] == ["identical", "changed", "identical"]
    assert tools[1]["field"] == "args.q"
    # kept: the two replayed calls and the server's initialize answer, recorded again alike
    assert block["counts"] == {"kept": 3, "replaced": 1, "added": 0, "dropped": 0}
    [case] = summary["cases"]
    assert case["recordings"]["replaced"] == 1 and case["recordings"]["committed"] is True
    # Every call, replayed or forwarded, is a tool call of the trace, with its answer.
    trace = [
        json.loads(line)
        for line in (only_run_dir(Path("upd")) / "run.jsonl").read_text().splitlines()
    ]
    calls = [e["args"]["q"] for e in trace if e["type"] == "tool_call"]
    assert calls == ["alpha", "BETA", "gamma"]
    [output] = [e["output"] for e in trace if e["type"] == "final_output"]
    assert output == {"texts": ["found alpha", "found BETA", "found gamma"]}

    # The updated recording replays the new calls, with no server behind it.
    run(suite, "replay", capsys)
    assert server_calls(tmp_path) == []


@TRANSPORTS
def test_a_recording_no_call_used_is_dropped_or_kept_with_keep_unused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], transport: str
) -> None:
    suite = make_suite(tmp_path, transport)
    recorded(tmp_path, suite, capsys, transport)
    before = cassette(suite).read_bytes()
    old = call_lines(cassette(suite))

    set_input(suite, ["alpha", "gamma"])
    run(suite, "keep", capsys, "--mode", "update", "--keep-unused")
    assert server_calls(tmp_path) == []
    kept = call_lines(cassette(suite))
    assert list(kept) == ["alpha", "gamma", "beta"]  # the unused one after the others
    assert kept == old  # every line as it was
    assert mcp_review("keep")["counts"]["dropped"] == 0

    cassette(suite).write_bytes(before)
    summary = run(suite, "drop", capsys, "--mode", "update")
    assert server_calls(tmp_path) == []
    dropped = call_lines(cassette(suite))
    assert list(dropped) == ["alpha", "gamma"]
    assert dropped == {q: old[q] for q in ("alpha", "gamma")}
    block = mcp_review("drop")
    assert block["counts"]["dropped"] == 1 and block["counts"]["replaced"] == 0
    [removed] = [r for r in block["recordings"] if r["status"] == "removed"]
    assert removed["recording"] == "tool search" and removed["new_line"] is None
    assert summary["cases"][0]["recordings"]["dropped"] == 1


@TRANSPORTS
def test_a_case_that_fails_leaves_the_old_mcp_recording_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], transport: str
) -> None:
    suite = make_suite(tmp_path, transport)
    recorded(tmp_path, suite, capsys, transport)
    before = cassette(suite).read_bytes()

    set_input(suite, ["alpha", "BETA"], fail=True)
    summary = run(suite, "failed", capsys, "--mode", "update", code=1)
    assert server_calls(tmp_path) == ['search {"q": "BETA"}']  # it did run
    assert cassette(suite).read_bytes() == before
    [case] = summary["cases"]
    assert case["status"] == "error" and case["recordings"]["committed"] is False


@TRANSPORTS
def test_an_mcp_miss_names_the_nearest_line_the_first_difference_and_the_update_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], transport: str
) -> None:
    suite = make_suite(tmp_path, transport)
    recorded(tmp_path, suite, capsys, transport)
    lines = cassette(suite).read_bytes().splitlines()
    [line] = [n for n, raw in enumerate(lines, start=1) if b'"beta"' in raw]

    set_input(suite, ["alpha", "betb", "gamma"])
    summary = run(suite, "miss", capsys, code=1)
    assert server_calls(tmp_path) == []
    [case] = summary["cases"]
    assert case["failure_kind"] == "cassette_mismatch"
    reason = case["failure_reason"]
    # The first words stay what they were; the explanation and the command follow.
    assert "cassette mismatch: no unused recording of tools/call search" in reason
    assert (
        f'Nearest recording: line {line}; first difference at args.q: recorded "beta", '
        'requested "betb".'
    ) in reason
    assert reason.endswith("\nTo update just this case: trialrun run suite --mode update --case t1")


@pytest.mark.parametrize("calls_the_tool", [True, False])
def test_a_recording_made_inside_a_tool_the_case_called_is_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], calls_the_tool: bool
) -> None:
    suite = make_suite(tmp_path, "stdio")
    recorded(tmp_path, suite, capsys, "stdio")
    # The tool's body made an MCP call while recording; update answers the tool from its
    # cassette without running the body, so nothing asks for that recording again.
    inner = call_lines(cassette(suite))["beta"].replace(b'"beta"', b'"inner"')
    inner = inner.replace(b'"tool": "search"', b'"inside_tool": "lookup", "tool": "search"')
    with cassette(suite).open("ab") as handle:
        handle.write(inner)
    lookup = {"tool": "lookup", "args": {"id": 1}, "ok": True, "result": 7, "error": None}
    (suite / "cassettes" / "t1.jsonl").write_text(json.dumps(lookup) + "\n", encoding="utf-8")
    module = f"lookup_{abs(hash(str(tmp_path))) % 10**8}"  # each test imports its own module
    (suite / f"{module}.py").write_text("TOOLS = {'lookup': lambda args: 7}\n", encoding="utf-8")
    config = (suite / "suite.yaml").read_text(encoding="utf-8")
    registry = f"tool_registry: [lookup]\ntool_module: {module}"
    (suite / "suite.yaml").write_text(
        config.replace("tool_registry: []", registry), encoding="utf-8"
    )

    set_input(suite, ["alpha", "beta", "gamma"], lookup=calls_the_tool)
    run(suite, "upd", capsys, "--mode", "update")
    assert server_calls(tmp_path) == []
    kept = call_lines(cassette(suite))
    if calls_the_tool:
        assert list(kept) == ["alpha", "beta", "gamma", "inner"]
        assert kept["inner"] == inner
    else:  # a tool the case no longer calls: its body's recording goes like any other
        assert list(kept) == ["alpha", "beta", "gamma"]
