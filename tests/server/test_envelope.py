"""``server.envelope``: one answer per kind of malformed message, the same over stdio and HTTP.

The same malformed messages go as raw lines to a real copilot over stdio (pipes, no SDK client)
and as raw POST bodies to a real copilot over streamable HTTP, on both of its entries: in an
initialized handshake-era session, and as 2026-07-28 per-request POSTs (``MCP-Protocol-Version:
2026-07-28``, which the SDK serves on another entry, reading bodies with another JSON reader). Each
must get the same JSON-RPC error on all three -- code, message and id -- and the one this module
pins; over HTTP with a 400. Over stdio a message is written with a ping after it: the error is on
stdout before the ping's answer (no sleeps).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx2
import pytest
import pytest_asyncio

from server.envelope import lenient_read_problem, message_problem
from tests.server.support.copilot_harness import open_raw_session, raw_mcp_headers, start_http_copilot
from tests.server.stdio.raw_harness import Raw, raw_copilot

pytestmark = pytest.mark.timeout(120)
#: The tests with real copilots share the module's event loop (and its two copilots).
in_module_loop = pytest.mark.asyncio(loop_scope="module")

TOKEN = "envelope-token-0123456789"
WAIT = 60
MODERN = "2026-07-28"

PARSE, INVALID = -32700, -32600
NOT_JSON = "Parse error: the message is not valid JSON ({})."
LONE = (
    "Parse error: the message contains a lone UTF-16 surrogate escape (such as \\ud800), which is not valid Unicode."
)
DEEP = "Parse error: the message's JSON is nested deeper than the 200 levels the copilot reads."
BOM = "Parse error: the message begins with a byte order mark (U+FEFF), which must not precede a JSON-RPC message."
NOT_UTF8 = "Parse error: the message is not valid UTF-8 (at byte {})."
UTF16 = "Parse error: the message is not UTF-8, which MCP's messages are (it begins with NUL bytes, as UTF-16 does)."
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


def _call(request_id: Any, text: bytes = b"x") -> bytes:
    """An ``execute`` call (the stdio fast path reads those first) echoing ``text`` (raw bytes)."""
    params = {"name": "execute", "arguments": {"server_name": "alpha", "tool_name": "echo", "params": {"text": "x"}}}
    return _request(request_id, "tools/call", params=params).replace(b'"text": "x"', b'"text": "' + text + b'"')


#: (name, the message, the code, the message of the error, its id): each answered alike on every entry.
MALFORMED: list[tuple[str, bytes, int, str, Any]] = [
    ("not JSON", b"hello copilot", PARSE, NOT_JSON.format("expected value at line 1 column 1"), None),
    ("cut short", b'{"jsonrpc": "2.0", "id": "cut", "method": "tools/li', PARSE,
     NOT_JSON.format("EOF while parsing a string at line 1 column 51"), "cut"),
    ("a number out of range", _request("huge", params={"n": 1})[:-3] + b"9" * 5000 + b"}}", PARSE,
     NOT_JSON.format("number out of range at line 1 column 4369"), "huge"),
    ("lone surrogate", _request("lone", params={"x": "X"}).replace(b'"X"', b'"\\ud800"'), PARSE, LONE, "lone"),
    ("deep nesting", _request("deep", params={"x": 1})[:-3] + b"[" * 100_000 + b"}}", PARSE, DEEP, "deep"),
    # Python's JSON reader (the SDK's 2026-07-28 entry's) reads 300 levels, and each of the next three.
    ("nested 300 deep", _request("d300", params={"x": 1})[:-3] + b"[" * 300 + b"]" * 300 + b"}}", PARSE, DEEP,
     "d300"),
    ("byte order mark", b"\xef\xbb\xbf" + _request("bom"), PARSE, BOM, "bom"),
    ("UTF-16", _request("utf-16").decode().encode("utf-16-le"), PARSE, UTF16, "utf-16"),
    ("a surrogate encoded as UTF-8", _call("cesu", b"A\xed\xa0\x80B"), PARSE, NOT_UTF8.format(167), "cesu"),
    ("invalid UTF-8", _call("bad-utf8", b"A\xffB"), PARSE, NOT_UTF8.format(171), "bad-utf8"),
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
        b'{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1, "reason": "\xff"}}',
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
    assert lenient_read_problem(raw) is None


@pytest.mark.parametrize(("name", "raw", "code", "message", "request_id"), MALFORMED, ids=NAMES)
def test_what_pythons_json_reader_takes_and_the_sdks_refuses_is_found(
    name: str, raw: bytes, code: int, message: str, request_id: Any
) -> None:
    """The SDK's 2026-07-28 HTTP entry reads bodies with ``json.loads``: what it reads and the SDK's
    other reader does not, the copilot must refuse before the SDK serves it (what it refuses, the
    SDK answers, and that answer is corrected)."""
    found = lenient_read_problem(raw)
    assert found in (None, message_problem(raw)), name
    try:
        json.loads(raw)
    except (ValueError, RecursionError):
        return
    assert (found is not None) is (code == PARSE), name


def test_a_valid_request_past_the_cheap_scans_is_read_once_more_and_has_no_problem() -> None:
    rows = [{"row": n, "tags": ["a"]} for n in range(150)]  # 300 brackets, 3 levels deep
    pair = _call("pair", b"\\ud83d\\ude00")  # a valid surrogate pair
    for raw in (_request("rows", params={"rows": rows}), pair, b"  " + _request("blank")):
        assert message_problem(raw) is None and lenient_read_problem(raw) is None


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
    copilot = await start_http_copilot(tmp_path_factory.mktemp("envelope-http"), TOKEN)
    assert copilot.url is not None
    try:
        async with httpx2.AsyncClient(timeout=WAIT) as http:
            session = await open_raw_session(http, copilot.url, TOKEN, client_name="envelope")
            yield http, copilot.url, session
    finally:
        assert await copilot.stop() == 0
    assert "Traceback" not in copilot.stderr_path.read_text(encoding="utf-8")


@pytest.fixture(params=["stdio", "http", f"http-{MODERN}"])
def ask(request: pytest.FixtureRequest) -> Ask:
    """Sends one message over the transport (and HTTP entry) and returns the one JSON-RPC error it gets."""
    if request.param == "stdio":
        copilot: Raw = request.getfixturevalue("over_stdio")

        async def over_stdio(raw: bytes, request_id: Any) -> dict[str, Any]:
            answers = await copilot.exchange(raw + b"\n", request_id)
            assert len(answers) == 1, answers
            return answers[0]

        return over_stdio
    http, url, session = request.getfixturevalue("over_http")
    if request.param != "http":  # no session: one request of the per-request protocol
        session = {**raw_mcp_headers(TOKEN), "mcp-protocol-version": MODERN, "mcp-method": "ping"}

    async def over_http(raw: bytes, request_id: Any) -> dict[str, Any]:
        response = await http.post(url, content=raw, headers=session)
        assert response.status_code == 400, response.text
        assert response.headers["content-type"].startswith("application/json")
        answer: dict[str, Any] = response.json()
        return answer

    return over_http


@in_module_loop
@pytest.mark.parametrize(("name", "raw", "code", "message", "request_id"), MALFORMED, ids=NAMES)
async def test_a_malformed_message_gets_the_same_answer_over_stdio_and_both_http_entries(
    ask: Ask, name: str, raw: bytes, code: int, message: str, request_id: Any
) -> None:
    assert await ask(raw, request_id) == _expected(code, message, request_id), name


async def _answers_to_a_method(
    over_stdio: Raw, over_http: tuple[httpx2.AsyncClient, str, dict[str, str]], method: str, request_id: str
) -> tuple[Any, Any, Any]:
    """The answers to a request for ``method`` over stdio, in a handshake session over HTTP (its
    event) and as a 2026-07-28 request (asserting the status the spec maps -32601 to: 404)."""
    request = {"jsonrpc": "2.0", "id": request_id, "method": method}
    [over_pipes] = await over_stdio.exchange(json.dumps(request).encode() + b"\n", request_id)

    http, url, session = over_http
    handshake = await http.post(url, json=request, headers=session)
    assert handshake.status_code == 200, handshake.text
    [event] = [line.removeprefix("data: ") for line in handshake.text.splitlines() if line.startswith("data: {")]

    envelope = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
    headers = {**raw_mcp_headers(TOKEN), "mcp-protocol-version": MODERN, "mcp-method": method}
    modern = await http.post(url, json={**request, "params": {"_meta": envelope}}, headers=headers)
    assert modern.status_code == 404, modern.text
    return over_pipes, json.loads(event), modern.json()


@in_module_loop
async def test_an_unknown_method_gets_one_answer_on_every_entry_with_its_eras_http_status(
    over_stdio: Raw, over_http: tuple[httpx2.AsyncClient, str, dict[str, str]]
) -> None:
    """``Method not found`` naming the method, the request's id, everywhere. Over HTTP the status is
    the era's: a handshake-era request is answered on its event stream (200), a 2026-07-28 one
    with the status the spec maps ``-32601`` to (404)."""
    method = "tools/frobnicate"
    expected = {"jsonrpc": "2.0", "id": "unknown", "error": {"code": -32601, "message": "Method not found", "data": method}}
    assert await _answers_to_a_method(over_stdio, over_http, method, "unknown") == (expected, expected, expected)


@in_module_loop
async def test_a_misspelt_method_is_answered_with_the_one_meant_on_every_entry(
    over_stdio: Raw, over_http: tuple[httpx2.AsyncClient, str, dict[str, str]]
) -> None:
    method = "tools/lst"
    message = "Method not found: 'tools/lst'; did you mean 'tools/list'?"
    expected = {"jsonrpc": "2.0", "id": "typo", "error": {"code": -32601, "message": message, "data": method}}
    assert await _answers_to_a_method(over_stdio, over_http, method, "typo") == (expected, expected, expected)


@in_module_loop
@pytest.mark.parametrize("response", [{"result": {}}, {"error": {"code": -1, "message": "no"}}], ids=["result", "error"])
async def test_a_response_posted_as_a_2026_07_28_request_is_told_why_no_answer_was_due(
    over_http: tuple[httpx2.AsyncClient, str, dict[str, str]], response: dict[str, Any]
) -> None:
    """The SDK refuses it as a malformed body; it is well formed, only not due (the handshake-era
    entry takes such a response with 202, as JSON-RPC asks of a response nobody waits for)."""
    http, url, _ = over_http
    headers = {**raw_mcp_headers(TOKEN), "mcp-protocol-version": MODERN}
    answer = await http.post(url, json={"jsonrpc": "2.0", "id": 7, **response}, headers=headers)
    assert answer.status_code == 400, answer.text
    error = answer.json()
    assert error["id"] is None and error["error"]["code"] == -32600
    assert "this is a JSON-RPC response" in error["error"]["message"]
    assert "inputResponses" in error["error"]["message"]


@in_module_loop
async def test_the_stdio_copilot_still_serves_after_them(over_stdio: Raw) -> None:
    await over_stdio.send(_call("after") + b"\n")
    assert (await over_stdio.answer("after"))["result"]["structuredContent"] == {"result": "x"}



@in_module_loop
async def test_params_that_break_the_schema_are_named_on_every_entry(
    over_stdio: Raw, over_http: tuple[httpx2.AsyncClient, str, dict[str, str]]
) -> None:
    """The SDK says only ``Invalid request parameters``; the copilot names what is wrong (same code and data)."""
    params = {"name": "route", "arguments": "current time"}
    request = {"jsonrpc": "2.0", "id": "args", "method": "tools/call", "params": params}
    [over_pipes] = await over_stdio.exchange(json.dumps(request).encode() + b"\n", "args")
    http, url, session = over_http
    handshake = await http.post(url, json=request, headers=session)
    [event] = [line.removeprefix("data: ") for line in handshake.text.splitlines() if line.startswith("data: {")]
    envelope = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
    headers = {**raw_mcp_headers(TOKEN), "mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": "route"}
    modern = await http.post(url, json={**request, "params": {**params, "_meta": envelope}}, headers=headers)
    message = "Invalid request parameters: tools/call: arguments: should be a valid dictionary (got 'current time')"
    expected = {"jsonrpc": "2.0", "id": "args", "error": {"code": -32602, "message": message, "data": ""}}
    assert (over_pipes, json.loads(event), modern.json()) == (expected, expected, expected), modern.status_code


@in_module_loop
@pytest.mark.parametrize("accept", ["application/json", "text/event-stream", "text/html"])
async def test_an_accept_without_json_and_sse_gets_406_saying_so_on_both_http_entries(
    over_http: tuple[httpx2.AsyncClient, str, dict[str, str]], accept: str
) -> None:
    """Before: the 2026-07-28 entry answered an empty 406, which no client can show."""
    http, url, session = over_http
    request = {"jsonrpc": "2.0", "id": "accept", "method": "ping"}
    envelope = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
    modern_headers = {**raw_mcp_headers(TOKEN), "mcp-protocol-version": MODERN, "mcp-method": "ping", "Accept": accept}
    modern = await http.post(url, json={**request, "params": {"_meta": envelope}}, headers=modern_headers)
    handshake = await http.post(url, json=request, headers={**session, "Accept": accept})
    message = "Not Acceptable: Client must accept both application/json and text/event-stream"
    for answer in (modern, handshake):
        assert answer.status_code == 406 and answer.json()["error"] == {"code": -32600, "message": message}
