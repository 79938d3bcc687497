"""Hangs up on the TRIALRUN_FD channel in the middle of the protocol, as a broken agent does.

Behaviour by argv[1]:
  unread        waits until task_start is on its socket, then exits with code 1 without reading
                it (the kernel then resets the runner's end: what a failing import looks like)
  unread-alive  asks to run a tool itself, closes its socket with the tool_run unread and keeps
                running
  partial       reads task_start, writes half a message and exits with code 1
  unread-for ID behaves as ``unread`` when the waiting task_start is case ID's (it peeks without
                reading), else answers at once: agents may start in any order
"""

import json
import os
import select
import socket
import sys
import time

mode = sys.argv[1]
sock = socket.socket(fileno=int(os.environ["TRIALRUN_FD"]))
print("fake agent: starting", file=sys.stderr, flush=True)


def wait_readable() -> None:
    select.select([sock], [], [], 10)


if mode == "unread-for":
    wait_readable()
    waiting = sock.recv(65536, socket.MSG_PEEK)
    ours = f'"case":"{sys.argv[2]}"'.encode() in waiting.replace(b" ", b"")
    mode = "unread" if ours else "answer"
if mode == "unread":
    wait_readable()
    print("ModuleNotFoundError: No module named 'agents'", file=sys.stderr, flush=True)
    sys.exit(1)
stream = sock.makefile("rwb", buffering=0)
task = json.loads(stream.readline())
if mode == "answer":
    stream.write(json.dumps({"type": "final_output", "output": task["input"]}).encode() + b"\n")
    sys.exit(0)
if mode == "partial":
    stream.write(b'{"type": "tool_call", "name": "look')
    print("fake agent: dying mid-message", file=sys.stderr, flush=True)
    sys.exit(1)
if mode == "unread-alive":
    call = {"type": "tool_call", "name": "lookup", "call_id": "c1", "args": {}, "local": True}
    stream.write(json.dumps(call).encode() + b"\n")
    wait_readable()
    stream.close()
    sock.close()
    print("fake agent: hung up, still running", file=sys.stderr, flush=True)
    time.sleep(30)
