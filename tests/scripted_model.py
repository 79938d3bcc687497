"""A scripted OpenAI chat-completions model on loopback: the stand-in the templates record against.

Its policy is fixed: with no tool result yet, it calls ``search_docs`` with the user's text; once
a tool result is in the conversation, it answers with a JSON object ``{"category", "reply"}``
built from that result. Tool results arrive as JSON (LangChain) or as a Python repr (the OpenAI
Agents SDK sends ``str(result)``); both are read. Run as a script to serve on a free port (the
URL is the first line printed); the bundled template recordings were made this way.
"""

from __future__ import annotations

import ast
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ScriptedModel:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self._server: ThreadingHTTPServer | None = None

    def start(self) -> str:
        owner = self

        class Handler(_Handler):
            model = owner

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


class _Handler(BaseHTTPRequestHandler):
    model: ScriptedModel

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        self.model.requests.append(body)
        if not self.path.endswith("/chat/completions"):
            self._send(404, {"error": {"message": f"not scripted: {self.path}"}})
            return
        self._send(200, _completion(body))

    def _send(self, status: int, data: Any) -> None:
        payload = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


def _completion(body: dict[str, Any]) -> dict[str, Any]:
    messages = body["messages"]
    tool_results = [m for m in messages if m.get("role") == "tool"]
    if not tool_results:
        question = next(m["content"] for m in reversed(messages) if m.get("role") == "user")
        arguments = json.dumps({"q": _text(question)})
        call = {"id": "call_1", "type": "function"}
        call["function"] = {"name": "search_docs", "arguments": arguments}
        message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
        finish = "tool_calls"
    else:
        found = _read_result(_text(tool_results[-1]["content"]))
        hits = found.get("hits") or []
        answer = {
            "category": "account" if hits else "other",
            "reply": hits[0]["text"] if hits else "A support engineer will get back to you.",
        }
        message = {"role": "assistant", "content": json.dumps(answer)}
        finish = "stop"
    prompt_tokens = len(json.dumps(messages)) // 4
    completion_tokens = len(json.dumps(message)) // 4
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": 1_790_000_000,
        "model": body.get("model", "gpt-4o-mini"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content)


def _read_result(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        value = ast.literal_eval(text)
    return value if isinstance(value, dict) else {}


if __name__ == "__main__":
    model = ScriptedModel()
    print(model.start(), flush=True)
    threading.Event().wait() if sys.argv[1:] != ["--once"] else None
