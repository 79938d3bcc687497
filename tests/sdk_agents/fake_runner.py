"""The runner's side of the fd channel, small and strict, for testing the agent SDK.

It speaks the protocol of docs/sdk.md over a socketpair: ``task_start`` first; a ``tool_call`` is
answered from the cassette (replay) or with ``tool_run`` when the agent holds the tool (record,
live), after which the very next message must be the ``tool_report`` (anything else is recorded
as a protocol violation, which is how the tests see that the SDK never interleaves messages).
``serve`` runs on a socket in a thread (for in-process sessions); ``run_agent`` starts a real
agent process with the other end as ``TRIALRUN_FD``.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SRC = Path(__file__).resolve().parents[2] / "src"


@dataclass
class Served:
    """What the fake runner saw and did during one conversation."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    """Every message the agent sent, in order."""
    recorded: list[dict[str, Any]] = field(default_factory=list)
    """Cassette entries: {tool, args, ok, result, error}, in call order."""
    output: dict[str, Any] | None = None
    violations: list[str] = field(default_factory=list)
    ended_by: str = ""

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [m for m in self.messages if m["type"] == kind]

    def tool_sequence(self) -> list[str]:
        return [m["name"] for m in self.of_type("tool_call")]


@dataclass
class AgentRun:
    served: Served
    returncode: int
    stdout: str
    stderr: str


class FakeRunner:
    """``mode``: replay | record | live. ``cassette``: entries replay answers from (consumed once).

    ``tools``: implementations for calls the agent sends with ``local: false`` in record/live.
    ``stop_after``: close the channel when that many tool calls arrived (the runner "goes away").
    ``hold_answers``: each first answer to a tool call waits until ``release`` is set (a slow
    runner); ``call_arrived`` is set as a tool call arrives, so a test knows its call is out.
    """

    def __init__(
        self,
        mode: str,
        cassette: Sequence[Mapping[str, Any]] = (),
        tools: Mapping[str, Callable[..., Any]] | None = None,
        stop_after: int | None = None,
        hold_answers: bool = False,
    ) -> None:
        self.mode = mode
        self.cassette = [dict(e) for e in cassette]
        self.tools = dict(tools or {})
        self.stop_after = stop_after
        self.hold_answers = hold_answers
        self.release = threading.Event()
        self.call_arrived = threading.Event()

    # -- in-process --------------------------------------------------------------------------

    def start(
        self, sock: socket.socket, *, task_input: Any, task_id: str = "t1"
    ) -> tuple[threading.Thread, Served]:
        served = Served()
        thread = threading.Thread(
            target=self.serve, args=(sock, task_id, task_input, served), daemon=True
        )
        thread.start()
        return thread, served

    def serve(self, sock: socket.socket, task_id: str, task_input: Any, served: Served) -> None:
        sock.settimeout(60)
        reader = sock.makefile("rb")
        try:
            self._send(sock, {"type": "task_start", "task_id": task_id, "input": task_input})
            calls = 0
            while True:
                message = self._read(reader)
                if message is None:
                    served.ended_by = "eof"
                    return
                served.messages.append(message)
                kind = message["type"]
                if kind == "final_output":
                    served.output = message["output"]
                    served.ended_by = "final_output"
                    return
                if kind == "task_error":
                    served.ended_by = "task_error"
                    return
                if kind == "tool_call":
                    calls += 1
                    if self.stop_after is not None and calls > self.stop_after:
                        served.ended_by = "stopped"
                        return
                    self._tool_call(sock, reader, message, served)
                elif kind not in ("log", "usage"):
                    served.violations.append(f"unexpected message {kind!r}")
        finally:
            reader.close()
            sock.close()

    # -- a real agent process ----------------------------------------------------------------

    def run_agent(
        self,
        argv: Sequence[str],
        *,
        task_input: Any,
        env: Mapping[str, str] | None = None,
        timeout: float = 60,
    ) -> AgentRun:
        runner_end, agent_end = socket.socketpair()
        child_env = dict(os.environ)
        child_env.update(env or {})
        child_env["TRIALRUN_FD"] = str(agent_end.fileno())
        child_env["TRIALRUN_MODE"] = self.mode
        child_env["PYTHONPATH"] = os.pathsep.join(
            [str(SRC), *filter(None, [child_env.get("PYTHONPATH")])]
        )
        proc = subprocess.Popen(
            list(argv),
            pass_fds=(agent_end.fileno(),),
            env=child_env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        agent_end.close()
        served = Served()
        server = threading.Thread(
            target=self.serve, args=(runner_end, "t1", task_input, served), daemon=True
        )
        server.start()
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = proc.communicate()
            raise AssertionError(f"agent timed out; stderr:\n{stderr}") from None
        server.join(timeout)
        return AgentRun(served, proc.returncode, stdout, stderr)

    # -- protocol ----------------------------------------------------------------------------

    def _tool_call(
        self, sock: socket.socket, reader: Any, call: dict[str, Any], served: Served
    ) -> None:
        call_id = call["call_id"]
        self.call_arrived.set()
        if self.hold_answers:
            self.release.wait(60)
        if self.mode == "replay":
            entry = self._take(call["name"], call["args"])
            if entry is None:
                served.violations.append(f"cassette mismatch: {call['name']} {call['args']}")
                outcome = {"ok": False, "result": None, "error": "cassette mismatch"}
            else:
                outcome = {k: entry.get(k) for k in ("ok", "result", "error")}
        elif call.get("local"):
            self._send(sock, {"type": "tool_run", "call_id": call_id})
            report = self._read(reader)
            if report is None:
                return
            served.messages.append(report)
            if report["type"] != "tool_report" or report.get("call_id") != call_id:
                served.violations.append(f"expected tool_report for {call_id}, got {report}")
                return
            outcome = {k: report.get(k) for k in ("ok", "result", "error")}
        else:
            outcome = self._run_here(call)
        served.recorded.append({"tool": call["name"], "args": call["args"], **outcome})
        self._send(sock, {"type": "tool_result", "call_id": call_id, **outcome})

    def _run_here(self, call: dict[str, Any]) -> dict[str, Any]:
        implementation = self.tools.get(call["name"])
        if implementation is None:
            return {"ok": False, "result": None, "error": f"no tool {call['name']}"}
        try:
            return {"ok": True, "result": implementation(call["args"]), "error": None}
        except Exception as exc:
            return {"ok": False, "result": None, "error": str(exc)}

    def _take(self, name: str, args: Any) -> dict[str, Any] | None:
        key = json.dumps(args, sort_keys=True)
        for index, entry in enumerate(self.cassette):
            if entry["tool"] == name and json.dumps(entry["args"], sort_keys=True) == key:
                return self.cassette.pop(index)
        return None

    @staticmethod
    def _send(sock: socket.socket, message: Mapping[str, Any]) -> None:
        with contextlib.suppress(OSError):  # the agent went away; the read loop sees it
            sock.sendall(json.dumps(message).encode() + b"\n")

    @staticmethod
    def _read(reader: Any) -> dict[str, Any] | None:
        try:
            line = reader.readline()
        except OSError:
            return None
        if not line:
            return None
        message: dict[str, Any] = json.loads(line)
        return message


def python_agent(script: Path, *args: str) -> list[str]:
    return [sys.executable, str(script), *args]
