"""The copilot over stdio against a hostile or broken host: raw bytes on real pipes, no SDK client.

Two real copilot processes (``python -m server``) serve the same fixture children: one as shipped
(``execute`` served on the fast path where that is equivalent, ``server.stdio.fast``), one with
``COPILOT_FAST_RELAY=false`` (every message through the SDK). The tests write raw lines to their
stdin and read their stdout, which must carry nothing but JSON-RPC messages; for the same input
both must answer the same, as JSON-RPC says -- ``-32700`` for what is not JSON, ``-32600`` for JSON
that is no valid request, nothing for notifications, replies and blank lines -- and keep serving.
Tests that end a copilot's input (or its output) start their own processes.

No test sleeps: a line the copilot answers while reading it (an error) is on stdout before the
answer to a ``ping`` sent after it, and every wait is bounded.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, suppress
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import mcp_types as types
import pytest
import pytest_asyncio

from server.stdio.pipes import LAST_WRITES_SECONDS, MAX_LINE_BYTES
from tests.server.support.copilot_harness import fixture_entry, write_servers
from tests.server.stdio.raw_harness import (
    INITIALIZE,
    INITIALIZED,
    UNSET,
    WAIT,
    Raw,
    line,
    ping,
    raw_copilot,
    raw_copilot_env,
)

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(120)]

PATHS = ("fast", "sdk")


def execute(request_id: Any, server: str, tool: str, params: dict[str, Any], **meta: Any) -> dict[str, Any]:
    arguments = {"server_name": server, "tool_name": tool, "params": params}
    call: dict[str, Any] = {"name": "execute", "arguments": arguments}
    if meta:
        call["_meta"] = meta
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": call}


def echo(request_id: Any, text: str = "hi") -> dict[str, Any]:
    return execute(request_id, "alpha", "echo", {"text": text})


def block(request_id: Any, label: str) -> dict[str, Any]:
    """A relay call that reports progress once ("started <label>"), then waits until cancelled."""
    return execute(request_id, "relay", "block", {"label": label}, progressToken=f"progress-{label}")


def cancel(request_id: Any, **extra: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": request_id, **extra}}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def pair(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[dict[str, Raw]]:
    async with AsyncExitStack() as stack:
        copilots = {
            path: await stack.enter_async_context(raw_copilot(tmp_path_factory.mktemp(f"robust-{path}"), path))
            for path in PATHS
        }
        yield copilots
    for copilot in copilots.values():
        assert copilot.process.returncode == 0
        copilot.assert_clean()


def _shape(answers: list[dict[str, Any]]) -> list[tuple[int, Any]]:
    return [(a["error"]["code"], a["id"]) for a in answers]


# -- lines that are no valid request ---------------------------------------------------------------
_DEEP = b"[" * 100_000
#: (name, frame, the id the answer carries, what it must be: None (nothing) or (code, id)).
MALFORMED: list[tuple[str, bytes, Any, tuple[int, Any] | None]] = [
    ("blank line", b"\n", UNSET, None),
    ("whitespace and CRLF", b" \t \r\n", UNSET, None),
    ("not JSON", b"hello copilot\n", UNSET, (-32700, None)),
    ("cut short", b'{"jsonrpc": "2.0", "id": "cut", "method": "tools/li\n', "cut", (-32700, "cut")),
    ("a batch", line([ping("in-batch")]), "in-batch", (-32600, None)),
    ("an empty batch", b"[]\n", UNSET, (-32600, None)),
    ("a bare number", b"5\n", UNSET, (-32600, None)),
    ("no jsonrpc member", b'{"id": "no-jsonrpc", "method": "tools/list"}\n', "no-jsonrpc", (-32600, "no-jsonrpc")),
    ("jsonrpc 1.0", b'{"jsonrpc": "1.0", "id": "v1", "method": "ping"}\n', "v1", (-32600, "v1")),
    ("params an array", b'{"jsonrpc": "2.0", "id": "arr", "method": "ping", "params": [1]}\n', "arr", (-32600, "arr")),
    ("lone surrogate", line(echo("lone")).replace(b'"hi"', b'"\\ud800"'), "lone", (-32700, "lone")),
    ("100k brackets", line(echo("deep"))[:-2] + b', "x": ' + _DEEP + b"}\n", "deep", (-32700, "deep")),
    ("byte order mark", b"\xef\xbb\xbf" + line(echo("bom")), "bom", (-32700, "bom")),
    # Not served with U+FFFD in place of the bytes (the SDK's reader): MCP's messages are UTF-8.
    ("not UTF-8", line(echo("bad-utf8", "AXB")).replace(b"X", b"\xff"), "bad-utf8", (-32700, "bad-utf8")),
    ("not UTF-8: a surrogate", line(echo("cesu", "AXB")).replace(b"X", b"\xed\xa0\x80"), "cesu", (-32700, "cesu")),
    ("not UTF-8: a notification", line(cancel("nobody", reason="X")).replace(b"X", b"\xff"), UNSET, None),
    ("a reply", b'{"jsonrpc": "2.0", "id": "reply", "result": {}}\n', "reply", None),
    ("an error reply", b'{"jsonrpc": "2.0", "id": "e", "error": {"code": 1, "message": "x"}}\n', "e", None),
    ("a malformed notification", line({**cancel("nobody"), "params": "junk"}), UNSET, None),
    ("a cancellation for no request", line(cancel("nobody")), UNSET, None),
    ("id null", line(echo(None)), UNSET, (-32600, None)),
    ("id 1.5", line(echo(1.5)), UNSET, (-32600, None)),
    ("id 2.0", line(ping(2.0)), UNSET, (-32600, None)),
    ("id an object", line(echo({"id": 1})), UNSET, (-32600, None)),
    ("id true", line(ping(True)), UNSET, (-32600, None)),
    ("a notification with id null", line({**cancel("nobody"), "id": None}), UNSET, None),
]


async def test_lines_that_are_no_request_are_answered_as_json_rpc_says_the_same_way_on_both_paths(
    pair: dict[str, Raw],
) -> None:
    seen: dict[str, dict[str, list[dict[str, Any]]]] = {path: {} for path in PATHS}
    for path, copilot in pair.items():
        for name, frame, request_id, _ in MALFORMED:
            seen[path][name] = await copilot.exchange(frame, request_id)
    for name, _, _, expected in MALFORMED:
        assert seen["fast"][name] == seen["sdk"][name], name
        assert _shape(seen["fast"][name]) == ([] if expected is None else [expected]), name
    messages = {name: answers[0]["error"]["message"] for name, answers in seen["fast"].items() if answers}
    assert "batch" in messages["a batch"]
    assert '"jsonrpc" must be "2.0" (it is missing)' in messages["no jsonrpc member"]
    assert "byte order mark" in messages["byte order mark"]
    assert "not valid UTF-8 (at byte 171)" in messages["not UTF-8"]
    assert "nested deeper than the 200 levels" in messages["100k brackets"]
    assert '"id" must be a string or an integer, not 1.5' in messages["id 1.5"]
    assert '"params" must be an object' in messages["params an array"]
    assert "For further information" not in json.dumps(messages)  # no pydantic dumps
    for copilot in pair.values():  # still serving
        await copilot.send(line(echo("after", "still here")))
        assert (await copilot.answer("after"))["result"]["structuredContent"] == {"result": "still here"}
        copilot.assert_clean()


async def test_requests_in_odd_but_valid_shapes_are_answered_the_same_on_both_paths(pair: dict[str, Raw]) -> None:
    frames: list[tuple[Any, bytes]] = [
        ("crlf", line(echo("crlf"))[:-1] + b"\r\n"),
        ("leading-space", b"   " + line(echo("leading-space"))),
        (10**40, line(echo(10**40))),
        ("s" * 10_000, line(echo("s" * 10_000))),
        (-7, line(echo(-7))),
        ("8", line(echo("8"))),  # a string id that looks like a number
        ("pair", line(echo("pair", "X")).replace(b'"X"', b'"\\ud83d\\ude00"')),  # a valid surrogate pair
        ("token-true", line(execute("token-true", "alpha", "echo", {"text": "t"}, progressToken=True))),
        ("token-float", line(execute("token-float", "alpha", "echo", {"text": "t"}, progressToken=1.5))),
        ("nan", line(execute("nan", "alpha", "add", {"a": float("nan"), "b": 1}))),
        ("arguments-null", b'{"jsonrpc": "2.0", "id": "arguments-null", "method": "tools/call", '
                           b'"params": {"name": "execute", "arguments": null}}\n'),
    ]  # fmt: skip
    answers: dict[str, list[dict[str, Any]]] = {}
    for path, copilot in pair.items():
        await copilot.send(*(frame for _, frame in frames))
        answers[path] = [await copilot.answer(request_id) for request_id, _ in frames]
        # Two calls with one id, both on the fast path, and one taken there beside one it leaves to the SDK.
        await copilot.send(line(echo("twice", "one")), line(echo("twice", "two")))
        sdk_way = echo("mixed", "sdk-way")
        sdk_way["params"]["_meta"] = {"x": 1}
        await copilot.send(line(echo("mixed", "fast-way")), line(sdk_way))
        twice = [await copilot.answer(request_id) for request_id in ("twice", "twice", "mixed", "mixed")]
        answers[path].extend(sorted(twice, key=json.dumps))
    assert answers["fast"] == answers["sdk"]
    by_id = {json.dumps(a["id"]): a for a in answers["fast"]}
    assert by_id['"crlf"']["result"]["structuredContent"] == {"result": "hi"}
    assert by_id[json.dumps(10**40)]["result"]["structuredContent"] == {"result": "hi"}
    assert by_id['"token-float"']["error"]["code"] == -32602
    served = pair["fast"].log()
    for request_id in ("crlf", "leading-space", "twice"):
        assert f"answered execute request {request_id!r} on the fast path" in served, request_id
    for copilot in pair.values():
        copilot.assert_clean()


# -- cancellation --------------------------------------------------------------------------------
#: (label, the notification for the call's id, whether the SDK's reader reads it as a cancellation).
CANCELS: list[tuple[str, Any, bool]] = [
    ("reason-names-tools-call", lambda rid: line(cancel(rid, reason='"tools/call"')), True),
    ("id-null", lambda rid: line({**cancel(rid), "id": None}), True),
    ("string-for-int", lambda rid: line(cancel(str(rid))), True),
    ("with-a-valid-id", lambda rid: line({**cancel(rid), "id": f"as-request-{rid}"}), False),
    ("no-jsonrpc", lambda rid: line({k: v for k, v in cancel(rid).items() if k != "jsonrpc"}), False),
    ("lone-surrogate", lambda rid: line(cancel(rid, reason="X")).replace(b'"X"', b'"\\udc00"'), False),
    ("byte-order-mark", lambda rid: b"\xef\xbb\xbf" + line(cancel(rid)), False),
]


def _cancelled_on_the_fast_path(log: str, rid: int) -> bool:
    return re.search(rf"host cancelled execute request '?{rid}'? \(fast path\)", log) is not None


async def test_a_cancellation_reaches_a_fast_call_exactly_when_the_sdk_would_read_one(pair: dict[str, Raw]) -> None:
    for path, copilot in pair.items():
        for number, (label, notification, cancels) in enumerate(CANCELS):
            rid, name = 7000 + number, f"{path}-{label}"
            await copilot.send(line(block(rid, name)))
            started = await copilot.notification("notifications/progress")
            assert started["params"]["message"] == f"started {name}"
            assert await copilot.exchange(notification(rid)) == [], label
            if path == "fast":  # (the line was read, and taken or not, before the ping after it)
                assert _cancelled_on_the_fast_path(copilot.log(), rid) is cancels, label
            if label == "with-a-valid-id":  # a request by that name, which the SDK does not serve
                assert (await copilot.answer(f"as-request-{rid}"))["error"]["code"] == -32601
            if not cancels:
                await copilot.send(line(cancel(rid)))  # the real one, which frees the call's slot
            # The child saw the cancellation (for those that cancel: of the odd notification itself).
            await copilot.send(line(execute(f"check-{rid}", "relay", "cancelled", {"wait_for": name})))
            check = await copilot.answer(f"check-{rid}")
            assert name in check["result"]["structuredContent"]["result"], label
        copilot.assert_clean()


# -- a line over the limit --------------------------------------------------------------------------
def _peak_rss(process: anyio.abc.Process) -> int:
    for entry in Path(f"/proc/{process.pid}/status").read_text().splitlines():
        if entry.startswith("VmHWM:"):
            return int(entry.split()[1]) * 1024
    raise AssertionError("no VmHWM")


async def test_a_line_over_the_limit_is_answered_without_being_held_in_memory(pair: dict[str, Raw]) -> None:
    padding = b"x" * (MAX_LINE_BYTES * 3 // 2)
    id_first = line(echo("long-head", "X")).replace(b'"X"', b'"' + padding + b'"')
    id_last = b'{"params": {"name": "route", "arguments": {"query": "' + padding + b'"}}, "method": "tools/call", ' \
              b'"jsonrpc": "2.0", "id": "long-tail"}\n'  # fmt: skip
    # JSON's members come in any order: these were answered with "id": null, which no host can match.
    id_leading = b'{"id": "long-lead", "jsonrpc": "2.0", "method": "ping", "params": {"x": "' + padding + b'"}}\n'
    id_then_params = b'{"jsonrpc": "2.0", "method": "ping", "params": {"x": "' + padding + b'"}, "id": 7, "z": 1}\n'
    # A notification gets no answer, long or not (it was answered, with "id": null).
    note = b'{"jsonrpc": "2.0", "method": "notifications/progress", "params": {"x": "' + padding + b'"}}\n'
    for copilot in pair.values():
        before = _peak_rss(copilot.process)
        await copilot.send(note)
        for request_id, frame in (("long-head", id_first), ("long-tail", id_last), ("long-lead", id_leading), (7, id_then_params)):
            await copilot.send(frame)
            refused = await copilot.answer(request_id)
            assert refused["error"]["code"] == -32600
            assert f"over the {MAX_LINE_BYTES:,} bytes the copilot reads in one message" in refused["error"]["message"]
        # The SDK's reader would hold each line several times over (bytes, text, parsed).
        assert _peak_rss(copilot.process) - before < 6 * MAX_LINE_BYTES
        await copilot.send(line(echo("after-long", "fine")))
        assert (await copilot.answer("after-long"))["result"]["structuredContent"] == {"result": "fine"}
        assert not [message for message in copilot.inbox if "error" in message]  # nothing for the notification
        copilot.assert_clean()


# -- the end of input, and a host that stops listening ---------------------------------------------------
async def _read_to_the_end(copilot: Raw) -> list[dict[str, Any]]:
    messages = list(copilot.inbox)
    with anyio.fail_after(WAIT):
        with suppress(anyio.EndOfStream):
            while True:
                messages.append(await copilot.read())
        assert await copilot.process.wait() == 0
    return messages


async def _answers_after_the_end_of_input(
    tmp_path: Path, host: Callable[[Raw, str], Awaitable[None]]
) -> dict[str, list[dict[str, Any]]]:
    """Per path: the answers (no requests) a copilot writes once ``host`` sent its lines and closed stdin."""
    ends: dict[str, list[dict[str, Any]]] = {}

    async def run(path: str) -> None:
        async with raw_copilot(tmp_path / path, path) as copilot:
            await host(copilot, path)
            await copilot.process.stdin.aclose()  # type: ignore[union-attr]
            ends[path] = [m for m in await _read_to_the_end(copilot) if "method" not in m]
            copilot.assert_clean()

    async with anyio.create_task_group() as group:
        for path in PATHS:
            group.start_soon(run, path)
    return ends


async def test_calls_cut_off_by_the_end_of_input_are_answered_connection_closed(tmp_path: Path) -> None:
    async def host(copilot: Raw, path: str) -> None:
        await copilot.send(line(block("gone", f"{path}-a")), line(block("gone", f"{path}-b")))
        for _ in range(2):
            await copilot.notification("notifications/progress")
        # The last line has no newline: it is read all the same.
        await copilot.send(b'{"jsonrpc": "2.0", "id": "last", "method": "tools/li')

    ends = await _answers_after_the_end_of_input(tmp_path, host)
    for path in PATHS:
        assert sorted(_shape(ends[path])) == [(-32700, "last"), (-32000, "gone"), (-32000, "gone")], path


async def test_requests_sent_just_before_the_end_of_input_are_answered(tmp_path: Path) -> None:
    # Before: the SDK cancelled a request it had just received before its handler started, so the
    # last request of a host that then closed stdin got no answer at all.
    async def host(copilot: Raw, path: str) -> None:
        await copilot.send(
            line(ping("ping")),
            line({"jsonrpc": "2.0", "id": "tools", "method": "tools/list"}),
            line({"jsonrpc": "2.0", "id": "bad", "method": "tools/call", "params": {"name": "route", "arguments": [1]}}),
        )

    ends = await _answers_after_the_end_of_input(tmp_path, host)
    for path in PATHS:
        answers = {m["id"]: m for m in ends[path] if m["id"] != "initialize"}
        assert set(answers) == {"ping", "tools", "bad"}, path
        assert answers["ping"]["result"] == {}
        assert {tool["name"] for tool in answers["tools"]["result"]["tools"]} >= {"route", "execute"}
        assert answers["bad"]["error"] == {
            "code": -32602,
            "message": "Invalid request parameters: tools/call: arguments: should be a valid dictionary",
            "data": "",
        }


async def test_the_copilot_leaves_when_the_host_stops_listening(tmp_path: Path) -> None:
    """A host that closed its input but never reads the answers, and one that closed its end of
    stdout: the copilot ends the session and exits, without a traceback."""

    async def never_read(path: str) -> None:
        read_end, write_end = os.pipe()
        with suppress(OSError):
            fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, 4096)
        try:
            async with raw_copilot(tmp_path / f"unread-{path}", path, stdout=write_end, initialize=False) as copilot:
                os.close(write_end)
                write_end = -1
                # Far more answers (~6 kB each) than the pipe and the copilot's write buffer hold.
                listings = (line({"jsonrpc": "2.0", "id": n, "method": "tools/list"}) for n in range(100))
                await copilot.send(line(INITIALIZE), line(INITIALIZED), *listings)
                await copilot.process.stdin.aclose()  # type: ignore[union-attr]
                with anyio.fail_after(WAIT):
                    assert await copilot.process.wait() == 0
                assert f"has not read the copilot's answers in the {LAST_WRITES_SECONDS:g} s" in copilot.log()
                copilot.assert_clean()
        finally:
            os.close(read_end)
            if write_end >= 0:
                os.close(write_end)

    async def stopped_reading(path: str) -> None:
        read_end, write_end = os.pipe()
        try:
            async with raw_copilot(tmp_path / f"closed-{path}", path, stdout=write_end, initialize=False) as copilot:
                os.close(read_end)
                os.close(write_end)
                read_end = write_end = -1
                await copilot.send(line(INITIALIZE))  # its answer finds no reader; stdin stays open
                with anyio.fail_after(WAIT):
                    assert await copilot.process.wait() == 0
                assert "the host closed its end of the copilot's output" in copilot.log()
                copilot.assert_clean()
        finally:
            for fd in (read_end, write_end):
                if fd >= 0:
                    os.close(fd)

    async with anyio.create_task_group() as group:
        for path in PATHS:
            group.start_soon(never_read, path)
            group.start_soon(stopped_reading, path)


# -- without pipes ---------------------------------------------------------------------------------------
async def test_without_pipes_the_sdks_own_transport_answers_unreadable_lines_alike(tmp_path: Path) -> None:
    """stdin a regular file: the SDK's own transport reads it (no line limit there, a
    request with an id of the wrong type is dropped as a notification, and invalid UTF-8 is read as
    U+FFFD), the answers are the same."""
    cases = [case for case in MALFORMED if not case[0].startswith(("id ", "not UTF-8"))]
    early = line({"jsonrpc": "2.0", "id": "early", "method": "tools/list"})  # before the handshake
    # Right before the end of input, behind a long answer the SDK's writer is still writing: the
    # last request went unanswered 4 times in 6.
    last = line({"jsonrpc": "2.0", "id": "tools", "method": "tools/list"}) + line(ping("last"))
    frames = early + line(INITIALIZE) + line(INITIALIZED) + b"".join(frame for _, frame, _, _ in cases) + last
    (tmp_path / "in.jsonl").write_bytes(frames)
    servers = write_servers(tmp_path / "servers.json", {"alpha": fixture_entry("alpha")})
    # stdin a file (so the SDK's reader serves it), stdout a pipe read by the test, as `< in.jsonl | grep`.
    with (tmp_path / "in.jsonl").open("rb") as stdin, (tmp_path / "stderr.log").open("wb") as stderr:
        process = await anyio.open_process(
            [sys.executable, "-m", "server", "--servers", str(servers)],
            env=raw_copilot_env(tmp_path, "sdk"),
            cwd=str(tmp_path),
            stdin=stdin,
            stderr=stderr,
        )
        async with process:
            assert process.stdout is not None
            written = bytearray()
            with anyio.fail_after(WAIT):
                async for chunk in process.stdout:
                    written += chunk
                assert await process.wait() == 0
    out = bytes(written).splitlines()
    for raw in out:
        types.jsonrpc_message_adapter.validate_json(raw)
    answers = [json.loads(raw) for raw in out]
    errors = [answer for answer in answers if "error" in answer and answer.get("id") != "early"]
    assert _shape(errors) == [expected for _, _, _, expected in cases if expected is not None]
    assert answers[0] == {
        "jsonrpc": "2.0",
        "id": "early",
        "error": {
            "code": -32602,
            "message": "Invalid request parameters: tools/list was sent before initialize; send initialize, then "
            "notifications/initialized, then your requests",
            "data": "",
        },
    }
    assert answers[-1] == {"jsonrpc": "2.0", "id": "last", "result": {}}
    assert "Traceback" not in (tmp_path / "stderr.log").read_text(encoding="utf-8", errors="replace")
