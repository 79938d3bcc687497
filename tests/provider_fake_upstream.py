"""A loopback stand-in for Azure OpenAI, Gemini, Bedrock and OpenAI's other endpoints.

Builds on gateway_fake_upstream (its OpenAI chat and embeddings answers and its writers) and
adds, each with the credential check of the real API and fresh random ids in every answer (so a
replay that returns the recorded ids came from the cassette):

* Azure: ``/openai/deployments/<d>/{chat/completions,embeddings}?api-version=...`` with an
  ``api-key`` header, and ``/openai/v1/...`` like OpenAI's;
* OpenAI: ``GET /v1/models[/<id>]``, ``POST /v1/moderations``, ``POST /v1/files`` (multipart),
  ``GET /v1/files``, ``DELETE /v1/files/<id>``;
* Gemini: ``/v1beta/models/<m>:generateContent``, ``:streamGenerateContent?alt=sse``,
  ``:countTokens`` and ``GET /v1beta/models``, keyed by ``x-goog-api-key`` or ``?key=``;
* Bedrock: ``/model/<id>/converse``, ``/converse-stream`` (an AWS event stream),
  ``/invoke`` (token counts in response headers), needing a SigV4-shaped ``Authorization`` and
  ``X-Amz-Date``.
"""

from __future__ import annotations

import json
import struct
import threading
import zlib
from email.parser import BytesParser
from email.policy import HTTP
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from gateway_fake_upstream import (
    FakeUpstream,
    Received,
    _chat,
    _embeddings,
    _Handler,
    _id,
    _text_of,
    _words,
)


class ProviderUpstream(FakeUpstream):
    """``start()`` returns the URL; ``received`` lists every request (method in ``path``'s
    ``Received.headers[':method']``)."""

    def __init__(self) -> None:
        super().__init__()
        self.files: dict[str, dict[str, Any]] = {}

    def start(self) -> str:
        upstream = self

        class Handler(_ProviderHandler):
            owner = upstream

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self.url


