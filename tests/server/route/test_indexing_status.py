"""Background indexing's status, which every route answer carries (server.route.indexing): a crawl failure
is reported while it is true and no longer once the server is fixed or removed.
"""

from __future__ import annotations

import threading
from pathlib import Path

import anyio
import pytest

from index.catalog.servers import load_servers
from index.search.tool_index import ToolIndex
from server.route.indexing import BackgroundIndexer
from tests.server.support.copilot_harness import copilot_settings, fixture_entry, write_servers

from tests.index.index_support import make_records

pytestmark = pytest.mark.timeout(240)


def _servers(tmp_path: Path, **entries: dict) -> dict:
    return load_servers(write_servers(tmp_path / "servers.json", entries)).servers


def _indexer(tmp_path: Path) -> tuple[ToolIndex, BackgroundIndexer]:
    """A background indexer over an index that already holds the test records."""
    settings = copilot_settings(tmp_path / "home", tmp_path)
    index = ToolIndex.open(settings)
    index.sync(make_records(), catalog="tests", catalog_digest="abc")
    return index, BackgroundIndexer(settings, index)


async def _run(indexer: BackgroundIndexer, servers: dict) -> None:
    with anyio.fail_after(120):
        await indexer.run(servers)


async def test_a_fixed_or_removed_server_is_no_longer_reported_as_failed(tmp_path: Path) -> None:
    index, indexer = _indexer(tmp_path)

    await _run(indexer, _servers(tmp_path, delta=fixture_entry("delta", "crash-at-start")))
    assert set(indexer.status().failed_servers) == {"delta"}

    # The user fixes the server: it is crawled, indexed, and no longer listed as failed.
    await _run(indexer, _servers(tmp_path, delta=fixture_entry("delta", tools=["echo"])))
    assert index.get("delta", "echo") is not None
    assert indexer.status().failed_servers == {}

    # A failure of a server later removed from the file is not reported either.
    await _run(indexer, _servers(tmp_path, delta=fixture_entry("delta", tools=["echo"]), omega=fixture_entry("omega", "crash-at-start")))
    assert set(indexer.status().failed_servers) == {"omega"}
    await _run(indexer, _servers(tmp_path, delta=fixture_entry("delta", tools=["echo"])))
    assert indexer.status().failed_servers == {}


def _starts(root: Path, server: str) -> int:
    """How many times ``server`` was started, from its stderr logs (a "starting" line per start)."""
    return sum(
        log.read_text(encoding="utf-8", errors="replace").count("] starting ")
        for log in root.rglob(f"{server}*.log")
    )


async def test_a_server_that_failed_is_not_crawled_again_at_every_edit_of_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: every edit of the servers file planned indexing again, and a server that cannot start
    # was started each time (109 times in 200 edits of other entries).
    index, indexer = _indexer(tmp_path)
    broken = fixture_entry("delta", "crash-at-start")

    await _run(indexer, _servers(tmp_path, delta=broken))
    await _run(indexer, _servers(tmp_path, delta=broken, omega=fixture_entry("omega", tools=["echo"])))
    assert _starts(tmp_path, "delta") == 1
    assert set(indexer.status().failed_servers) == {"delta"}  # still reported
    assert index.get("omega", "echo") is not None  # the edit's own server was indexed

    monkeypatch.setattr("server.route.indexing.RECRAWL_AFTER_FAILURE", 0.0)  # its time has come
    await _run(indexer, _servers(tmp_path, delta=broken))
    assert _starts(tmp_path, "delta") == 2


async def test_indexing_is_in_progress_while_the_servers_are_compared_with_the_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: the first route after start-up (the plan still being made in a thread, nothing pending
    # yet) said "Nothing matched" with in_progress false, though a crawl was about to start.
    from server.route.answer import indexing_sentence  # noqa: PLC0415

    index, indexer = _indexer(tmp_path)
    planning, release = anyio.Event(), threading.Event()
    plan = indexer._plan

    def slow_plan(servers: dict) -> object:
        anyio.from_thread.run_sync(planning.set)
        release.wait(60)
        return plan(servers)

    monkeypatch.setattr(indexer, "_plan", slow_plan)
    assert not indexer.status().in_progress
    async with anyio.create_task_group() as group:
        group.start_soon(_run, indexer, _servers(tmp_path, delta=fixture_entry("delta", tools=["echo"])))
        with anyio.fail_after(30):
            await planning.wait()
        status = indexer.status()
        assert status.in_progress and status.pending_servers == []
        assert "comparing its servers with the tool index" in indexing_sentence(status)
        release.set()
    assert not indexer.status().in_progress and index.get("delta", "echo") is not None
