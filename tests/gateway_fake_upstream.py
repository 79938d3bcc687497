"""A loopback stand-in for api.openai.com and api.anthropic.com, for the gateway's tests.

It answers chat completions, responses, embeddings, messages and count_tokens like the real APIs,
streams with realistic SSE event sequences (sent chunk by chunk, chunked transfer encoding), and
puts fresh random ids in every answer, so a replay that returns the recorded ids proves it came
from the cassette. Replies echo the last user text ("echo: <text>"); token counts are word
counts. Requests without credentials get a 401. Run it as a script to serve on a free port (its
URL is the first line printed).
"""

from __future__ import annotations

import base64
import json
import struct
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: Any


class FakeUpstream:
    """Start with ``start()`` (returns the URL), stop with ``stop()``."""

    def __init__(self, *, stream_gate: threading.Event | None = None) -> None:
        self.received: list[Received] = []
        self.stream_gate = stream_gate
        """When set, streams pause after their first event until the gate opens."""
        self.gate_timed_out = False
        self.fail_next: int | None = None
        """Answer the next request with this HTTP status (rate limits, outages)."""
        self._server: ThreadingHTTPServer | None = None

    def start(self) -> str:
        upstream = self

        class Handler(_Handler):
            owner = upstream

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self.url

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    owner: FakeUpstream

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(length) or b"{}")
        path = self.path.split("?")[0]
        self.owner.received.append(Received(self.path, dict(self.headers.items()), body))
        if self.owner.fail_next is not None:
            status, self.owner.fail_next = self.owner.fail_next, None
            error = {"error": {"message": "slow down", "type": "rate_limit", "code": None}}
            return self._json(status, error, {"retry-after-ms": "5", "x-request-id": _id("req_")})
        if path.startswith("/v1/messages"):
            # This anthropic SDK sends "Authorization: Bearer"; older ones send x-api-key.
            if not (self.headers.get("x-api-key") or self.headers.get("Authorization")):
                return self._json(401, _anthropic_error("authentication_error", "no key"))
        elif not self.headers.get("Authorization", "").startswith("Bearer "):
            return self._json(401, {"error": {"message": "no key", "type": "auth"}})
        answer = _ANSWERS.get(path)
        if answer is None:
            return self._json(404, {"error": {"message": f"no route {path}", "type": "nf"}})
        answer(self, body)

    # -- writing -------------------------------------------------------------------------

    def _json(self, status: int, data: Any, headers: dict[str, str] | None = None) -> None:
        raw = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        for name, value in (headers or {"x-request-id": _id("req_")}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(raw)

    def _stream(self, events: list[tuple[str | None, Any]]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("x-request-id", _id("req_"))
        self.end_headers()
        for number, (event, data) in enumerate(events):
            text = "" if event is None else f"event: {event}\n"
            text += f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n"
            raw = text.encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(raw), raw))
            self.wfile.flush()
            gate = self.owner.stream_gate
            if number == 0 and gate is not None and not gate.wait(120):
                self.owner.gate_timed_out = True
        self.wfile.write(b"0\r\n\r\n")


def _id(prefix: str) -> str:
    return prefix + uuid.uuid4().hex[:24]


