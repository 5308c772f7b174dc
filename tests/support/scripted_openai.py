"""A scripted OpenAI-compatible chat-completions server on 127.0.0.1, for tests and benchmarks.

It speaks real HTTP, so clients under test use their real network code (the ``openai`` client,
retries, timeouts). Replies come from a queue (``push``) or, when the queue is empty, from a
``handler(request_body) -> Reply``. Every request is recorded in ``requests``.

    with ScriptedOpenAI(handler=lambda req: Reply(content="Status: success")) as llm:
        client = openai.OpenAI(base_url=llm.base_url, api_key="test")
"""

from __future__ import annotations

import json
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class ToolCall:
    name: str
    arguments: dict[str, Any] | str

    def as_openai(self) -> dict[str, Any]:
        args = self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments)
        return {"id": f"call_{uuid.uuid4().hex[:12]}", "type": "function", "function": {"name": self.name, "arguments": args}}


@dataclass
class Reply:
    """One scripted answer. ``status`` != 200 sends an error body; ``hang`` never answers."""

    content: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    status: int = 200
    delay: float = 0.0
    hang: bool = False
    trickle: bool = False  # send the headers, then a byte of the body now and then, never all of it
    headers: dict[str, str] = field(default_factory=dict)
    prompt_tokens: int = 10
    completion_tokens: int = 5
    body: Any = None  # send exactly this JSON value instead
    raw: tuple[str, bytes] | None = None  # or these bytes, as (content type, body): an HTML page, say

    def payload(self, model: str) -> Any:
        if self.body is not None:
            return self.body
        if self.status != 200:
            return {"error": {"message": f"scripted error {self.status}", "type": "scripted", "code": self.status}}
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [call.as_openai() for call in self.tool_calls]
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {"index": 0, "message": message, "finish_reason": "tool_calls" if self.tool_calls else "stop"}
            ],
            "usage": {
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
                "total_tokens": self.prompt_tokens + self.completion_tokens,
            },
        }


Handler = Callable[[dict[str, Any]], Reply]


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up (timeout, Ctrl-C) closes its socket mid-reply: expected, not news.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class ScriptedOpenAI:
    def __init__(self, handler: Handler | None = None, host: str = "127.0.0.1") -> None:
        self.handler = handler
        #: When set, ``GET /models`` answers these bytes as JSON instead of a model list.
        self.models_body: bytes | None = None
        #: When set, ``GET /models`` sends its headers, then a byte now and then, never the whole body.
        self.models_trickle = False
        self.requests: list[dict[str, Any]] = []
        self._queue: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._released = threading.Event()
        outer = self

        class _RequestHandler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
                pass

            def _send(
                self, status: int, payload: Any, headers: dict[str, str] | None = None, raw: tuple[str, bytes] | None = None
            ) -> None:
                content_type, data = raw if raw is not None else ("application/json", json.dumps(payload).encode())
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            def _trickle(self) -> None:
                # Whitespace is valid before a JSON body: each byte restarts the client's read
                # timeout, and the body never ends (as a proxy keeping a dead upstream alive).
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "1000000")
                self.end_headers()
                for _ in range(6000):  # at most ~120 s
                    if outer._released.wait(timeout=0.02):
                        return
                    try:
                        self.wfile.write(b" ")
                        self.wfile.flush()
                    except OSError:
                        return  # the client gave up

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models") and outer.models_trickle:
                    self._trickle()
                elif self.path.rstrip("/").endswith("/models") and outer.models_body is not None:
                    self._send(200, None, raw=("application/json", outer.models_body))
                elif self.path.rstrip("/").endswith("/models"):
                    self._send(200, {"object": "list", "data": [{"id": "scripted", "object": "model"}]})
                else:
                    self._send(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"unknown path {self.path}"}})
                    return
                reply = outer._next_reply(body)
                if reply.hang:
                    outer._released.wait(timeout=120)
                    return
                if reply.trickle:
                    self._trickle()
                    return
                if reply.delay:
                    outer._released.wait(timeout=reply.delay)
                self._send(reply.status, reply.payload(body.get("model", "scripted")), reply.headers, reply.raw)

        self._server = _QuietServer((host, 0), _RequestHandler)
        self._server.daemon_threads = True
        # A short poll interval makes stop() (shutdown) return in ~50 ms instead of ~0.5 s per test.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="scripted-openai", daemon=True
        )

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def push(self, *replies: Reply) -> None:
        with self._lock:
            self._queue.extend(replies)

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            self.requests.append(body)
            if self._queue:
                return self._queue.popleft()
        if self.handler is None:
            return Reply(status=500, body={"error": {"message": "no scripted reply left"}})
        return self.handler(body)

    def start(self) -> ScriptedOpenAI:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._released.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> ScriptedOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def last_user_text(request: dict[str, Any]) -> str:
    """The text of the last user message of a chat request (for content-keyed handlers)."""
    for message in reversed(request.get("messages", [])):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
            return content or ""
    return ""
