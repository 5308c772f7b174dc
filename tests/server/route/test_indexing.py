"""Which servers startup indexing takes from the catalog, crawls, or leaves alone (server.route.indexing)."""

from __future__ import annotations

from index.catalog.records import Catalog, CatalogServer, ToolRecord
from index.catalog.servers import ServerConfig
import json
from pathlib import Path

from server.route.indexing import CrawledServer, _load_state, _save_state, plan_indexing


def _servers(**commands: str) -> dict[str, ServerConfig]:
    return {name: ServerConfig(name=name, command=command) for name, command in commands.items()}


def _catalog(servers: dict[str, ServerConfig], *, tools_for: tuple[str, ...], stale: tuple[str, ...] = ()) -> Catalog:
    return Catalog(
        servers={
            name: CatalogServer(launch_hash="old-hash" if name in stale else config.launch_hash())
            for name, config in servers.items()
        },
        tools=[ToolRecord(server=name, name="t") for name in tools_for],
    )


def test_indexed_servers_with_unchanged_launch_are_left_alone() -> None:
    servers = _servers(a="run-a")
    plan = plan_indexing(servers, {"a"}, _catalog(servers, tools_for=("a",)), {})
    assert plan.servers == []


def test_unknown_servers_are_crawled() -> None:
    servers = _servers(a="run-a", new="run-new")
    plan = plan_indexing(servers, {"a"}, None, {})
    assert plan.crawl == ["new"] and plan.from_catalog == []


def test_servers_in_the_catalog_are_indexed_from_it_without_crawling() -> None:
    servers = _servers(a="run-a", b="run-b")
    plan = plan_indexing(servers, set(), _catalog(servers, tools_for=("a", "b")), {})
    assert plan.from_catalog == ["a", "b"] and plan.crawl == []


def test_a_changed_launch_config_means_a_new_crawl() -> None:
    servers = _servers(a="run-a", b="run-b")
    plan = plan_indexing(servers, {"a", "b"}, _catalog(servers, tools_for=("a", "b"), stale=("b",)), {})
    assert plan.crawl == ["b"]


def test_the_last_crawl_overrides_the_catalogs_launch_hash() -> None:
    servers = _servers(b="run-b")
    state = {"b": CrawledServer(servers["b"].launch_hash(), 3)}
    plan = plan_indexing(servers, {"b"}, _catalog(servers, tools_for=("b",), stale=("b",)), state)
    assert plan.servers == []


def test_disabled_servers_are_never_indexed() -> None:
    servers = {"off": ServerConfig(name="off", command="x", enabled=False)}
    assert plan_indexing(servers, set(), None, {}).servers == []


def test_a_server_crawled_before_with_no_tools_is_not_crawled_again() -> None:
    servers = _servers(empty="run-empty")
    state = {"empty": CrawledServer(servers["empty"].launch_hash(), 0)}
    assert plan_indexing(servers, set(), None, state).servers == []


def test_a_server_whose_tools_the_index_lost_is_crawled_again() -> None:
    """``index build`` from a catalog without a server the copilot indexed itself removes its
    tools: the state's "crawled with this config" must not read as "it had none" forever."""
    servers = _servers(lost="run-lost", legacy="run-legacy")
    state = {
        "lost": CrawledServer(servers["lost"].launch_hash(), 3),
        "legacy": CrawledServer(servers["legacy"].launch_hash()),  # a state written before counts were
    }
    assert plan_indexing(servers, set(), None, state).crawl == ["lost", "legacy"]
    assert plan_indexing(servers, {"lost", "legacy"}, None, state).servers == []


def test_the_state_file_keeps_tool_counts_and_reads_the_first_format(tmp_path: Path) -> None:
    path = tmp_path / "indexed-servers.json"
    _save_state(path, {"b": CrawledServer("hash-b", 2), "a": CrawledServer("hash-a", 0)})
    assert json.loads(path.read_text()) == {
        "a": {"launch_hash": "hash-a", "tools": 0},
        "b": {"launch_hash": "hash-b", "tools": 2},
    }
    assert _load_state(path) == {"a": CrawledServer("hash-a", 0), "b": CrawledServer("hash-b", 2)}
    path.write_text(json.dumps({"old": "hash-old", "odd": 7, "bad": {"tools": 1}, "neg": {"launch_hash": "h", "tools": -1}}))
    assert _load_state(path) == {"old": CrawledServer("hash-old"), "neg": CrawledServer("h")}
