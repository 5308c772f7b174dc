"""HTTP sessions that never say goodbye: no file descriptor each, and an idle timeout that ends them."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import httpx2
import pytest

from tests.server.support.copilot_harness import HttpCopilot, open_raw_session, read_events, start_http_copilot
from tests.support.processes import hostile_entry

pytestmark = pytest.mark.timeout(240)

TOKEN = "session-test-token-0123456789"
ABANDONED = 300


async def _serve(root: Path, **settings: str) -> tuple[HttpCopilot, str]:
    copilot = await start_http_copilot(root, TOKEN, {"evil": hostile_entry()}, **settings)
    assert copilot.url is not None
    return copilot, copilot.url


async def _abandon_a_session(http: httpx2.AsyncClient, url: str) -> None:
    """initialize + initialized, then leave without DELETE (as a crashed or careless client does)."""
    await open_raw_session(http, url, TOKEN, client_name="leaver")


def _open_files(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts descriptors in /proc (Linux)")
async def test_open_files_do_not_grow_with_abandoned_sessions(tmp_path: Path) -> None:
    # Non-dumpable processes hide /proc/<pid>/fd from other users' processes, this test included.
    copilot, url = await _serve(tmp_path, COPILOT_PROTECT_PROCESS="false")
    try:
        assert copilot.process is not None
        async with httpx2.AsyncClient(timeout=30) as http:  # one keep-alive connection for every session
            await _abandon_a_session(http, url)
            # The first session starts one-off work (reading the index for route's description opens
            # its files); measure once that is over, so only per-session growth is counted.
            with anyio.fail_after(60):
                await copilot.start_up_done.wait()
            after_one = _open_files(copilot.process.pid)
            for _ in range(ABANDONED - 1):
                await _abandon_a_session(http, url)
            after_all = _open_files(copilot.process.pid)
        assert len(list((tmp_path / "logs").glob("*.jsonl"))) == ABANDONED  # every session has its log
        assert after_all - after_one <= 3, (after_one, after_all)
    finally:
        await copilot.stop()


async def test_an_idle_session_is_ended_after_the_configured_timeout(tmp_path: Path) -> None:
    copilot, url = await _serve(tmp_path, COPILOT_HTTP_SESSION_IDLE_TIMEOUT="1")
    try:
        async with httpx2.AsyncClient(timeout=30) as http:
            await _abandon_a_session(http, url)
        (log,) = (tmp_path / "logs").glob("*.jsonl")  # session_start is written when the session ends
        with anyio.fail_after(60):
            while [event.event for event in read_events(log)] != ["session_start", "session_end"]:
                await anyio.sleep(0.1)
        assert read_events(log)[-1].reason == "idle for 1s (COPILOT_HTTP_SESSION_IDLE_TIMEOUT)"
    finally:
        await copilot.stop()