class _ProviderHandler(_Handler):
    owner: ProviderUpstream

    def do_POST(self) -> None:
        self._dispatch()

    def do_GET(self) -> None:
        self._dispatch()

    def do_DELETE(self) -> None:
        self._dispatch()

    def _dispatch(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        parts = urlsplit(self.path)
        # "/prefix": an upstream URL with a path prefix, as a corporate proxy might have.
        path, query = unquote(parts.path).removeprefix("/prefix"), parse_qs(parts.query)
        headers = {**dict(self.headers.items()), ":method": self.command}
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw
        self.owner.received.append(Received(self.path, headers, body))
        if path.startswith("/openai/"):
            return self._azure(path, query, body)
        if path.startswith("/v1beta/"):
            return self._gemini(path, query, body)
        if path.startswith("/model/"):
            return self._bedrock(path, body)
        if not self.headers.get("Authorization", "").startswith("Bearer "):
            return self._json(401, {"error": {"message": "no key", "type": "auth"}})
        return self._openai(path, raw)

    # -- Azure -----------------------------------------------------------------------------

    def _azure(self, path: str, query: dict[str, list[str]], body: Any) -> None:
        if not self.headers.get("api-key"):
            return self._json(401, {"error": {"code": "401", "message": "Access denied"}})
        if path.startswith("/openai/deployments/"):
            if "api-version" not in query:
                return self._json(404, {"error": {"code": "404", "message": "Resource not found"}})
            operation = path.split("/", 4)[4]
        else:
            operation = path.removeprefix("/openai/v1/")
        if operation == "chat/completions":
            return _chat(self, body)
        if operation == "embeddings":
            return _embeddings(self, body)
        return self._json(404, {"error": {"code": "404", "message": f"no route {path}"}})

    # -- OpenAI's other endpoints ----------------------------------------------------------

    def _openai(self, path: str, raw: bytes) -> None:
        files = self.owner.files
        if self.command == "GET" and path == "/v1/models":
            models = [{"id": m, "object": "model", "created": 1, "owned_by": "system"}
                      for m in ("gpt-4o-mini", "text-embedding-3-small")]  # fmt: skip
            return self._json(200, {"object": "list", "data": models})
        if self.command == "GET" and path.startswith("/v1/models/"):
            model = path.removeprefix("/v1/models/")
            return self._json(200, {"id": model, "object": "model", "created": 1,
                                    "owned_by": _id("org-")})  # fmt: skip
        if self.command == "POST" and path == "/v1/moderations":
            body = json.loads(raw)
            flagged = "attack" in json.dumps(body.get("input"))
            result = {"flagged": flagged, "categories": {"violence": flagged},
                      "category_scores": {"violence": 0.9 if flagged else 0.01}}  # fmt: skip
            return self._json(200, {"id": _id("modr-"), "model": "omni-moderation-latest",
                                    "results": [result]})  # fmt: skip
        if self.command == "POST" and path == "/v1/files":
            head = f"Content-Type: {self.headers['Content-Type']}\r\n\r\n".encode()
            message = BytesParser(policy=HTTP).parsebytes(head + raw)
            fields: dict[str, Any] = {}
            for part in message.iter_parts():
                name = part.get_param("name", header="content-disposition")
                fields[str(name)] = (part.get_filename(), part.get_payload(decode=True))
            filename, data = fields["file"]
            entry = {"id": _id("file-"), "object": "file", "bytes": len(data), "created_at": 1,
                     "filename": filename, "purpose": fields["purpose"][1].decode()}  # fmt: skip
            files[entry["id"]] = entry
            return self._json(200, entry)
        if self.command == "GET" and path == "/v1/files":
            return self._json(
                200, {"object": "list", "data": list(files.values()), "has_more": False}
            )
        if self.command == "DELETE" and path.startswith("/v1/files/"):
            file_id = path.removeprefix("/v1/files/")
            deleted = files.pop(file_id, None) is not None
            return self._json(200, {"id": file_id, "object": "file", "deleted": deleted})
        return self._json(404, {"error": {"message": f"no route {path}", "type": "nf"}})

    # -- Gemini ----------------------------------------------------------------------------

    def _gemini(self, path: str, query: dict[str, list[str]], body: Any) -> None:
        if not (self.headers.get("x-goog-api-key") or query.get("key")):
            error = {"code": 403, "message": "no key", "status": "PERMISSION_DENIED"}
            return self._json(403, {"error": error})
        if self.command == "GET" and path == "/v1beta/models":
            return self._json(200, {"models": [{"name": "models/gemini-2.5-flash"}]})
        model, _, method = path.removeprefix("/v1beta/models/").partition(":")
        contents = body.get("contents") if isinstance(body, dict) else None
        text = ""
        for content in contents or []:
            if isinstance(content, dict) and content.get("role", "user") == "user":
                text = _text_of(content.get("parts"))
        if method == "countTokens":
            return self._json(200, {"totalTokens": len(text.split()) + 1})
        reply = "echo: " + text
        prompt, answer = len(text.split()) + 2, len(reply.split())
        usage = {"promptTokenCount": prompt, "candidatesTokenCount": answer,
                 "thoughtsTokenCount": 3, "cachedContentTokenCount": 1,
                 "totalTokenCount": prompt + answer + 3}  # fmt: skip
        response_id, version = _id(""), f"{model}-001"

        def piece(words: str, finish: str | None, usage_now: dict[str, Any]) -> dict[str, Any]:
            candidate: dict[str, Any] = {"content": {"role": "model", "parts": [{"text": words}]},
                                         "index": 0}  # fmt: skip
            if finish:
                candidate["finishReason"] = finish
            return {"candidates": [candidate], "usageMetadata": usage_now,
                    "modelVersion": version, "responseId": response_id}  # fmt: skip

        if method == "generateContent":
            return self._json(200, piece(reply, "STOP", usage))
        if method == "streamGenerateContent" and query.get("alt") == ["sse"]:
            words = _words(reply)
            events: list[tuple[str | None, Any]] = []
            for number, word in enumerate(words):
                last = number == len(words) - 1
                running = usage if last else {"promptTokenCount": prompt,
                                              "candidatesTokenCount": number + 1}  # fmt: skip
                events.append((None, piece(word, "STOP" if last else None, running)))
            return self._stream(events)
        error = {"code": 404, "message": f"no method {method}", "status": "NOT_FOUND"}
        return self._json(404, {"error": error})

    # -- Bedrock ---------------------------------------------------------------------------

    def _bedrock(self, path: str, body: Any) -> None:
        signed = self.headers.get("Authorization", "").startswith("AWS4-HMAC-SHA256 ")
        if not (signed and self.headers.get("X-Amz-Date")):
            headers = {"x-amzn-ErrorType": "MissingAuthenticationTokenException"}
            return self._json(403, {"message": "Missing Authentication Token"}, headers)
        _, _, model, operation = path.split("/")
        messages = body.get("messages") if isinstance(body, dict) else None
        text = _text_of((messages or [{}])[-1].get("content"))
        reply = "echo: " + text
        tokens_in, tokens_out = len(text.split()) + 5, len(reply.split())
        request_id = {"x-amzn-RequestId": _id("")}
        usage = {"inputTokens": tokens_in, "outputTokens": tokens_out,
                 "totalTokens": tokens_in + tokens_out}  # fmt: skip
        if operation == "converse":
            message = {"role": "assistant", "content": [{"text": reply}]}
            answer = {"output": {"message": message}, "stopReason": "end_turn", "usage": usage,
                      "metrics": {"latencyMs": 1}}  # fmt: skip
            return self._json(200, answer, request_id)
        if operation == "converse-stream":
            events = [("messageStart", {"role": "assistant"})]
            events += [("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": w}})
                       for w in _words(reply)]  # fmt: skip
            events += [("contentBlockStop", {"contentBlockIndex": 0}),
                       ("messageStop", {"stopReason": "end_turn"}),
                       ("metadata", {"usage": usage, "metrics": {"latencyMs": 1}})]  # fmt: skip
            return self._eventstream(events, request_id)
        if operation == "invoke":
            counted = {"input_tokens": tokens_in, "output_tokens": tokens_out}
            answer = {"id": _id("msg_bdrk_"), "type": "message", "role": "assistant",
                      "model": model, "content": [{"type": "text", "text": reply}],
                      "usage": counted}  # fmt: skip
            counts = {"X-Amzn-Bedrock-Input-Token-Count": str(tokens_in),
                      "X-Amzn-Bedrock-Output-Token-Count": str(tokens_out)}  # fmt: skip
            return self._json(200, answer, {**request_id, **counts})
        return self._json(404, {"message": f"no operation {operation}"})

    def _eventstream(self, events: list[tuple[str, Any]], headers: dict[str, str]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/vnd.amazon.eventstream")
        self.send_header("Transfer-Encoding", "chunked")
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        for name, payload in events:
            raw = event_frame(name, json.dumps(payload).encode())
            self.wfile.write(b"%x\r\n%s\r\n" % (len(raw), raw))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")


def event_frame(event_type: str, payload: bytes) -> bytes:
    """One AWS event stream frame: prelude, CRC, string headers, payload, CRC."""
    headers = b""
    for name, value in ((":event-type", event_type), (":content-type", "application/json"),
                        (":message-type", "event")):  # fmt: skip
        encoded = value.encode()
        headers += bytes([len(name)]) + name.encode() + b"\x07" + struct.pack(">H", len(encoded))
        headers += encoded
    total = 12 + len(headers) + len(payload) + 4
    prelude = struct.pack(">II", total, len(headers))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    frame = prelude + headers + payload
    return frame + struct.pack(">I", zlib.crc32(frame))
