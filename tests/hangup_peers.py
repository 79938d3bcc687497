"""Peers that hang up the way real ones do: raw sockets that reset (SO_LINGER 0) or stop midway.

``reset(sock)`` closes a TCP socket with an RST instead of a FIN, as a killed process or an SDK
dropping its keep-alive pool can. ``RawUpstream`` is a one-trick HTTP upstream for the gateway.
"""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import threading
import time

ANSWER = json.dumps(
    {
        "id": "chatcmpl-raw",
        "object": "chat.completion",
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
).encode()


def reset(sock: socket.socket) -> None:
    """Close with an RST: the peer's next read or write fails with ECONNRESET or EPIPE."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def http_post(path: str, body: bytes, *, keep_alive: bool = True) -> bytes:
    """A raw HTTP/1.1 POST with a JSON body and an API key."""
    connection = "keep-alive" if keep_alive else "close"
    head = (
        f"POST {path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer k\r\n"
        f"Content-Type: application/json\r\nConnection: {connection}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def read_response(sock: socket.socket) -> bytes:
    """One whole response with a Content-Length (head and body)."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += _recv(sock)
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        body += _recv(sock)
    return head + b"\r\n\r\n" + body


def _recv(sock: socket.socket) -> bytes:
    chunk = sock.recv(65536)
    if not chunk:
        raise ConnectionError("the server closed the connection before the whole response")
    return chunk


class RawUpstream:
    """An upstream that reads one request per connection and then, by ``behaviour``:

    ``slow``          waits until ``release`` is set, then answers a chat completion whole
    ``reset-midway``  sends the head and half the body, then resets
    ``reset-at-once`` resets without answering

    ``asked`` is set once a request's head has arrived; ``answered`` once the gateway, having
    read a slow answer to its end, closed the connection.
    """

    def __init__(self, behaviour: str) -> None:
        self.behaviour = behaviour
        self.asked = threading.Event()
        self.release = threading.Event()
        self.answered = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}"

    def close(self) -> None:
        self._listener.close()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(connection,), daemon=True).start()

    def _answer(self, connection: socket.socket) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            data += connection.recv(65536)
        self.asked.set()
        head = (
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % len(ANSWER)
        )
        if self.behaviour == "reset-at-once":
            reset(connection)
        elif self.behaviour == "reset-midway":
            connection.sendall(head + ANSWER[: len(ANSWER) // 2])
            time.sleep(0.1)
            reset(connection)
        else:
            self.release.wait(60)
            connection.sendall(head + ANSWER)
            connection.settimeout(60)
            with contextlib.suppress(OSError):
                while connection.recv(65536):
                    pass
            self.answered.set()
            connection.close()
