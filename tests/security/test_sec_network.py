"""A replayed agent reaches only its services (issue 30, docs/security.md).

Before the seal, a replayed agent that opened a bare socket (no proxy variable steers one)
reached any server it named, and its case passed. Each test runs the real command line on a
suite whose agent is a small program written here; the foreign server is the test's own
listener on 127.0.0.1, so nothing leaves the machine.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from trialrun.conversation.seal import probe

LAYERS = probe()

AGENT = r"""
import json, os, socket, subprocess, sys
task = json.loads(sys.stdin.readline())["input"]
# A helper in a session of its own, started before the agent connects, tries first.
subprocess.run([sys.executable, "-c", task["helper"]], start_new_session=True, check=False)
fds = sorted(os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")
             if os.path.exists(f"/proc/self/fd/{fd}"))
s = socket.socket()
try:
    s.connect(("127.0.0.1", task["port"]))
    s.sendall(b"leaked")
    got = "connected"
except OSError as exc:
    got = type(exc).__name__
print(json.dumps({"type": "final_output", "output": {"got": got, "fds": fds}}), flush=True)
"""

HELPER = "import socket; s = socket.socket(); s.settimeout(5); s.connect(('127.0.0.1', {port}))"


@pytest.mark.skipif(not LAYERS.seccomp, reason="this kernel has no seccomp user notification")
def test_a_bare_socket_reaches_nothing_and_the_case_fails_naming_it(tmp_path: Path) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.setblocking(False)
    port = server.getsockname()[1]
    suite = tmp_path / "suite"
    (suite / "cases").mkdir(parents=True)
    (suite / "agent.py").write_text(AGENT, encoding="utf-8")
    (suite / "c.jsonl").write_text("", encoding="utf-8")
    (suite / "suite.yaml").write_text(
        f"suite_name: s\nagent_command: [{json.dumps(sys.executable)}, agent.py]\n"
        "mode: replay\ncases_path: cases\ntool_registry: []\n",
        encoding="utf-8",
    )
    case = {
        "id": "c",
        "input": {"port": port, "helper": HELPER.format(port=port)},
        "cassette": "c.jsonl",
    }
    (suite / "cases" / "c.yaml").write_text(json.dumps(case), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "TRIALRUN_SEAL_LAYERS"}

    with server:
        done = subprocess.run(
            [sys.executable, "-m", "trialrun", "run", str(suite), "--out", str(tmp_path / "o")],
            cwd=suite,
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        with pytest.raises(BlockingIOError):  # not one connection reached the server
            server.accept()

    assert done.returncode == 1, done.stderr
    (run,) = (tmp_path / "o").glob("*/*")
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    (result,) = summary["cases"]
    assert result["failure_kind"] == "network_sealed"
    assert result["failure_reason"] == f"network: sealed: agent tried 127.0.0.1:{port}"
    events = [json.loads(line) for line in (run / "run.jsonl").read_text().splitlines()]
    (output,) = [e["output"] for e in events if e["type"] == "final_output"]
    assert output["got"] == "PermissionError"
    # The agent holds no seccomp listener: it cannot answer its own connects.
    assert not [fd for fd in output["fds"] if "seccomp" in fd], output["fds"]
