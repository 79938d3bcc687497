"""MCP calls and HTTP exchanges a tool's body makes while recording: marked, and not unused.

An SDK agent holds one tool, ``research``, whose real body (record only: in replay it raises)
calls an MCP server through the proxy trialrun hands the agent and fetches a page through the
HTTP recorder. Asked to, the agent also makes the same two kinds of call itself, outside any
tool. Record marks the body's recordings ``inside_tool: research`` and leaves the agent's own
unmarked; replay answers ``research`` from the tool cassette and must not report the body's
recordings as unused, but must still report an unused recording the agent itself made, and the
body's own when the case no longer calls the tool.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from builders import run_trialrun
from http_upstream import ScriptedApi

pytestmark = pytest.mark.slow

SERVER = r"""
import json, sys

for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    result = {}
    if message["method"] == "tools/call":
        q = message["params"]["arguments"]["q"]
        result = {"content": [{"type": "text", "text": "docs for " + q}], "isError": False}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}) + "\n")
    sys.stdout.flush()
"""

AGENT = r"""
import json, os, subprocess, sys, urllib.request
import trialrun.agent as sdk

class Mcp:
    # Raw JSON-RPC to the server "docs" as trialrun hands it: a stdio proxy to start, or a URL.
    def __init__(self):
        self.entry = json.loads(os.environ["TRIALRUN_MCP_SERVERS"])["mcpServers"]["docs"]
        self.proxy = None
        self.last_id = 0

    def call(self, q):
        self.last_id += 1
        request = {"jsonrpc": "2.0", "id": self.last_id, "method": "tools/call",
                   "params": {"name": "search_docs", "arguments": {"q": q}}}
        if self.entry.get("type") == "http":
            post = urllib.request.Request(
                self.entry["url"], data=json.dumps(request).encode(),
                headers={"Content-Type": "application/json",
                         "Accept": "application/json, text/event-stream"})
            with urllib.request.urlopen(post, timeout=60) as answer:
                reply = json.loads(answer.read())
        else:
            if self.proxy is None:
                self.proxy = subprocess.Popen(
                    [self.entry["command"], *self.entry["args"]],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            self.proxy.stdin.write((json.dumps(request) + "\n").encode())
            self.proxy.stdin.flush()
            reply = json.loads(self.proxy.stdout.readline())
        return reply["result"]["content"][0]["text"]

    def close(self):
        if self.proxy is not None:
            self.proxy.stdin.close()
            self.proxy.wait(timeout=60)

def fetch(url):
    with urllib.request.urlopen(url, timeout=60) as answer:
        return json.loads(answer.read())

mcp = Mcp()
session = sdk.connect()
task = session.input

@sdk.tool
def research(topic: str) -> dict:
    if os.environ.get("TRIALRUN_MODE") == "replay":
        raise RuntimeError("the real research ran in replay")
    return {"docs": mcp.call(topic), "page": fetch(task["api"] + "/items?page=" + topic)}

output = {}
if task.get("direct"):
    output["docs"] = mcp.call("direct")
    output["page"] = fetch(task["api"] + "/items?page=direct")
if task.get("research", True):
    output["research"] = research("body")
mcp.close()
session.final_output(output)
"""

NO_PROXIES: dict[str, str | None] = {
    name: None for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")
}


def make_suite(root: Path, transport: str, api: str) -> Path:
    suite = root / "suite"
    (suite / "cases").mkdir(parents=True)
    (suite / "agent.py").write_text(AGENT, encoding="utf-8")
    (suite / "docs_server.py").write_text(SERVER, encoding="utf-8")
    (suite / "suite.yaml").write_text(
        "suite_name: bodies\n"
        f"agent_command: {json.dumps([sys.executable, 'agent.py'])}\n"
        "agent_channel: fd\nmode: replay\ncases_path: cases\ntool_registry: [research]\n"
        "mcp_servers:\n  docs:\n"
        f"    command: {json.dumps([sys.executable, 'docs_server.py'])}\n"
        f"    transport: {transport}\n",
        encoding="utf-8",
    )
    set_input(suite, {"api": api, "direct": True})
    return suite


def set_input(suite: Path, task: dict[str, Any]) -> None:
    case = {"id": "t1", "input": task, "cassette": "cassettes/t1.jsonl"}
    (suite / "cases" / "t1.yaml").write_text(json.dumps(case), encoding="utf-8")


def task_of(suite: Path) -> dict[str, Any]:
    case = json.loads((suite / "cases" / "t1.yaml").read_text(encoding="utf-8"))
    task = case["input"]
    assert isinstance(task, dict)
    return task


def run(suite: Path, mode: str) -> tuple[dict[str, Any], list[str], str]:
    """The case's summary, trialrun's notes in its log, and the console output."""
    out = suite.parent / f"out-{mode}"
    shutil.rmtree(out, ignore_errors=True)
    done = run_trialrun(
        "run", suite, "--mode", mode, "--no-baseline", "--out", out,
        cwd=suite.parent, env=NO_PROXIES, timeout=180,
    )  # fmt: skip
    text = done.stdout + done.stderr
    assert done.returncode in (0, 1), text
    [run_dir] = (out / "bodies").iterdir()
    [case] = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))["cases"]
    lines = (run_dir / "run.jsonl").read_text(encoding="utf-8").splitlines()
    events = [json.loads(line) for line in lines]
    notes = [
        e["message"]
        for e in events
        if e["type"] == "log" and (e.get("data") or {}).get("source") == "trialrun"
    ]
    return case, notes, text


def lines_of(path: Path) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return [line for line in lines if "kind" not in line and "format" not in line]


RECORD_NOTE = (
    "calls made by tool bodies: 1 MCP call inside 'research', 1 HTTP exchange inside "
    "'research'; replay answers those tools from the tool cassette and never runs their bodies, "
    "so it will not repeat these calls"
)
REPLAY_NOTE = (
    "recordings made by tool bodies while recording: 1 MCP call inside 'research', 1 HTTP "
    "exchange inside 'research'; replay answered those tools from the tool cassette, so it "
    "never asked for them (not unused)"
)


@pytest.fixture(scope="module", params=["stdio", "http"])
def recorded(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Path, str]]:
    """A suite recorded once per transport (its API stopped afterwards), and the record log."""
    api = ScriptedApi()
    try:
        suite = make_suite(tmp_path_factory.mktemp(request.param), request.param, api.url)
        case, notes, text = run(suite, "record")
        assert case["status"] == "pass", text
        assert sorted(api.requests) == [("GET", "/items?page=body"), ("GET", "/items?page=direct")]
    finally:
        api.stop()
    [note] = notes
    yield suite, note


@pytest.fixture
def suite(recorded: tuple[Path, str], tmp_path: Path) -> Path:
    """This test's own copy of the recorded suite."""
    return Path(shutil.copytree(recorded[0], tmp_path / "suite"))


def test_record_marks_the_calls_of_the_tool_body_only(
    recorded: tuple[Path, str], suite: Path
) -> None:
    cassettes = suite / "cassettes"
    calls = [line for line in lines_of(cassettes / "t1.mcp-docs.jsonl") if "tool" in line]
    assert sorted((c["args"]["q"], c.get("inside_tool")) for c in calls) == [
        ("body", "research"),
        ("direct", None),
    ]
    exchanges = lines_of(cassettes / "t1.http.jsonl")
    assert sorted((e["url"].rsplit("=", 1)[1], e.get("inside_tool")) for e in exchanges) == [
        ("body", "research"),
        ("direct", None),
    ]
    assert recorded[1] == RECORD_NOTE


def test_replay_leaves_the_body_recordings_out_of_the_unused_ones(suite: Path) -> None:
    case, notes, text = run(suite, "replay")
    assert (case["status"], case["unused_recordings"]) == ("pass", 0), text
    assert "Unused recordings" not in text
    assert notes == [REPLAY_NOTE]


def test_an_unused_call_the_agent_made_itself_still_warns(suite: Path) -> None:
    set_input(suite, {**task_of(suite), "direct": False})
    case, notes, text = run(suite, "replay")
    assert case["status"] == "pass", text
    api = task_of(suite)["api"]
    assert case["unused_recordings_by_tool"] == {
        "mcp:docs/search_docs": 1,
        f"http:GET {api}/items?page=direct": 1,
    }
    assert "Unused recordings (they do not fail a case):" in text
    assert notes == [REPLAY_NOTE]


def test_the_body_recordings_are_unused_when_the_tool_is_no_longer_called(suite: Path) -> None:
    set_input(suite, {**task_of(suite), "research": False})
    case, notes, text = run(suite, "replay")
    assert case["status"] == "pass", text
    api = task_of(suite)["api"]
    assert case["unused_recordings_by_tool"] == {
        "research": 1,
        "mcp:docs/search_docs": 1,
        f"http:GET {api}/items?page=body": 1,
    }
    assert notes == []


def test_without_the_marks_the_body_recordings_read_as_unused(suite: Path) -> None:
    """What the marks change: the same recordings made before them are reported unused."""
    for name in ("t1.mcp-docs.jsonl", "t1.http.jsonl"):
        path = suite / "cassettes" / name
        lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        for line in lines:
            line.pop("inside_tool", None)
        path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    case, notes, text = run(suite, "replay")
    assert case["status"] == "pass", text
    assert case["unused_recordings"] == 2
    assert notes == []
