"""Connects with bare sockets, ignoring every proxy variable, then reports what happened.

Input: ``{"targets": [[host, port], ...], "child": bool, "gateway": bool, "fail_on_error": bool}``.
``child``: a child process tries the first target too. ``gateway``: also the port of
``OPENAI_BASE_URL``. Output: ``{"results": ["<host>:<port> connected|<error>", ...]}``; with
``fail_on_error`` a refused connection ends the agent with its error on stderr instead.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from urllib.parse import urlsplit

from _jsonl import final, task_input

TRY = """
import socket, sys
s = socket.socket(socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET)
try:
    s.connect((sys.argv[1], int(sys.argv[2])))
    print("connected")
except OSError as exc:
    print(f"{type(exc).__name__}: {exc}")
"""


def attempt(host: str, port: int) -> str:
    done = subprocess.run(
        [sys.executable, "-c", TRY, host, str(port)], capture_output=True, text=True, check=True
    )
    return f"{host}:{port} {done.stdout.strip()}"


def connect(host: str, port: int) -> str:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    try:
        sock.connect((host, port))
    except OSError as exc:
        if given.get("fail_on_error"):
            sys.exit(f"agent: cannot reach {host}:{port}: {exc}")
        return f"{host}:{port} {type(exc).__name__}: {exc}"
    finally:
        sock.close()
    return f"{host}:{port} connected"


given = task_input()
targets = [(str(host), int(port)) for host, port in given.get("targets", [])]
if given.get("gateway"):
    gateway = urlsplit(os.environ["OPENAI_BASE_URL"])
    targets.append((str(gateway.hostname), int(gateway.port or 80)))
results = [connect(host, port) for host, port in targets]
if given.get("child"):
    results.append("child " + attempt(*targets[0]))
final({"results": results})
