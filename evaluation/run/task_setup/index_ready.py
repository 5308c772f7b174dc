"""The index a run routes against, made ready before the first task.

Each task's copilot runs with ``COPILOT_AUTO_INDEX=0`` (the per-task servers file changes every
launch hash, which would otherwise re-crawl every server per task), so a fresh ``COPILOT_HOME``
would answer every ``route`` with "no tool index". The runner therefore brings the index up to
date with the run's servers file once, up front, with the copilot's own indexer: servers the
catalog snapshot knows are embedded from it, the others are crawled, with progress bars. Tasks
start only when every enabled server is covered (``--allow-partial-index`` runs them anyway and
records which servers are missing).
"""

from __future__ import annotations

import logging
from pathlib import Path

import anyio
from rich.console import Console

from evaluation.run.models import IndexCoverage
from index.errors import ConfigError
from index.catalog.servers import ServersFile

logger = logging.getLogger(__name__)


async def ensure_index(servers: ServersFile, copilot_home: Path, console: Console) -> IndexCoverage:
    """Index the enabled servers the index lacks; returns what is still missing afterwards."""
    from index.search.tool_index import ToolIndex  # noqa: PLC0415 -- heavy (Chroma, the embedding model)
    from server.route.indexing import BackgroundIndexer  # noqa: PLC0415
    from server.settings import ServerSettings  # noqa: PLC0415

    from index.trust.settings import TrustSettings  # noqa: PLC0415

    settings = ServerSettings.load(home=copilot_home)
    index = ToolIndex.open(settings)
    enabled = servers.enabled()
    # The copilot's own reviewer: crawled definitions are pinned and screened as the copilot would.
    reviewer = TrustSettings.load(home=copilot_home).reviewer()
    indexer = BackgroundIndexer(settings, index, reviewer=reviewer, progress=True)
    todo = await anyio.to_thread.run_sync(indexer.gaps, enabled)
    coverage = IndexCoverage(location=index.location, servers=len(enabled))
    if todo:
        console.print(
            f"indexing {len(todo)} of {len(enabled)} server(s) the index at {index.location} lacks "
            f"(catalog {settings.catalog_file()}): {', '.join(sorted(todo)[:8])}{' …' if len(todo) > 8 else ''}",
            markup=False,
            highlight=False,
        )
        await indexer.run(enabled)
        coverage.missing = await anyio.to_thread.run_sync(indexer.gaps, enabled)
        coverage.indexed_now = sorted(set(todo) - set(coverage.missing))
    coverage.tools = await anyio.to_thread.run_sync(lambda: index.tool_count)
    return coverage


def refuse_partial(coverage: IndexCoverage, servers_file: Path) -> None:
    """The error that stops a run whose index does not cover its servers."""
    if not coverage.missing:
        return
    listed = "; ".join(f"{name}: {why}" for name, why in sorted(coverage.missing.items())[:10])
    more = f" (and {len(coverage.missing) - 10} more)" if len(coverage.missing) > 10 else ""
    raise ConfigError(
        f"the index at {coverage.location} does not cover {len(coverage.missing)} of the {coverage.servers} "
        f"server(s) in {servers_file}: {listed}{more}. Fix those servers (run 'python -m index crawl --only NAME' "
        "to see why) or disable them in the servers file, or pass --allow-partial-index to run the tasks anyway."
    )
