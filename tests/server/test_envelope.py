"""``server.envelope``: one answer per kind of malformed message, the same over stdio and HTTP.

The same malformed messages go as raw lines to a real copilot over stdio (pipes, no SDK client)
and as raw POST bodies to a real copilot over streamable HTTP (in an initialized handshake-era
session); each must get the same JSON-RPC error on both -- code, message and id -- and the one
this module pins. Over stdio a message is written with a ping after it: the error is on stdout
before the ping's answer (no sleeps).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx2
import pytest
import pytest_asyncio

from server.envelope import message_problem
from tests.server.copilot_harness import (
    HttpCopilot,
    copilot_env,
    fixture_entry,
    raw_initialize,
    raw_mcp_headers,
    write_servers,
)
from tests.server.stdio.test_stdio_robustness import Raw, raw_copilot

pytestmark = pytest.mark.timeout(120)
#: The tests with real copilots share the module's event loop (and its two copilots).
in_module_loop = pytest.mark.asyncio(loop_scope="module")

TOKEN = "envelope-token-0123456789"
WAIT = 60

PARSE, INVALID = -32700, -32600
NOT_JSON = "Parse error: the message is not valid JSON ({})."
LONE = (
    "Parse error: the message contains a lone UTF-16 surrogate escape (such as \\ud800), which is not valid Unicode."
)
DEEP = "Parse error: the message's JSON is nested deeper than the 200 levels the copilot reads."
BOM = "Parse error: the message begins with a byte order mark (U+FEFF), which must not precede a JSON-RPC message."
BATCH = (
    "Invalid Request: the message is a JSON array (a batch); send each JSON-RPC message on its own "
    "(MCP has no batches since 2025-06-18)."
)
BARE = "Invalid Request: the message must be one JSON-RPC message object, not {}."
PARAMS = 'Invalid Request: "params" must be an object (MCP passes parameters by name), not {}.'
BAD_ID = (
    'Invalid Request: "id" must be a string or an integer, not {} (a message without "id" is a notification, '
    "which gets no answer)."
)


def _request(request_id: Any, method: Any = "ping", **members: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, **members}).encode()


def _call(request_id: Any) -> bytes:
    """An ``execute`` call (the stdio fast path reads those first)."""
    params = {"name": "execute", "arguments": {"server_name": "alpha", "tool_name": "echo", "params": {"text": "x"}}}
    return _request(request_id, "tools/call", params=params)


#: (name, the message, the code, the message of the error, its id): each answered on both transports.
MALFORMED: list[tuple[str, bytes, int, str, Any]] = [
    ("not JSON", b"hello copilot", PARSE, NOT_JSON.format("expected value at line 1 column 1"), None),
    ("cut short", b'{"jsonrpc": "2.0", "id": "cut", "method": "tools/li', PARSE,
     NOT_JSON.format("EOF while parsing a string at line 1 column 51"), "cut"),
    ("a number out of range", _request("huge", params={"n": 1})[:-3] + b"9" * 5000 + b"}}", PARSE,
     NOT_JSON.format("number out of range at line 1 column 4369"), "huge"),
    ("lone surrogate", _request("lone", params={"x": "X"}).replace(b'"X"', b'"\\ud800"'), PARSE, LONE, "lone"),
    ("deep nesting", _request("deep", params={"x": 1})[:-3] + b"[" * 100_000 + b"}}", PARSE, DEEP, "deep"),
    ("byte order mark", b"\xef\xbb\xbf" + _request("bom"), PARSE, BOM, "bom"),
    ("a batch", b"[" + _request("in-batch") + b"]", INVALID, BATCH, None),
    ("an empty batch", b"[]", INVALID, BATCH, None),
    ("a bare number", b"5", INVALID, BARE.format("5"), None),
    ("null", b"null", INVALID, BARE.format("null"), None),
    ("a bare string", b'"ping"', INVALID, BARE.format('"ping"'), None),
    ("no jsonrpc member", b'{"id": "no-jsonrpc", "method": "ping"}', INVALID,
     'Invalid Request: "jsonrpc" must be "2.0" (it is missing).', "no-jsonrpc"),
    ("jsonrpc 1.0", b'{"jsonrpc": "1.0", "id": "v1", "method": "ping"}', INVALID,
     'Invalid Request: "jsonrpc" must be "2.0" (not "1.0").', "v1"),
    ("method a number", _request("m7", 7), INVALID, 'Invalid Request: "method" must be a string, not 7.', "m7"),
    ("params an array", _request("arr", "tools/list", params=[1]), INVALID, PARAMS.format("a JSON array"), "arr"),
    ("params a string", _request("str", params="x"), INVALID, PARAMS.format('"x"'), "str"),
    ("params a number", _request("num", params=5), INVALID, PARAMS.format("5"), "num"),
    ("id null", _call(None), INVALID, BAD_ID.format("null"), None),
    ("id 1.5", _request(1.5), INVALID, BAD_ID.format("1.5"), None),
    ("id 2.0", _request(2.0), INVALID, BAD_ID.format("2.0"), None),
    ("id true", _request(True), INVALID, BAD_ID.format("true"), None),
    ("id an object", _call({"id": 1}), INVALID, BAD_ID.format("a JSON object"), None),
]  # fmt: skip
NAMES = [case[0] for case in MALFORMED]


def _expected(code: int, message: str, request_id: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


# -- the module itself -----------------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "raw", "code", "message", "request_id"), MALFORMED, ids=NAMES)
def test_each_kind_of_malformed_message_has_one_answer(
    name: str, raw: bytes, code: int, message: str, request_id: Any
) -> None:
    problem = message_problem(raw)
    assert problem is not None and problem.wants_answer, name
    assert problem.as_jsonrpc() == _expected(code, message, request_id)


@pytest.mark.parametrize(
    "raw",
    [
        b'{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": "junk"}',
        b'{"jsonrpc": "2.0", "id": "r", "result": 5}',
        b'{"jsonrpc": "2.0", "id": "r"}',
        b'{"jsonrpc": "1.0", "method": "notifications/initialized"}',
        b'{"jsonrpc": "2.0", "id": null, "method": "notifications/cancelled", "params": [1]}',
        b'{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"reason": "\\udc00"}}',
        b'\xef\xbb\xbf{"jsonrpc": "2.0", "method": "notifications/initialized"}',
    ],
)
def test_malformed_notifications_and_responses_want_no_answer(raw: bytes) -> None:
    """Over stdio they are not answered (JSON-RPC answers neither); over HTTP a POST always is."""
    problem = message_problem(raw)
    assert problem is not None and not problem.wants_answer


@pytest.mark.parametrize(
    "raw",
    [
        _request("fine"),
        _request(7, params=None),
        _call("fine"),
        b'{"jsonrpc": "2.0", "method": "notifications/initialized"}',
        b'{"jsonrpc": "2.0", "id": null, "method": "notifications/cancelled", "params": {"requestId": 1}}',
        b'{"jsonrpc": "2.0", "id": 3, "result": {}}',
    ],
)
def test_valid_messages_have_no_problem(raw: bytes) -> None:
    assert message_problem(raw) is None


# -- both transports, real copilots --------------------------------------------------------------------
Ask = Callable[[bytes, Any], Awaitable[dict[str, Any]]]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def over_stdio(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Raw]:
    async with raw_copilot(tmp_path_factory.mktemp("envelope-stdio"), "fast") as copilot:
        yield copilot
        copilot.assert_clean()
    assert copilot.process.returncode == 0


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def over_http(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[httpx2.AsyncClient, str, dict[str, str]]]:
    root = tmp_path_factory.mktemp("envelope-http")
    servers = write_servers(root / "servers.json", {"alpha": fixture_entry("alpha")})
    env = copilot_env(
        root / "home",
        COPILOT_LOG_DIR=str(root / "logs"),
        COPILOT_HTTP_TOKEN=TOKEN,
        COPILOT_WARM_INDEX="false",
        COPILOT_AUTO_INDEX="false",
    )
    stderr = root / "stderr.log"
    copilot = HttpCopilot(["--servers", str(servers), "--http", "--port", "0"], env, root, stderr)
    await copilot.start()
    assert copilot.url is not None
    try:
        async with httpx2.AsyncClient(timeout=WAIT) as http:
            opened = await http.post(copilot.url, json=raw_initialize("envelope"), headers=raw_mcp_headers(TOKEN))
            assert opened.status_code == 200, opened.text
            session = {
                **raw_mcp_headers(TOKEN),
                "mcp-session-id": opened.headers["mcp-session-id"],
                "mcp-protocol-version": "2025-06-18",
            }
            initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            assert (await http.post(copilot.url, json=initialized, headers=session)).status_code == 202
            yield http, copilot.url, session
    finally:
        assert await copilot.stop() == 0
    assert "Traceback" not in stderr.read_text(encoding="utf-8")


@pytest.fixture(params=["stdio", "http"])
def ask(request: pytest.FixtureRequest) -> Ask:
    """Sends one message over the transport and returns the one JSON-RPC error it gets."""
    if request.param == "stdio":
        copilot: Raw = request.getfixturevalue("over_stdio")

        async def over_stdio(raw: bytes, request_id: Any) -> dict[str, Any]:
            answers = await copilot.exchange(raw + b"\n", request_id)
            assert len(answers) == 1, answers
            return answers[0]

        return over_stdio
    http, url, session = request.getfixturevalue("over_http")

    async def over_http(raw: bytes, request_id: Any) -> dict[str, Any]:
        response = await http.post(url, content=raw, headers=session)
        assert response.status_code == 400, response.text
        assert response.headers["content-type"].startswith("application/json")
        answer: dict[str, Any] = response.json()
        return answer

    return over_http


@in_module_loop
@pytest.mark.parametrize(("name", "raw", "code", "message", "request_id"), MALFORMED, ids=NAMES)
async def test_a_malformed_message_gets_the_same_answer_over_stdio_and_http(
    ask: Ask, name: str, raw: bytes, code: int, message: str, request_id: Any
) -> None:
    assert await ask(raw, request_id) == _expected(code, message, request_id), name


@in_module_loop
async def test_the_stdio_copilot_still_serves_after_them(over_stdio: Raw) -> None:
    await over_stdio.send(_call("after") + b"\n")
    assert (await over_stdio.answer("after"))["result"]["structuredContent"] == {"result": "x"}