def _anthropic_error(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def _last_user_text(body: dict[str, Any]) -> str:
    items = body.get("messages") or body.get("input") or []
    if isinstance(items, str):
        return items
    for item in reversed(items):
        if isinstance(item, dict) and item.get("role", "user") == "user":
            return _text_of(item.get("content"))
    return ""


def _counts(body: dict[str, Any], reply: str) -> tuple[int, int]:
    prompt = json.dumps(body.get("messages") or body.get("input") or "")
    return len(prompt.split()) + 3, len(reply.split())


def _words(reply: str) -> list[str]:
    words = reply.split(" ")
    return [w if i == 0 else " " + w for i, w in enumerate(words)]


# -- OpenAI chat completions ---------------------------------------------------------------


def _chat(handler: _Handler, body: dict[str, Any]) -> None:
    reply = "echo: " + _last_user_text(body)
    tokens_in, tokens_out = _counts(body, reply)
    usage = {
        "prompt_tokens": tokens_in,
        "completion_tokens": tokens_out,
        "total_tokens": tokens_in + tokens_out,
        "prompt_tokens_details": {"cached_tokens": 2, "audio_tokens": 0},
    }
    base = {"id": _id("chatcmpl-"), "created": int(time.time()), "model": "gpt-4o-mini-2024-07-18",
            "system_fingerprint": "fp_" + uuid.uuid4().hex[:10]}  # fmt: skip
    if not body.get("stream"):
        message: dict[str, Any] = {"role": "assistant", "content": reply, "refusal": None}
        message["annotations"] = []
        choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": "stop"}
        handler._json(200, {**base, "object": "chat.completion", "choices": [choice],
                            "usage": usage, "service_tier": "default"})  # fmt: skip
        return
    chunk = {**base, "object": "chat.completion.chunk"}
    include_usage = (body.get("stream_options") or {}).get("include_usage")
    extra = {"usage": None} if include_usage else {}

    def delta(content: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": content, "logprobs": None, "finish_reason": finish}
        return {**chunk, "choices": [choice], **extra}

    events: list[tuple[str | None, Any]] = [
        (None, delta({"role": "assistant", "content": "", "refusal": None}))
    ]
    events += [(None, delta({"content": word})) for word in _words(reply)]
    events.append((None, delta({}, "stop")))
    if include_usage:
        events.append((None, {**chunk, "choices": [], "usage": usage}))
    events.append((None, "[DONE]"))
    handler._stream(events)


# -- OpenAI responses ----------------------------------------------------------------------


def _responses(handler: _Handler, body: dict[str, Any]) -> None:
    reply = "echo: " + _last_user_text(body)
    tokens_in, tokens_out = _counts(body, reply)
    response_id, item_id = _id("resp_"), _id("msg_")
    usage = {
        "input_tokens": tokens_in,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": tokens_out,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": tokens_in + tokens_out,
    }
    part_done = {"type": "output_text", "text": reply, "annotations": [], "logprobs": []}
    item_done = {"id": item_id, "type": "message", "status": "completed", "role": "assistant",
                 "content": [part_done]}  # fmt: skip

    def response(status: str, output: list[Any], usage_now: Any) -> dict[str, Any]:
        return {
            "id": response_id, "object": "response", "created_at": int(time.time()),
            "status": status, "model": "gpt-4o-mini-2024-07-18", "output": output,
            "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "temperature": 1.0,
            "top_p": 1.0, "error": None, "incomplete_details": None,
            "instructions": body.get("instructions"), "metadata": {}, "usage": usage_now,
            "text": {"format": {"type": "text"}}, "truncation": "disabled", "store": True,
        }  # fmt: skip

    if not body.get("stream"):
        handler._json(200, response("completed", [item_done], usage))
        return
    item_added = {**item_done, "status": "in_progress", "content": []}
    part_added = {**part_done, "text": ""}
    where = {"item_id": item_id, "output_index": 0, "content_index": 0}
    steps: list[tuple[str, dict[str, Any]]] = [
        ("response.created", {"response": response("in_progress", [], None)}),
        ("response.in_progress", {"response": response("in_progress", [], None)}),
        ("response.output_item.added", {"output_index": 0, "item": item_added}),
        ("response.content_part.added", {**where, "part": part_added}),
    ]
    steps += [
        ("response.output_text.delta", {**where, "delta": word, "logprobs": []})
        for word in _words(reply)
    ]
    steps += [
        ("response.output_text.done", {**where, "text": reply, "logprobs": []}),
        ("response.content_part.done", {**where, "part": part_done}),
        ("response.output_item.done", {"output_index": 0, "item": item_done}),
        ("response.completed", {"response": response("completed", [item_done], usage)}),
    ]
    handler._stream(
        [
            (name, {"type": name, "sequence_number": n, **data})
            for n, (name, data) in enumerate(steps)
        ]
    )


# -- OpenAI embeddings ---------------------------------------------------------------------


def _embeddings(handler: _Handler, body: dict[str, Any]) -> None:
    inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
    data = []
    for index, text in enumerate(inputs):
        vector = [len(str(text)) / 100.0, 0.5, -0.25]
        if body.get("encoding_format") == "base64":
            encoded: Any = base64.b64encode(struct.pack("<3f", *vector)).decode()
        else:
            encoded = vector
        data.append({"object": "embedding", "index": index, "embedding": encoded})
    tokens = sum(len(str(text).split()) for text in inputs)
    handler._json(200, {"object": "list", "data": data, "model": "text-embedding-3-small",
                        "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})  # fmt: skip


# -- Anthropic messages --------------------------------------------------------------------


def _messages(handler: _Handler, body: dict[str, Any]) -> None:
    reply = "echo: " + _last_user_text(body)
    tokens_in, tokens_out = _counts(body, reply)
    message: dict[str, Any] = {
        "id": _id("msg_"), "type": "message", "role": "assistant",
        "model": "claude-sonnet-4-5-20250929", "content": [{"type": "text", "text": reply}],
        "stop_reason": "end_turn", "stop_sequence": None,
        "usage": {"input_tokens": tokens_in, "output_tokens": tokens_out,
                  "cache_creation_input_tokens": 0, "cache_read_input_tokens": 4},
    }  # fmt: skip
    if not body.get("stream"):
        handler._json(200, message, {"request-id": _id("req_")})
        return
    start = {**message, "content": [], "stop_reason": None,
             "usage": {**message["usage"], "output_tokens": 1}}  # fmt: skip
    events: list[tuple[str | None, Any]] = [
        ("message_start", {"type": "message_start", "message": start}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}}),
        ("ping", {"type": "ping"}),
    ]  # fmt: skip
    events += [
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": word}})
        for word in _words(reply)
    ]  # fmt: skip
    events += [
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta",
                           "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                           "usage": {"output_tokens": tokens_out}}),
        ("message_stop", {"type": "message_stop"}),
    ]  # fmt: skip
    handler._stream(events)


def _count_tokens(handler: _Handler, body: dict[str, Any]) -> None:
    handler._json(200, {"input_tokens": _counts(body, "")[0]})


_ANSWERS = {
    "/v1/chat/completions": _chat,
    "/v1/responses": _responses,
    "/v1/embeddings": _embeddings,
    "/v1/messages": _messages,
    "/v1/messages/count_tokens": _count_tokens,
}


if __name__ == "__main__":
    fake = FakeUpstream()
    print(fake.start(), flush=True)
    try:
        sys.stdin.read()  # serve until stdin closes
    finally:
        fake.stop()
