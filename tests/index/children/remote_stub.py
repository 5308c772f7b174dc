"""A minimal streamable-HTTP MCP server on 127.0.0.1 (stdlib, in a thread), for the secret-redaction tests.

``deny=True`` answers every request 401, as a remote server does when its URL's token is wrong; else
it serves one tool, ``echo``, with JSON replies. Every request path (query included) is recorded.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class RemoteStub:
    def __init__(self, *, deny: bool = False) -> None:
        self.paths: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _reply(self, status: int, body: bytes = b"") -> None:
                self.send_response(status)
                if body:
                    self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                self._reply(405)

            def do_DELETE(self) -> None:
                self._reply(200)

            def do_POST(self) -> None:
                outer.paths.append(self.path)
                message = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
                if deny:
                    self._reply(401, b'{"error": "unauthorized"}')
                    return
                if message.get("id") is None:
                    self._reply(202)
                    return
                method = message.get("method")
                if method == "initialize":
                    result: dict[str, Any] = {
                        "protocolVersion": message["params"]["protocolVersion"],
                        "capabilities": {"tools": {}},
                        "serverInfo": {"name": "remote-stub", "version": "1"},
                    }
                elif method == "tools/list":
                    result = {"tools": [{"name": "echo", "description": "Echo.", "inputSchema": {"type": "object"}}]}
                else:
                    result = {"content": [{"type": "text", "text": "echoed"}]}
                self._reply(200, json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode())

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def origin(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> RemoteStub:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
