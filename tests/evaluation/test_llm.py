"""What the model endpoint's errors say: its URL without the credentials a gateway URL carries."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio
import pytest

from evaluation.llm import EndpointError, probe_endpoint
from tests.support.scripted_openai import ScriptedOpenAI

PASSWORD, QUERY_KEY = "gw-PASSWORD-SECRET", "gw-QUERYKEY-SECRET"


@pytest.fixture
def refusing_endpoint() -> Iterator[str]:
    """An endpoint on 127.0.0.1 that answers 401 to everything, quoting the path it was asked for."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            body = f'{{"error": {{"message": "no key for {self.path}"}}}}'.encode()
            self.send_response(401)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


async def test_the_probe_names_a_gateway_without_its_password_or_key(refusing_endpoint: str) -> None:
    url = refusing_endpoint.replace("http://", f"http://judge:{PASSWORD}@") + f"/v1?api-key={QUERY_KEY}"
    with pytest.raises(EndpointError) as caught:
        await probe_endpoint(url, "sk-test")
    message = str(caught.value)
    assert message.startswith("http://judge:***@127.0.0.1:") and "?api-key=*** rejected the API key (HTTP 401)" in message
    assert PASSWORD not in message and QUERY_KEY not in message


async def test_an_unreachable_gateway_is_named_without_its_password() -> None:
    with pytest.raises(EndpointError) as caught:
        await probe_endpoint(f"http://judge:{PASSWORD}@127.0.0.1:9/v1", "sk-test", timeout=5)
    assert "cannot reach http://judge:***@127.0.0.1:9/v1" in str(caught.value) and PASSWORD not in str(caught.value)


async def test_a_probe_answer_that_never_ends_is_bounded() -> None:
    # Each trickled byte restarts the client's read timeout: the probe held the judge and the
    # runner for as long as the endpoint kept sending, before any task was judged or run.
    with ScriptedOpenAI() as llm:
        llm.models_trickle = True
        with anyio.fail_after(60), pytest.raises(EndpointError) as caught:
            await probe_endpoint(llm.base_url, "sk-test", timeout=1)
    assert "did not finish answering GET /models within 7 s" in str(caught.value)
