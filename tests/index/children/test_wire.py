"""A child whose reply cannot be read fails that call at once, saying what was wrong (the hostile fixture)."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from index.children.connect import open_session
from index.children.wire import COPILOT_ORIGIN, JUNK_LINES_LOGGED
from index.catalog.servers import ServerConfig
from tests.support.processes import HOSTILE_SERVER

pytestmark = pytest.mark.timeout(90)

#: Far below the pool's 60 s call timeout, far above how long an answer takes even on a busy machine:
#: a reply that is waited for instead of failed runs into it.
ANSWER_BOUND = 20.0


def _hostile() -> ServerConfig:
    return ServerConfig(name="hostile", command=sys.executable, args=[str(HOSTILE_SERVER)])


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("surrogate", "lone UTF-16 surrogate escape"),
        ("deep", "nested deeper than the 200 levels"),
        ("wrong_id", "sent a reply with id '"),
        ("not_jsonrpc", '"jsonrpc": "2.0" is missing'),
    ],
)
async def test_an_unreadable_reply_fails_its_call_at_once_and_the_session_goes_on(
    kind: str, expected: str, tmp_path: Path
) -> None:
    async with open_session(_hostile(), workdir=tmp_path / "work") as connection:
        session = connection.session
        with anyio.fail_after(ANSWER_BOUND), pytest.raises(MCPError) as caught:
            await session.call_tool("bad_reply", {"kind": kind})
        assert expected in caught.value.message
        assert caught.value.data == COPILOT_ORIGIN
        assert "server 'hostile'" in caught.value.message
        with anyio.fail_after(ANSWER_BOUND):
            after = await session.call_tool("echo", {"text": "still here"})
        assert after.content[0].text == "still here"  # type: ignore[union-attr]


async def test_text_glued_before_a_reply_is_cut_off_and_the_reply_read(tmp_path: Path) -> None:
    stderr = tmp_path / "hostile.log"
    async with open_session(_hostile(), workdir=tmp_path / "work", stderr_path=stderr) as connection:
        with anyio.fail_after(ANSWER_BOUND):
            result = await connection.session.call_tool("bad_reply", {"kind": "prefix"})
        assert not result.is_error
        assert result.content[0].text == "the reply after the noise"  # type: ignore[union-attr]
    assert "bytes of text before a message" in stderr.read_text(encoding="utf-8")


@pytest.mark.parametrize("limit", [100_000, 299_990], ids=["limit-far-below-the-text", "limit-just-below-the-text"])
async def test_text_longer_than_the_line_limit_glued_before_a_reply_is_dropped_and_the_reply_read(
    tmp_path: Path, limit: int
) -> None:
    # 300,000 bytes of text, then the reply on the same line: the reply starts after the limit (far
    # after it, or within the read that crosses it), and must be read, not waited for until the timeout.
    stderr = tmp_path / "hostile.log"
    async with open_session(
        _hostile(), workdir=tmp_path / "work", stderr_path=stderr, max_message_bytes=limit
    ) as connection:
        with anyio.fail_after(ANSWER_BOUND):
            result = await connection.session.call_tool("bad_reply", {"kind": "long_prefix"})
        assert result.content[0].text == "the reply after a flood"  # type: ignore[union-attr]
        with anyio.fail_after(ANSWER_BOUND):
            after = await connection.session.call_tool("echo", {"text": "still here"})
        assert after.content[0].text == "still here"  # type: ignore[union-attr]
    log = stderr.read_text(encoding="utf-8")
    assert "wrote 299997 bytes of text before a message without a newline" in log and "dropped them" in log


async def test_requests_reusing_an_unanswered_id_are_logged_a_few_times_then_counted(tmp_path: Path) -> None:
    # Each was noted in the child's log, without the cap the other floods have: a child could fill it.
    stderr = tmp_path / "hostile.log"
    count = 40  # in one write of under 4 KB: all are read before the copilot answers the first
    async with open_session(_hostile(), workdir=tmp_path / "work", stderr_path=stderr) as connection:
        with anyio.fail_after(ANSWER_BOUND):
            result = await connection.session.call_tool("storm", {"kind": "same_id", "count": count})
        assert not result.is_error
    log = stderr.read_text(encoding="utf-8")
    assert log.count("""sent a request with id '"twin"' while its earlier request with that id""") == JUNK_LINES_LOGGED
    assert log.count("further requests reusing an unanswered id are dropped without logging") == 1
    assert f"{count - 1} requests reusing the id of an unanswered one were dropped in this session" in log
