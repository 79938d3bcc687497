"""Speaks the protocol on the TRIALRUN_FD socket, printing freely on stdout meanwhile.

Behaviour by argv[1]:
  local       one local tool call ``lookup``; runs the tool itself when asked (tool_run)
  no-report   asks for a local call and never reports
  stray       sends a tool_report nobody asked for
  final-now   answers tool_run with final_output instead of a report
  noise       writes a non-JSON line on the channel
  exit        exits with code 3 before final_output
"""

import json
import os
import socket
import sys
import time

mode = sys.argv[1]
sock = socket.socket(fileno=int(os.environ["TRIALRUN_FD"]))
stream = sock.makefile("rwb", buffering=0)


def send(message: dict) -> None:
    stream.write((json.dumps(message) + "\n").encode())


def receive() -> dict:
    return json.loads(stream.readline())


print("a framework banner on stdout: not protocol", flush=True)
print("warming up", file=sys.stderr, flush=True)
task = receive()
assert task["type"] == "task_start", task
if mode == "noise":
    stream.write(b"this is not json\n")
    time.sleep(5)
if mode == "exit":
    sys.exit(3)
if mode == "stray":
    send({"type": "tool_report", "call_id": "nope", "ok": True, "result": 1})
    time.sleep(5)
send({"type": "tool_call", "name": "lookup", "call_id": "c1", "args": task["input"], "local": True})
reply = receive()
if reply["type"] == "tool_run":
    if mode == "no-report":
        time.sleep(30)
    if mode == "final-now":
        send({"type": "final_output", "output": {"early": True}})
        time.sleep(5)
    print("running the real lookup", flush=True)
    send({"type": "log", "level": "info", "message": "tool running"})
    real = {"source": "real", "answer": task["input"]["q"].upper()}
    send({"type": "tool_report", "call_id": "c1", "ok": True, "result": real, "error": None})
    reply = receive()
assert reply["type"] == "tool_result", reply
send(
    {
        "type": "final_output",
        "output": {"seen": reply["result"], "mode": os.environ.get("TRIALRUN_MODE")},
    }
)
