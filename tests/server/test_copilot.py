"""``Copilot`` in-process, with the real index and child pool: background indexing of servers the
index does not know, and edits of the servers file while running (server.copilot).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest

import server.copilot as copilot_module
from index.catalog.servers import load_servers
from server.copilot import Copilot
from server.route.indexing import STATE_FILE_NAME
from server.settings import ServerSettings
from tests.server.copilot_harness import (
    built_index,  # noqa: F401 -- session fixture
    copy_home,
    fixture_entry,
    write_servers,
)

pytestmark = pytest.mark.timeout(120)


def _settings(home: Path, tmp_path: Path, **extra: Any) -> ServerSettings:
    return ServerSettings(
        home=home, catalog=tmp_path / "no-catalog.json", log_dir=tmp_path / "logs", crawl_timeout=60, **extra
    )


def _servers_of(result: Any) -> set[str]:
    return {tool["server"] for tool in result.structured_content["tools"]}


async def test_servers_unknown_to_the_index_are_crawled_and_indexed_in_the_background(
    built_index: Path,  # noqa: F811 -- the imported session fixture
    tmp_path: Path,
) -> None:
    home = copy_home(built_index, tmp_path / "home")
    servers_path = write_servers(
        tmp_path / "servers.json",
        {
            "alpha": fixture_entry("alpha"),
            "delta": fixture_entry("delta", tools=["echo", "structured"]),
            "broken": fixture_entry("broken", "crash-at-start"),
        },
    )
    servers = load_servers(servers_path)
    async with Copilot.running(_settings(home, tmp_path), servers, start_now=True) as copilot:
        with anyio.fail_after(90):
            await copilot.indexer.done.wait()
        status = copilot.indexer.status()
        assert not status.in_progress
        assert "broken" in status.failed_servers and "delta" not in status.failed_servers

        record = copilot.index.get("delta", "structured")
        assert record is not None and record.input_schema["required"] == ["city"]
        routed = await copilot.route("structured weather report for a city", 3, "delta", None)
        assert not routed.is_error
        assert _servers_of(routed) == {"delta"}
        failed = await copilot.route("echo the given text back", 3, "broken", None)
        assert failed.is_error and "server 'broken' is in the servers file, but its tools are not indexed: its crawl failed" in (
            failed.content[0].text
        )

    state = json.loads((home / STATE_FILE_NAME).read_text())
    assert state["delta"] == servers.servers["delta"].launch_hash()
    assert "broken" not in state
    # The background crawl's children log and work where the pool's children do.
    assert (home / "logs" / "children" / "broken.log").is_file()
    assert (home / "work" / "delta").is_dir()


async def test_servers_removed_from_the_file_disappear_from_route(
    built_index: Path,  # noqa: F811 -- the imported session fixture
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(copilot_module, "SERVERS_FILE_CHECK_INTERVAL", 0.0)
    home = copy_home(built_index, tmp_path / "home")
    servers_path = write_servers(
        tmp_path / "servers.json", {"alpha": fixture_entry("alpha"), "beta": fixture_entry("beta")}
    )
    settings = _settings(home, tmp_path, auto_index=False)
    async with Copilot.running(settings, load_servers(servers_path), start_now=True) as copilot:
        before = await copilot.route("echo the given text back", 10, None, None)
        assert _servers_of(before) == {"alpha", "beta"}

        write_servers(servers_path, {"alpha": fixture_entry("alpha")})
        stat = servers_path.stat()
        os.utime(servers_path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
        after = await copilot.route("echo the given text back", 10, None, None)
        assert _servers_of(after) == {"alpha"}

        gone = await copilot.execute("beta", "echo", {"text": "x"}, None, None, None)
        assert gone.is_error
        assert "Unknown server 'beta'" in gone.content[0].text


async def test_a_route_before_start_up_indexing_has_run_says_to_wait_not_to_build(tmp_path: Path) -> None:
    servers = load_servers(write_servers(tmp_path / "servers.json", {"alpha": fixture_entry("alpha")}))
    # Not started (no session yet): the start-up work, indexing included, has not begun.
    async with Copilot.running(_settings(tmp_path / "fresh", tmp_path), servers) as copilot:
        routed = await copilot.route("echo the given text back", 3, None, None)
        assert routed.is_error and "building its tool index in the background" in routed.content[0].text
        assert "python -m index" not in routed.content[0].text
    # Without background indexing the index must be built by hand, and route says how.
    async with Copilot.running(_settings(tmp_path / "fresh-2", tmp_path, auto_index=False), servers) as copilot:
        routed = await copilot.route("echo the given text back", 3, None, None)
        assert routed.is_error and "python -m index" in routed.content[0].text


async def test_nothing_found_suggests_dropping_the_server_filter_only_when_one_was_given(
    built_index: Path,  # noqa: F811 -- the imported session fixture
    tmp_path: Path,
) -> None:
    home = copy_home(built_index, tmp_path / "home")
    servers = load_servers(write_servers(tmp_path / "servers.json", {"alpha": fixture_entry("alpha")}))
    async with Copilot.running(_settings(home, tmp_path, auto_index=False), servers, start_now=True) as copilot:
        unfiltered = await copilot.route("a prompt to greet people", 3, None, None, kind="prompt")
        filtered = await copilot.route("a prompt to greet people", 3, "alpha", None, kind="prompt")
    assert unfiltered.structured_content["tools"] == [] == filtered.structured_content["tools"]
    assert "Nothing matched" in unfiltered.content[0].text and "server filter" not in unfiltered.content[0].text
    assert "or drop the server filter." in filtered.content[0].text
