"""Background indexing at startup: servers the index does not know yet get crawled and indexed.

A server in the servers file is *fresh* when the index has its tools and its launch config
(``ServerConfig.launch_hash``) is the one they were crawled with; the hash of the last crawl is
remembered in ``COPILOT_HOME/indexed-servers.json`` (falling back to the catalog snapshot's).
Stale servers are served from the catalog snapshot when it has them with the current launch
config (no child started), else crawled. Meanwhile ``route`` answers from what is indexed and
says indexing is in progress.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from index.storage.atomic import write_atomic
from index.json_text import parse_json
from index.errors import CopilotError, IndexNotBuiltError
from index.catalog.records import Catalog, ToolRecord, load_catalog
from index.catalog.servers import ServerConfig
from server.route.answer import IndexingStatus
from server.pool.settings import PoolSettings
from server.settings import ServerSettings

logger = logging.getLogger(__name__)

STATE_FILE_NAME = "indexed-servers.json"
#: Seconds before a server whose crawl failed is crawled again with the same launch. Every edit of
#: the servers file plans indexing again, and a server that cannot start was started at each one
#: (109 times in 200 edits of other entries); an edit of its own entry retries it at once.
RECRAWL_AFTER_FAILURE = 60.0


@dataclass
class IndexPlan:
    """What startup indexing has to do."""

    from_catalog: list[str] = field(default_factory=list)
    crawl: list[str] = field(default_factory=list)

    @property
    def servers(self) -> list[str]:
        return [*self.from_catalog, *self.crawl]


@dataclass(frozen=True)
class CrawledServer:
    """What the last crawl of a server found: the launch config it was crawled with, and how many
    tools it had (``None``: not recorded, a state file written before the count was)."""

    launch_hash: str
    tools: int | None = None

    def as_json(self) -> dict[str, Any]:
        return {"launch_hash": self.launch_hash, "tools": self.tools}


def _crawled_server(value: Any) -> CrawledServer | None:
    if isinstance(value, str):  # the launch hash alone, as the state was first written
        return CrawledServer(value)
    if isinstance(value, dict) and isinstance(value.get("launch_hash"), str):
        tools = value.get("tools")
        count = tools if isinstance(tools, int) and not isinstance(tools, bool) and tools >= 0 else None
        return CrawledServer(value["launch_hash"], count)
    return None


def _load_state(path: Path) -> dict[str, CrawledServer]:
    try:
        data = parse_json(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as error:
        logger.warning("%s: ignoring unreadable indexing state (%s)", path, error)
        return {}
    if not isinstance(data, dict):
        return {}
    state = {str(name): crawled for name, value in data.items() if (crawled := _crawled_server(value)) is not None}
    if len(state) < len(data):
        logger.warning("%s: ignoring %d unreadable entr(ies)", path, len(data) - len(state))
    return state


def _save_state(path: Path, state: Mapping[str, CrawledServer]) -> None:
    # A temporary file of this process's own: copilots sharing a home save it at the same time.
    text = json.dumps({name: state[name].as_json() for name in sorted(state)}, indent=1)
    write_atomic(path, text + "\n")


def plan_indexing(
    servers: Mapping[str, ServerConfig],
    indexed_servers: set[str],
    catalog: Catalog | None,
    state: Mapping[str, CrawledServer],
) -> IndexPlan:
    """Decide, per enabled server, whether it is fresh, loadable from the catalog, or to be crawled.

    A server crawled before with this config is left alone only when that crawl found no tools:
    one whose tools the index lost since (``python -m index build`` from a catalog without it
    removes them) is crawled again, not taken for empty forever.
    """
    plan = IndexPlan()
    catalog_tools: dict[str, int] = {}
    if catalog is not None:
        for tool in catalog.tools:
            catalog_tools[tool.server] = catalog_tools.get(tool.server, 0) + 1
    for name, config in servers.items():
        if not config.is_enabled:
            continue
        current = config.launch_hash()
        catalog_entry = catalog.servers.get(name) if catalog is not None else None
        catalog_hash = catalog_entry.launch_hash if catalog_entry is not None else None
        crawled = state.get(name)
        remembered = crawled.launch_hash if crawled is not None else catalog_hash
        in_catalog = catalog_tools.get(name, 0) > 0 and catalog_hash in (None, current)
        if remembered is not None and remembered != current:
            plan.crawl.append(name)  # launched differently now: its tools may differ
        elif name in indexed_servers:
            continue
        elif in_catalog:
            plan.from_catalog.append(name)
        elif crawled is not None and crawled.launch_hash == current and crawled.tools == 0:
            continue  # crawled with this config before and it had no tools
        else:
            plan.crawl.append(name)
    return plan


class BackgroundIndexer:
    """Brings the index up to date with the servers file, without blocking the copilot."""

    def __init__(
        self,
        settings: ServerSettings,
        index: Any,
        pool_settings: PoolSettings | None = None,
        *,
        reviewer: Any = None,
        progress: bool = False,
    ) -> None:
        self._settings = settings
        self._index = index
        #: ``index.trust.review.TrustReviewer``: crawled tools are pinned, catalog tools screened.
        self._reviewer = reviewer
        #: Progress bars on stderr for the crawl and the embedding (the benchmark runner's
        #: up-front indexing); the copilot itself indexes quietly in the background.
        self._progress = progress
        # Crawled children get the same work dirs and stderr logs as the pool's (COPILOT_WORKDIR,
        # COPILOT_CHILD_LOG_DIR), so a benchmark task finds them in its own directory.
        self._pool_settings = pool_settings
        self._state_path = settings.home / STATE_FILE_NAME
        self._pending: list[str] = []
        self._failed: dict[str, str] = {}
        #: server -> (launch hash, time.monotonic()) of its last failed crawl.
        self._failed_launches: dict[str, tuple[str, float]] = {}
        self._running = False
        #: Runs asked for and not finished: a route answered while the servers are being compared
        #: with the index (before any is pending) is answered during indexing too.
        self._asked = 0
        self._planned = False
        self._one_at_a_time = anyio.Lock()
        self.done = anyio.Event()

    def status(self) -> IndexingStatus:
        # Planning (comparing the servers file with the index, in a thread) comes before any server
        # is pending: the first route after start-up said "Nothing matched" and "not in progress"
        # while its servers were about to be crawled.
        planning = self._asked > 0 and not self._pending and not self._planned
        return IndexingStatus(
            in_progress=planning or (self._running and bool(self._pending)),
            pending_servers=list(self._pending),
            failed_servers=dict(self._failed),
        )

    async def run(self, servers: Mapping[str, ServerConfig]) -> None:
        """Index what is missing; never raises (failures are logged and shown in ``status``).

        Runs one at a time: a run asked for while another is in progress (the servers file
        changed) waits for it and then plans against what that one indexed.
        """
        self._asked += 1
        self._planned = False  # a run waiting for the one in progress plans again once that one ends
        try:
            async with self._one_at_a_time:
                await self._run_once(servers)
        finally:
            self._asked -= 1

    async def _run_once(self, servers: Mapping[str, ServerConfig]) -> None:
        self._running = True
        self._planned = False
        try:
            await self._run(servers)
        except anyio.get_cancelled_exc_class():
            raise
        except CopilotError as error:
            logger.warning("background indexing failed: %s", error)
        except Exception:
            logger.exception("background indexing failed")
        finally:
            self._running = False
            self._pending = []
            self.done.set()

    async def _run(self, servers: Mapping[str, ServerConfig]) -> None:
        plan, catalog = await anyio.to_thread.run_sync(self._plan, servers, abandon_on_cancel=True)
        self._planned = True
        # A server that needs no indexing now (removed from the file, disabled, or indexed since) has
        # not failed: route's answers would otherwise report an old failure forever.
        self._failed = {name: why for name, why in self._failed.items() if name in plan.servers}
        waiting = self._failed_recently(plan.crawl, servers)
        if waiting:
            plan.crawl = [name for name in plan.crawl if name not in waiting]
            logger.info(
                "not crawling again yet (failed less than %.0f s ago with this launch): %s",
                RECRAWL_AFTER_FAILURE,
                ", ".join(waiting),
            )
        if not plan.servers:
            if not waiting:
                logger.info("index is up to date with the servers file")
            return
        self._pending = plan.servers
        logger.info(
            "background indexing: %d server(s) from the catalog snapshot, %d to crawl (%s)",
            len(plan.from_catalog),
            len(plan.crawl),
            ", ".join(plan.servers),
        )
        if plan.from_catalog:
            wanted = set(plan.from_catalog)
            records = [t for t in catalog.tools if t.server in wanted] if catalog is not None else []
            kept_out = catalog.skipped_tools() if catalog is not None else {}
            skipped = {name: tools for name, tools in kept_out.items() if name in wanted}
            # Catalog servers become searchable before the (slower) crawl of the others.
            await anyio.to_thread.run_sync(
                lambda: self._sync(records, plan.from_catalog, skipped=skipped), abandon_on_cancel=True
            )
            self._pending = list(plan.crawl)
            for name in plan.from_catalog:
                self._failed.pop(name, None)
            logger.info("indexed %d tool(s) of %d server(s) from the catalog", len(records), len(plan.from_catalog))
        if plan.crawl:
            records, failures, skipped = await self._crawl({name: servers[name] for name in plan.crawl})
            self._failed.update(failures)
            failed_at = time.monotonic()
            for name in plan.crawl:
                if name in failures:
                    self._failed_launches[name] = (servers[name].launch_hash(), failed_at)
                else:
                    self._failed_launches.pop(name, None)
            ok = [name for name in plan.crawl if name not in failures]
            if ok:
                await anyio.to_thread.run_sync(
                    lambda: self._sync(records, ok, live=True, skipped=skipped), abandon_on_cancel=True
                )
                found: dict[str, int] = {}
                for record in records:
                    found[record.server] = found.get(record.server, 0) + 1
                state = _load_state(self._state_path)
                state.update({name: CrawledServer(servers[name].launch_hash(), found.get(name, 0)) for name in ok})
                _save_state(self._state_path, state)
                for name in ok:
                    self._failed.pop(name, None)  # crawled fine this time
            logger.info("indexed %d tool(s) of %d crawled server(s)", len(records), len(ok))

    def _failed_recently(self, names: list[str], servers: Mapping[str, ServerConfig]) -> list[str]:
        """Of ``names``, those whose crawl failed less than :data:`RECRAWL_AFTER_FAILURE` ago with the
        launch they have now (they stay reported as failed)."""
        now = time.monotonic()
        return [
            name
            for name in names
            if (failed := self._failed_launches.get(name)) is not None
            and failed[0] == servers[name].launch_hash()
            and now - failed[1] < RECRAWL_AFTER_FAILURE
        ]

    def _load_catalog(self) -> Catalog | None:
        path = self._settings.catalog_file()
        if not path.exists():
            return None
        try:
            return load_catalog(path)
        except CopilotError as error:
            logger.warning("%s", error)
            return None

    def _plan(self, servers: Mapping[str, ServerConfig]) -> tuple[IndexPlan, Catalog | None]:
        """The plan, and the catalog it was made from (read once: the catalog servers load from it)."""
        try:
            indexed = {record.server for record in self._index.records().values()}
        except IndexNotBuiltError:
            indexed = set()
        catalog = self._load_catalog()
        return plan_indexing(servers, indexed, catalog, _load_state(self._state_path)), catalog

    def _sync(
        self,
        records: list[ToolRecord],
        servers: list[str],
        *,
        live: bool = False,
        skipped: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        """``skipped``: the tools of ``servers`` left out for a broken definition (kept in the index)."""
        if self._reviewer is not None:
            from index.trust.review import review_by_server

            # Crawled definitions come from the live servers (pinned); catalog ones are only screened.
            review_by_server(self._reviewer, records, pin=live)
        if not self._progress:
            self._index.sync(records, servers=servers, skipped=skipped)
            return
        from index.storage.build import progress_bar  # noqa: PLC0415 -- rich is only needed with progress

        with progress_bar(f"embedding {len(servers)} server(s)") as progress:
            self._index.sync(records, servers=servers, progress=progress, skipped=skipped)

    def gaps(self, servers: Mapping[str, ServerConfig]) -> dict[str, str]:
        """Enabled servers the index does not cover yet, with why (a failed crawl's reason)."""
        plan, _catalog = self._plan(servers)
        return {name: self._failed.get(name, "not indexed yet") for name in plan.servers}

    async def _crawl(
        self, servers: dict[str, ServerConfig]
    ) -> tuple[list[ToolRecord], dict[str, str], dict[str, dict[str, str]]]:
        """(records, failed servers with why, the crawled servers' tools left out for broken definitions)."""
        from index.catalog.crawl import crawl_servers  # the crawler pulls in the MCP client stack; only load it when needed

        settings = self._settings
        child_paths = self._pool_settings or PoolSettings.load(home=settings.home)

        def crawled(outcome: Any) -> None:
            if outcome.ok:
                logger.info("crawled %s: %d tool(s)", outcome.server, outcome.tool_count)
            else:
                # No longer pending: it will not be indexed this time (route lists it as failed).
                self._pending = [name for name in self._pending if name != outcome.server]
                self._failed[outcome.server] = outcome.reason or outcome.kind or "crawl failed"
                logger.warning("could not crawl %s: %s", outcome.server, outcome.reason or outcome.kind)

        report = await crawl_servers(
            servers,
            concurrency=settings.crawl_concurrency,
            timeout=settings.crawl_timeout,
            log_dir=child_paths.log_root(),
            workdir_root=child_paths.work_root(),
            progress=self._progress,
            on_result=crawled,
        )
        failures = {
            name: outcome.reason or outcome.message or "crawl failed"
            for name, outcome in report.outcomes.items()
            if not outcome.ok
        }
        failures.update(report.skipped)
        return list(report.records), failures, report.skipped_tools
