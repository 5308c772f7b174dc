"""Hostile and broken HTTP clients against a real copilot (``python -m server --http``).

Whatever a client sends -- a body or a head without end, half a request and then nothing, a batch,
a request whose ``id`` no JSON-RPC request may have -- it gets a clear answer (an HTTP status and
a JSON-RPC error naming what is wrong), the copilot's memory stays flat, other clients are served,
and the copilot's log holds no ERROR and no traceback (checked once the module's copilot stopped).

One copilot serves most of the module, with a 2 s ``COPILOT_HTTP_READ_TIMEOUT`` so that the
timeout tests end quickly (every wait is bounded by ``fail_after``, far beyond it).
"""

from __future__ import annotations

import contextlib
import json
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx2
import psutil
import pytest
import pytest_asyncio
from anyio.abc import SocketStream
from mcp.shared.exceptions import MCPError

from tests.server.support.copilot_harness import (
    HttpCopilot,
    RunningClient,
    http_client_for,
    open_raw_session,
    raw_initialize,
    raw_mcp_headers,
    start_http_copilot,
    text_of,
)

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(120)]

TOKEN = "robustness-token-0123456789"
READ_TIMEOUT = 2
MAX_BODY = 16 * 1024 * 1024  # the default
MCP_HEADERS = raw_mcp_headers(TOKEN)
INITIALIZE = raw_initialize("rough")
#: Bounds every wait on the copilot; the timeouts under test are 2 s.
WAIT = 30
MIB = 1024 * 1024


@dataclass
class Served:
    url: str
    process: HttpCopilot
    stderr: Path

    @property
    def port(self) -> int:
        port = urlsplit(self.url).port
        assert port is not None
        return port

    def rss(self) -> int:
        assert self.process.process is not None
        return int(psutil.Process(self.process.process.pid).memory_info().rss)


async def _start(root: Path, **settings: str) -> Served:
    # COPILOT_PROTECT_PROCESS: its memory is read through /proc.
    process = await start_http_copilot(root, TOKEN, COPILOT_PROTECT_PROCESS="false", **settings)
    assert process.url is not None
    return Served(process.url, process, process.stderr_path)


def _errors_logged(stderr: Path) -> list[str]:
    return [line for line in stderr.read_text(encoding="utf-8").splitlines() if "ERROR" in line or "Traceback" in line]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def served(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Served]:
    served = await _start(tmp_path_factory.mktemp("rough-http"), COPILOT_HTTP_READ_TIMEOUT=str(READ_TIMEOUT))
    try:
        yield served
    finally:
        code = await served.process.stop()
    assert code == 0
    # No client's fault is the copilot's error: nothing any test here sent is logged as one.
    assert _errors_logged(served.stderr) == []


@pytest_asyncio.fixture(loop_scope="module")
async def http() -> AsyncIterator[httpx2.AsyncClient]:
    async with httpx2.AsyncClient(timeout=WAIT) as client:
        yield client


@pytest_asyncio.fixture(loop_scope="module")
async def session(served: Served, http: httpx2.AsyncClient) -> AsyncIterator[dict[str, str]]:
    """The headers of an initialized handshake-era session (ended with DELETE afterwards)."""
    headers = await _open_session(served, http)
    yield headers
    await http.delete(served.url, headers=headers)


async def _open_session(served: Served, http: httpx2.AsyncClient) -> dict[str, str]:
    return await open_raw_session(http, served.url, TOKEN, client_name="rough")


def _error_of(response: httpx2.Response) -> dict[str, Any]:
    """The JSON-RPC error a refusal carries (every one here is JSON, never text or a traceback)."""
    assert response.headers["content-type"].startswith("application/json"), response.text
    payload = response.json()
    assert payload["jsonrpc"] == "2.0" and "Traceback" not in response.text, payload
    return dict(payload["error"])


async def _still_serving(served: Served, http: httpx2.AsyncClient) -> None:
    """Another client is served as usual."""
    headers = await _open_session(served, http)
    ping = await http.post(served.url, json={"jsonrpc": "2.0", "id": 7, "method": "ping"}, headers=headers)
    assert ping.status_code == 200 and '"result":{}' in ping.text, ping.text
    assert (await http.delete(served.url, headers=headers)).status_code == 200


# --- Raw connections ------------------------------------------------------------------------------


