"""route's generated description (server.route.description) and how the copilot keeps it current."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import anyio
import pytest

import server.copilot as copilot_module
from index.catalog.servers import load_servers
from server.copilot import Copilot
from server.route.description import GUIDANCE, PoolServer, describe_pool
from tests.server.support.copilot_harness import (
    built_index,  # noqa: F401 -- session fixture
    copilot_settings,
    copy_home,
    fixture_entry,
    write_servers,
)

pytestmark = pytest.mark.timeout(300)

POOL = [
    PoolServer("excel", "Reads and writes MS Excel workbooks.", "File Access", ["excel_read_sheet", "excel_write_to_sheet"]),
    PoolServer("word-document-server", "Create and edit Word documents.", "File Access", ["create_document", "add_paragraph"]),
    PoolServer("yahoo-finance", "Stock prices and company financials.", "Finance", ["get_stock_price", "get_income_statement"]),
    PoolServer("weather", "Weather forecasts for any city.", "Discovery", ["get_weather_forecast"]),
]


def test_description_lists_categories_kinds_and_servers_with_guidance() -> None:
    text = describe_pool(POOL)
    assert "The pool has 7 tools on 4 servers" in text
    lines = {line.split(":")[0]: line for line in text.splitlines() if line.startswith("- ")}
    assert set(lines) == {"- File Access", "- Finance", "- Discovery"}
    assert "excel" in lines["- File Access"] and "word document" in lines["- File Access"]
    assert "stock" in lines["- Finance"]  # a kind of service, from the tools' and servers' words
    assert "mcp" not in lines["- Finance"].split()  # server names shown without the noise words
    assert text.endswith(GUIDANCE)
    assert "one operation per query" in text and "<tool_assistant>" in text


def _keywords_of(text: str, category: str) -> list[str]:
    line = next(line for line in text.splitlines() if line.startswith(f"- {category}: "))
    return line.removeprefix(f"- {category}: ").split("; ")[0].split(", ")


def test_keywords_count_a_word_once_in_any_form_and_leave_generic_verbs_out() -> None:
    pool = [
        PoolServer("arxiv", "Searches papers and fetches abstracts.", "Research", ["search_papers", "download_paper"]),
        PoolServer("scholar", "Finds papers and their citations.", "Research", ["paper_citations", "generate_summary"]),
        PoolServer("time", "Current time in any timezone.", "Utilities", ["get_current_time"]),
    ]
    keywords = _keywords_of(describe_pool(pool), "Research")
    assert keywords[0] == "papers"  # "paper" and "papers" counted as one word, shown as most often written
    assert "paper" not in keywords
    # Generic verbs in any form say nothing about the kind of service.
    assert not {"searches", "fetches", "generate", "finds", "search", "fetch"} & set(keywords)
    assert keywords == ["papers", "citations", "abstracts", "download"]  # 4 for a category of 2 servers


def test_keywords_leave_out_what_the_listed_server_names_say() -> None:
    pool = [
        PoolServer("excel", "Excel workbooks: read and write sheets.", "Office", ["excel_read_sheet", "excel_write_cells"]),
        PoolServer("word-document-server", "Word documents.", "Office", ["add_paragraph", "create_document"]),
        PoolServer("news", "News headlines.", "Media", ["get_news"]),
    ]
    text = describe_pool(pool)
    office = _keywords_of(text, "Office")
    assert "excel" not in office and "document" not in office and "word" not in office  # the servers' names follow
    assert office == ["sheet", "cells", "paragraph", "workbooks"]  # "sheet" and "sheets" once each: the shorter
    assert "excel, word document" in text
    # "news" is not a plural: its server name is not repeated, and no "new" is made of it.
    assert "new" not in text.split("Media: ")[1].split(";")[0].split(", ")


def test_description_stays_a_few_hundred_tokens_for_a_large_pool() -> None:
    pool = [
        PoolServer(f"server-{i:03d}", f"Does thing {i} with widgets and gadgets.", f"Category {i % 9}", [f"tool_{i}_{j}" for j in range(8)])
        for i in range(400)
    ]
    text = describe_pool(pool)
    assert "+34 more" in text  # 44 or 45 servers per category, 10 named
    assert len(text) < 4000  # ~1,000 tokens at most, whatever the pool size


def test_an_empty_pool_is_said_plainly() -> None:
    assert "The pool is empty right now" in describe_pool([])


async def test_copilot_regenerates_the_description_when_servers_change(
    built_index: Path,  # noqa: F811 -- the imported session fixture
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(copilot_module, "SERVERS_FILE_CHECK_INTERVAL", 0.0)
    home = copy_home(built_index, tmp_path / "home")
    servers_path = write_servers(
        tmp_path / "servers.json",
        {
            "alpha": fixture_entry("alpha", description="Adds numbers and echoes text.", category="Math"),
            "beta": fixture_entry("beta", description="Counters that go up.", category="Counting"),
        },
    )
    settings = copilot_settings(home, tmp_path, auto_index=False)
    async with Copilot.running(settings, load_servers(servers_path), start_now=True) as copilot:
        changes: list[str] = []
        changed = anyio.Event()

        async def listener(text: str) -> None:
            changes.append(text)
            changed.set()

        # The copilot's own start-up refresh adds the index's tool names; settle it before listening.
        await copilot.refresh_route_description(reload_index=True)
        before = copilot.route_description()
        assert "- Math" in before and "- Counting" in before and "alpha" in before
        copilot.route_description_listeners.append(listener)

        write_servers(servers_path, {"alpha": fixture_entry("alpha", description="Adds numbers.", category="Math")})
        stat = servers_path.stat()
        os.utime(servers_path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
        await copilot.route("add two numbers", 3, None, None)  # any request notices the edit
        with anyio.fail_after(30):
            await changed.wait()
        assert len(changes) == 1
        assert "- Counting" not in changes[0] and "beta" not in changes[0] and "- Math" in changes[0]
        await copilot.refresh_route_description()
        assert len(changes) == 1  # unchanged text: no second notification


async def test_a_slower_earlier_refresh_does_not_overwrite_a_later_one(
    built_index: Path,  # noqa: F811 -- the imported session fixture
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The text is made in a worker thread; two refreshes must not finish out of order.
    home = copy_home(built_index, tmp_path / "home")
    servers = load_servers(write_servers(tmp_path / "servers.json", {"alpha": fixture_entry("alpha", category="Math")}))
    release_first = threading.Event()
    made: list[str] = []

    def describe(routable: object, indexed: object) -> str:
        text = f"description {len(made) + 1}"
        made.append(text)
        if text == "description 1":
            assert release_first.wait(30)  # the first is slow
        return text

    monkeypatch.setattr(Copilot, "_describe", staticmethod(describe))
    async with Copilot.running(copilot_settings(home, tmp_path, auto_index=False), servers) as copilot:
        with anyio.fail_after(60):
            async with anyio.create_task_group() as group:
                group.start_soon(copilot.refresh_route_description)
                await anyio.wait_all_tasks_blocked()  # the first is making its text
                group.start_soon(copilot.refresh_route_description)
                await anyio.wait_all_tasks_blocked()  # the second waits for it (or, unordered, is done)
                release_first.set()
        assert made == ["description 1", "description 2"]
        assert copilot.route_description() == "description 2"
