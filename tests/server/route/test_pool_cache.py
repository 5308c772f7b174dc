"""The pool route's description keeps for the next start (server.route.pool_cache): a host that lists
the tools right after ``initialize`` gets the tool names and count, not the servers file alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from index.catalog.servers import load_servers
from server.copilot import Copilot
from server.route.description import PoolServer
from server.route.pool_cache import load_pool, pool_cache_path, save_pool
from tests.server.copilot_harness import (
    built_index,  # noqa: F401 -- session fixture
    copilot_settings,
    copy_home,
    fixture_entry,
    write_servers,
)

pytestmark = pytest.mark.timeout(300)


def test_a_kept_pool_reads_back_as_written(tmp_path: Path) -> None:
    path = pool_cache_path(tmp_path / "index")
    pool = {"excel": PoolServer("excel", "Excel workbooks.", "Office", ["excel_read_sheet", "excel_write_to_sheet"])}
    save_pool(path, "build-1", pool)
    assert load_pool(path) == ("build-1", pool)


@pytest.mark.parametrize(
    "content",
    [b"", b"{not json", b'{"version": 1, "servers": {}}', b'{"version": 99, "build": "b", "servers": {}}', b"\xff\xfe"],
    ids=["empty", "not-json", "no-build", "other-version", "not-utf8"],
)
def test_an_unusable_file_is_no_pool_and_no_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "route-pool.json"
    path.write_bytes(content)
    assert load_pool(path) is None
    assert load_pool(tmp_path / "missing.json") is None


def test_a_pool_that_cannot_be_kept_is_only_logged(tmp_path: Path) -> None:
    blocker = tmp_path / "index"
    blocker.write_text("a file where the index directory should be", encoding="utf-8")
    save_pool(pool_cache_path(blocker), "build-1", {"a": PoolServer("a")})  # no exception
    assert blocker.is_file()


async def test_the_first_description_has_the_tool_names_the_last_start_read_from_the_index(
    built_index: Path,  # noqa: F811 -- the imported session fixture
    tmp_path: Path,
) -> None:
    home = copy_home(built_index, tmp_path / "home")
    servers = load_servers(
        write_servers(tmp_path / "servers.json", {"alpha": fixture_entry("alpha", description="Adds numbers.", category="Math")})
    )
    settings = copilot_settings(home, tmp_path, auto_index=False)
    kept = pool_cache_path(settings.index_dir)
    assert not kept.exists()

    # Not started: the background reading of the index waits for the first request.
    async with Copilot.running(settings, servers) as copilot:
        await copilot.refresh_route_description()
        from_servers_file = copilot.route_description()
        assert "The pool has 1 server, by category" in from_servers_file  # no tool count: nothing read yet
        await copilot.refresh_route_description(reload_index=True)
        from_index = copilot.route_description()
        assert "tools on 1 server, by category" in from_index
    build, pool = load_pool(kept) or ("", {})
    assert build and {"add", "echo"} <= set(pool["alpha"].tools)

    async with Copilot.running(settings, servers) as copilot:
        await copilot.refresh_route_description()
        assert copilot.route_description() == from_index  # before any request, from the kept pool
        written = kept.stat().st_mtime_ns
        await copilot.refresh_route_description(reload_index=True)
        assert copilot.route_description() == from_index
        assert kept.stat().st_mtime_ns == written  # the same build: not written again