async def _connect(served: Served) -> SocketStream:
    return await anyio.connect_tcp("127.0.0.1", served.port)


async def _read_all(stream: SocketStream) -> bytes:
    """Everything the copilot sends until it closes the connection (bounded by ``WAIT``)."""
    received = b""
    with anyio.fail_after(WAIT):
        while True:
            try:
                received += await stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError, ConnectionResetError):
                return received


def _head(served: Served, method: str, headers: dict[str, str]) -> bytes:
    lines = [f"{method} /mcp HTTP/1.1", f"Host: 127.0.0.1:{served.port}", *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _answer(raw: bytes) -> tuple[int, dict[str, Any]]:
    """The status and JSON-RPC error of a raw HTTP answer."""
    head, _, body = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    assert b"content-type: application/json" in head.lower(), raw
    return status, json.loads(body)["error"]


# --- Bodies ---------------------------------------------------------------------------------------


async def test_a_body_over_the_cap_is_refused_413_with_memory_flat(
    served: Served, http: httpx2.AsyncClient, session: dict[str, str]
) -> None:
    """200 MB streamed (no Content-Length): refused once 16 MiB are read, never held."""

    async def two_hundred_mb() -> AsyncIterator[bytes]:
        chunk = b" " * MIB
        for _ in range(200):
            yield chunk

    before = served.rss()
    response = await http.post(served.url, content=two_hundred_mb(), headers=session)
    grown = served.rss() - before
    assert response.status_code == 413
    error = _error_of(response)
    assert "at most 16,777,216 bytes per request (COPILOT_HTTP_MAX_BODY_BYTES)" in error["message"], error
    assert response.headers["connection"] == "close"
    assert grown < 100 * MIB, f"the copilot grew by {grown / MIB:.0f} MiB reading a refused body"
    await _still_serving(served, http)


async def test_a_declared_length_over_the_cap_is_refused_before_the_body_is_sent(
    served: Served, session: dict[str, str]
) -> None:
    stream = await _connect(served)
    async with stream:
        await stream.send(_head(served, "POST", {**session, "Content-Length": str(200 * MIB)}) + b'{"jsonrpc"')
        status, error = _answer(await _read_all(stream))
    assert status == 413
    assert "this one has 209,715,200" in error["message"], error


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_execute_carries_megabytes_and_a_refusal_reaches_the_caller(served: Served, mode: str) -> None:
    """A 5 MB parameter goes through (the SDK's own 4 MiB cap refused it); one over the cap fails
    the call with the copilot's reason, not a broken connection."""
    running = RunningClient(http_client_for(served.url, token=TOKEN, mode=mode))
    client = await running.start()
    try:
        text = "x" * (5 * 1000 * 1000)
        echo = {"server_name": "alpha", "tool_name": "echo", "params": {"text": text}}
        result = await client.call_tool("execute", echo)
        assert not result.is_error and text_of(result).startswith("xxxx"), text_of(result)[:200]
        with pytest.raises(MCPError, match="COPILOT_HTTP_MAX_BODY_BYTES"):
            await client.call_tool(
                "execute", {"server_name": "alpha", "tool_name": "echo", "params": {"text": "x" * (MAX_BODY + 1)}}
            )
    finally:
        await running.stop()


async def test_a_request_opening_a_session_is_capped_lower(served: Served, http: httpx2.AsyncClient) -> None:
    """The SDK keeps a session's initialize for as long as the session lasts: it may not be megabytes."""
    big = {**INITIALIZE, "params": {**INITIALIZE["params"], "padding": "x" * 100_000}}
    response = await http.post(served.url, json=big, headers=MCP_HEADERS)
    assert response.status_code == 413
    assert "without mcp-session-id (an initialize) takes at most 65,536 bytes" in _error_of(response)["message"]
    await _still_serving(served, http)


NOT_ONE_MESSAGE = [
    (b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]', -32600, "is a JSON array (a batch)"),
    (b"[]", -32600, "is a JSON array (a batch)"),
    (b"null", -32600, "one JSON-RPC message object, not null"),
    (b'"ping"', -32600, 'one JSON-RPC message object, not "ping"'),
    (b"{not json", -32700, "Parse error: the message is not valid JSON (key must be a string"),
    (b'{"jsonrpc":"2.0","id":1,"method":"\xff\xfe"}', -32700, "Parse error: the message is not valid UTF-8"),
    (b"[" * 100_000, -32700, "Parse error: the message's JSON is nested deeper than the 200 levels"),
    (b'{"a":' * 100_000 + b"1" + b"}" * 100_000, -32700, "Parse error: the message's JSON is nested deeper"),
    (b'{"jsonrpc":"2.0","id":null,"method":"ping"}', -32600, '"id" must be a string or an integer, not null'),
    (b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}', -32600, '"id" must be a string or an integer, not 1.5'),
    (b'{"jsonrpc":"2.0","id":true,"method":"ping"}', -32600, '"id" must be a string or an integer, not true'),
    (b'{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}', -32600, "not a JSON object"),
    (b'{"jsonrpc":"1.0","id":1,"method":"ping"}', -32600, '"jsonrpc" must be "2.0"'),
    (b'{"jsonrpc":"2.0","id":1,"method":7}', -32600, '"method" must be a string'),
    # Not -32602: MCP's request envelope takes object params only (as over stdio).
    (b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":[1]}', -32600, '"params" must be an object'),
    (b'{"jsonrpc":"2.0","id":1}', -32600, 'has a "method"'),
    (b'{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"x"}}', -32600, 'has a "method"'),
    (b'{"jsonrpc":"2.0","id":1,"result":5}', -32600, "not a valid JSON-RPC 2.0 message (result: Input should be"),
]


@pytest.mark.parametrize(("body", "code", "message"), NOT_ONE_MESSAGE, ids=range(len(NOT_ONE_MESSAGE)))
async def test_a_body_that_is_not_one_jsonrpc_message_gets_a_jsonrpc_error(
    served: Served, http: httpx2.AsyncClient, session: dict[str, str], body: bytes, code: int, message: str
) -> None:
    """Never the SDK's -32602 with a dump of pydantic's errors, never a 202 for a request whose id
    is unusable (the client would wait for an answer that never comes)."""
    response = await http.post(served.url, content=body, headers=session)
    assert response.status_code == 400, response.text
    error = _error_of(response)
    assert error["code"] == code and message in error["message"], error
    assert "validation error" not in error["message"].lower()


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded"])
async def test_a_post_that_is_not_json_gets_415(
    served: Served, http: httpx2.AsyncClient, session: dict[str, str], content_type: str | None
) -> None:
    headers = {k: v for k, v in session.items() if k != "Content-Type"}
    if content_type is not None:
        headers["Content-Type"] = content_type
    response = await http.post(served.url, content=json.dumps(INITIALIZE).encode(), headers=headers)
    assert response.status_code == 415
    assert "Content-Type: application/json" in _error_of(response)["message"]
    # An empty body is refused alike (it skipped to the SDK's plain-text 400).
    empty = await http.post(served.url, content=b"", headers=headers)
    assert empty.status_code == 415 and "Content-Type: application/json" in _error_of(empty)["message"]


async def test_an_empty_post_that_accepts_neither_json_nor_sse_gets_a_jsonrpc_406(
    served: Served, http: httpx2.AsyncClient
) -> None:
    modern = {**MCP_HEADERS, "Accept": "text/html", "MCP-Protocol-Version": "2026-07-28"}
    for body in (b"", json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()):
        response = await http.post(served.url, content=body, headers=modern)
        assert response.status_code == 406 and "Not Acceptable" in _error_of(response)["message"], response.text


async def test_protocol_mistakes_get_the_sdks_clear_answers(
    served: Served, http: httpx2.AsyncClient, session: dict[str, str]
) -> None:
    """Already right before: kept so. Unknown methods, notifications, responses nobody asked for,
    an Accept without SSE, unknown and ended sessions."""
    unknown = await http.post(served.url, json={"jsonrpc": "2.0", "id": 5, "method": "foo/bar"}, headers=session)
    assert unknown.status_code == 200 and '"code":-32601' in unknown.text, unknown.text
    for lone in ({"jsonrpc": "2.0", "method": "notifications/foo"}, {"jsonrpc": "2.0", "id": 99, "result": {}}):
        assert (await http.post(served.url, json=lone, headers=session)).status_code == 202
    json_only = await http.post(served.url, json=INITIALIZE, headers={**MCP_HEADERS, "Accept": "application/json"})
    assert json_only.status_code == 406 and "text/event-stream" in _error_of(json_only)["message"]
    gone = await _open_session(served, http)
    assert (await http.delete(served.url, headers=gone)).status_code == 200
    ping = {"jsonrpc": "2.0", "id": 3, "method": "ping"}
    for unknown_id in (gone, {**session, "mcp-session-id": "0123456789abcdef"}):
        for method in ("GET", "DELETE", "POST"):
            answer = await http.request(method, served.url, json=ping, headers=unknown_id)
            assert answer.status_code == 404, (method, answer.text)
            assert _error_of(answer)["message"] == "Session not found"


async def test_headers_http_reads_case_insensitively_and_a_resume_request_are_served(
    served: Served, http: httpx2.AsyncClient, session: dict[str, str]
) -> None:
    # Before: the SDK compared Host and the media type case-sensitively (421, 415), and answered a
    # GET with Last-Event-ID -- resuming from an event store the copilot does not keep -- with nothing (a 500).
    upper = {**session, "Host": f"LOCALHOST:{served.port}", "Content-Type": "APPLICATION/JSON; charset=utf-8"}
    ping = await http.post(served.url, content=b'{"jsonrpc": "2.0", "id": 8, "method": "ping"}', headers=upper)
    assert ping.status_code == 200 and '"result":{}' in ping.text, ping.text
    for origin in ("http://LOCALHOST:3000", "HTTP://127.0.0.1:3000"):  # a plain-text 403 from the SDK before
        page = await http.post(served.url, content=b'{"jsonrpc": "2.0", "id": 9, "method": "ping"}', headers={**session, "Origin": origin})
        assert page.status_code == 200 and '"result":{}' in page.text, (origin, page.text)
    resume = {**session, "Accept": "text/event-stream", "Last-Event-ID": "0"}
    async with http.stream("GET", served.url, headers=resume) as stream:
        assert stream.status_code == 200 and stream.headers["content-type"].startswith("text/event-stream")


# --- Heads and stalls -----------------------------------------------------------------------------


async def test_a_head_without_end_gets_431_with_memory_flat(served: Served, http: httpx2.AsyncClient) -> None:
    """Unbounded, 60 MB of headers cost the copilot 560 MB (httptools piles them up)."""
    stream = await _connect(served)
    before = served.rss()
    async with stream:
        await stream.send(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        headers = b"".join(b"X-Flood-%d: v\r\n" % i for i in range(50_000))
        try:
            for _ in range(40):  # 32 MB
                await stream.send(headers)
        except (anyio.BrokenResourceError, ConnectionResetError):
            pass  # the copilot lingered long enough, or not: its answer is read below either way
        raw = await _read_all(stream)
    grown = served.rss() - before
    status, error = _answer(raw)
    assert status == 431 and "exceed 65,536 bytes" in error["message"], error
    assert grown < 32 * MIB, f"the copilot grew by {grown / MIB:.0f} MiB parsing a refused head"
    await _still_serving(served, http)


@pytest.mark.parametrize("size", [70_000, 100_000], ids=["70-kB", "100-kB"])
async def test_a_complete_head_over_the_limit_gets_431_however_it_arrives(
    served: Served, http: httpx2.AsyncClient, size: int
) -> None:
    # The read that completed a head was handed to the app unchecked: heads of 65-128 KiB got 200.
    big = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "X-Big": "b" * size}
    body = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}'
    stream = await _connect(served)
    async with stream:
        with contextlib.suppress(anyio.BrokenResourceError, ConnectionResetError):
            await stream.send(_head(served, "POST", {**big, "Content-Length": str(len(body))}) + body)
        raw = await _read_all(stream)
    status, error = _answer(raw)
    assert status == 431 and "exceed 65,536 bytes" in error["message"], error
    await _still_serving(served, http)


async def test_clients_that_stall_are_answered_408_and_disconnected(
    served: Served, http: httpx2.AsyncClient, session: dict[str, str]
) -> None:
    """uvicorn has no timeout for a request's head, the SDK none for its body: each of these held
    its connection (and the body one a task) forever."""
    answers: dict[str, bytes] = {}

    async def stall(name: str, opening: bytes) -> None:
        stream = await _connect(served)
        async with stream:
            if opening:
                await stream.send(opening)
            answers[name] = await _read_all(stream)

    body_head = _head(served, "POST", {**session, "Content-Length": "100"})
    async with anyio.create_task_group() as group:
        group.start_soon(stall, "silent", b"")
        group.start_soon(stall, "half a head", b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        group.start_soon(stall, "half a body", body_head + b'{"jsonrpc":')
        group.start_soon(_still_serving, served, http)  # meanwhile, as usual
    assert answers["silent"] == b""  # nothing asked, nothing answered: closed
    status, error = _answer(answers["half a head"])
    assert status == 408 and "no complete request line and headers within 2s" in error["message"], error
    status, error = _answer(answers["half a body"])
    assert status == 408 and "nothing of the request's body arrived for 2s" in error["message"], error


async def test_a_client_gone_mid_body_leaves_its_session_working(
    served: Served, http: httpx2.AsyncClient, session: dict[str, str]
) -> None:
    """The SDK logged this client's leaving as an ERROR with a traceback (see the module fixture)."""
    stream = await _connect(served)
    async with stream:
        await stream.send(_head(served, "POST", {**session, "Content-Length": "100"}) + b'{"jsonrpc":')
    ping = await http.post(served.url, json={"jsonrpc": "2.0", "id": 8, "method": "ping"}, headers=session)
    assert ping.status_code == 200 and '"result":{}' in ping.text


async def test_refusals_of_the_guard_close_the_connection(served: Served, http: httpx2.AsyncClient) -> None:
    """A client without the token cannot keep a connection by trickling a body nobody reads."""
    no_token = {k: v for k, v in MCP_HEADERS.items() if k != "Authorization"}
    response = await http.post(served.url, content=b"x" * 100_000, headers=no_token)
    assert response.status_code == 401 and response.headers["connection"] == "close"
    # A JSON-RPC error, so an MCP client shows what to do rather than "Server returned an error response".
    assert _error_of(response)["message"].startswith("Unauthorized: send 'Authorization: Bearer <token>'")


# --- Copilots of their own ------------------------------------------------------------------------


async def test_the_session_cap_answers_503_and_frees_up(tmp_path: Path) -> None:
    served = await _start(tmp_path, COPILOT_HTTP_MAX_SESSIONS="2")
    try:
        async with httpx2.AsyncClient(timeout=WAIT) as http:
            first = await _open_session(served, http)
            await _open_session(served, http)
            refused = await http.post(served.url, json=INITIALIZE, headers=MCP_HEADERS)
            # The SDK's bare "Too many open sessions" named neither the limit nor the way out.
            assert refused.status_code == 503 and _error_of(refused)["message"] == (
                "Service Unavailable: the copilot has its most open sessions (2, COPILOT_HTTP_MAX_SESSIONS); end one "
                "you no longer use (DELETE with its mcp-session-id), or wait for an idle one to be closed "
                "(COPILOT_HTTP_SESSION_IDLE_TIMEOUT), then connect again."
            )
            assert (await http.delete(served.url, headers=first)).status_code == 200
            await _open_session(served, http)
    finally:
        await served.process.stop()
    assert _errors_logged(served.stderr) == []


async def test_a_stop_answers_a_stalled_body_at_once(tmp_path: Path) -> None:
    """It waited for uvicorn's 5 s limit, then a 500 and three ERRORs with tracebacks."""
    served = await _start(tmp_path)  # the default 30 s read timeout: only the stop ends the wait
    assert served.process.process is not None
    async with httpx2.AsyncClient(timeout=WAIT) as http:
        session = await _open_session(served, http)
    stalled = await _connect(served)
    half_a_head = await _connect(served)
    async with stalled, half_a_head:
        await half_a_head.send(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        # uvicorn says "100 Continue" once the copilot reads the body: then it is waiting for it.
        await stalled.send(_head(served, "POST", {**session, "Content-Length": "100", "Expect": "100-continue"}))
        with anyio.fail_after(WAIT):
            assert (await stalled.receive()).startswith(b"HTTP/1.1 100 Continue")
        await stalled.send(b'{"jsonrpc":')
        served.process.process.send_signal(signal.SIGTERM)
        raw = await _read_all(stalled)
        assert await _read_all(half_a_head) == b""
    assert raw.startswith(b"HTTP/1.1 503") and b"the copilot is shutting down (SIGTERM)" in raw, raw
    assert b'"jsonrpc": "2.0"' in raw, raw
    assert await served.process.stop() == 0
    assert _errors_logged(served.stderr) == []
