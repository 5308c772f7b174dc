"""route's description before the copilot has read the index (``index.storage.pool_cache``): a host
that lists the tools right after ``initialize`` gets the tool names and count the last start read,
not the servers file alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from index.catalog.servers import load_servers
from server.copilot import Copilot
from index.storage.pool_cache import kept_pool, pool_path
from tests.server.support.copilot_harness import (
    built_index,  # noqa: F401 -- session fixture
    copilot_settings,
    copy_home,
    fixture_entry,
    write_servers,
)

pytestmark = pytest.mark.timeout(300)


async def test_the_first_description_has_the_tool_names_the_last_start_read_from_the_index(
    built_index: Path,  # noqa: F811 -- the imported session fixture
    tmp_path: Path,
) -> None:
    home = copy_home(built_index, tmp_path / "home")
    servers = load_servers(
        write_servers(tmp_path / "servers.json", {"alpha": fixture_entry("alpha", description="Adds numbers.", category="Math")})
    )
    settings = copilot_settings(home, tmp_path, auto_index=False)
    kept = pool_path(settings.index_dir)
    assert not kept.exists()

    # Not started: the background reading of the index waits for the first request.
    async with Copilot.running(settings, servers) as copilot:
        await copilot.refresh_route_description()
        from_servers_file = copilot.route_description()
        assert "The pool has 1 server, by category" in from_servers_file  # no tool count: nothing read yet
        await copilot.refresh_route_description(reload_index=True)
        from_index = copilot.route_description()
        assert "tools on 1 server, by category" in from_index
    pool = kept_pool(kept)
    assert pool is not None and pool.build and {"add", "echo"} <= set(pool.servers["alpha"].tools)

    async with Copilot.running(settings, servers) as copilot:
        await copilot.refresh_route_description()
        assert copilot.route_description() == from_index  # before any request, from the kept pool
        written = kept.stat().st_mtime_ns
        await copilot.refresh_route_description(reload_index=True)
        assert copilot.route_description() == from_index
        assert kept.stat().st_mtime_ns == written  # the same build: not written again
