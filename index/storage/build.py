"""``python -m index build``: embed a catalog snapshot into the index, re-embedding only changes."""

from __future__ import annotations

import argparse
import logging
import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from index.storage.pool_cache import keep_pool, pool_of_records, pool_path
from index.storage.build_manifest import (
    BuildInputs,
    builder_digest,
    file_digest,
    forget_manifest,
    manifest_path,
    store_signature,
    unchanged_since_last_build,
    write_manifest,
)
from index.storage.build_report import BuildReport
from index.storage.write_lock import settings_write_lock
from index.errors import CatalogError
from index.cli.hints import create_catalog_commands, index_command
from index.catalog.livemcpbench import default_output
from index.catalog.records import Catalog, load_catalog
from index.catalog.servers import ServersFile, load_servers
from index.settings import DEFAULT_CATALOG, CopilotSettings

if TYPE_CHECKING:  # the search code (numpy, Chroma) is imported only when the store must be opened
    from rich.console import Console

    from index.search.tool_index import Progress, ToolIndex
    from index.trust.review import ReviewResult
    from index.trust.settings import TrustSettings

logger = logging.getLogger(__name__)


def resolve_catalog(settings: CopilotSettings, catalog: Path | None) -> Path:
    """The catalog to build from, with an actionable error when the default one is missing."""
    path = catalog or settings.catalog_file()
    if path.exists():
        return path
    if catalog is None and path == DEFAULT_CATALOG:  # the commands' own default: no --out needed
        crawl = index_command(settings, "crawl")
        imported = default_output(settings)
        hint = (
            f" An imported catalog exists: {index_command(settings, 'build', '--catalog', str(imported))}"
            if imported.exists()
            else ""
        )
        raise CatalogError(
            f"the default catalog {path} does not exist yet. Create it with: {crawl} -- or import LiveMCPBench's "
            f"snapshot with: {index_command(settings, 'import-livemcpbench', 'PATH/tools.json')} and build from it "
            f"with: {index_command(settings, 'build', '--catalog', 'FILE')}.{hint}"
        )
    raise CatalogError(f"{path}: catalog not found. Create one with: {create_catalog_commands(settings, path)}")


def check_servers_file(settings: CopilotSettings) -> ServersFile:
    """Load the servers file the copilot will serve: a broken one fails the build, not the later start."""
    return load_servers(settings.servers_file())


#: Off a terminal, a plain progress line at least every this fraction of the work.
PLAIN_PROGRESS_STEP = 0.1


@contextmanager
def progress_bar(description: str, enabled: bool = True) -> Iterator[Progress]:
    """Progress on stderr, shown only once there is something to do: a rich bar on a terminal,
    plain lines anywhere else (rich does not redraw a bar off a terminal: a long build was silent)."""
    from index.cli.console import make_console

    console = make_console(stderr=True)
    if enabled and not console.is_terminal:
        yield _plain_progress(console, description)
        return

    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
    from rich.progress import Progress as RichProgress

    bar = RichProgress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=console, transient=False, disable=not enabled,
    )
    task_id = None

    def update(done: int, total: int) -> None:
        nonlocal task_id
        if total <= 0:
            return
        if task_id is None:
            bar.start()
            task_id = bar.add_task(description, total=total)
        bar.update(task_id, completed=done, total=total)

    try:
        yield update
    finally:
        if task_id is not None:
            bar.stop()


def _plain_progress(console: Console, description: str) -> Progress:
    """One line at the start, then one per step of the work done (about every 10%), and one at the end."""
    started = time.perf_counter()
    shown: int | None = None
    next_line = 0

    def update(done: int, total: int) -> None:
        nonlocal shown, next_line
        if total <= 0 or done == shown or (done < next_line and done < total):
            return
        step = max(1, math.ceil(total * PLAIN_PROGRESS_STEP))
        seconds = f" in {time.perf_counter() - started:.1f} s" if done >= total else ""
        console.print(f"{description}: {done} of {total} ({done * 100 // total}%){seconds}", highlight=False)
        shown, next_line = done, (done // step + 1) * step

    return update


def build_inputs(
    settings: CopilotSettings, catalog_path: Path, catalog: Catalog, servers_file: Path | None
) -> BuildInputs | None:
    """What this build depends on, or None when it cannot be compared cheaply (a Chroma server)."""
    if settings.chroma_url:
        return None
    from index.models.model_names import model_label
    from index.search.text import DOCUMENT_VERSION

    servers = servers_file.resolve() if servers_file is not None else None
    return BuildInputs(
        store=str(settings.chroma_dir),
        collection=settings.collection,
        model=model_label(settings.embedding_model, settings.embedding_precision),
        document_version=DOCUMENT_VERSION,
        catalog=str(catalog_path.resolve()),
        catalog_digest=catalog.digest(),
        servers_file=str(servers or ""),
        servers_digest=file_digest(servers) if servers is not None else "",
        builder=builder_digest(),
    )


def build_index(
    catalog_path: Path | None = None,
    settings: CopilotSettings | None = None,
    *,
    index: ToolIndex | None = None,
    show_progress: bool = True,
    servers_file: Path | None = None,
) -> BuildReport:
    """Make the index hold the catalog's tools. Without ``index``, a build whose inputs
    (``servers_file`` among them) and store are as the last successful build left them
    answers "nothing changed" without opening the store (see :mod:`index.storage.build_manifest`)."""
    settings = settings or CopilotSettings.load()
    path = resolve_catalog(settings, catalog_path)
    return _build(settings, path, load_catalog(path), index=index, show_progress=show_progress, servers_file=servers_file)


def _build(
    settings: CopilotSettings,
    path: Path,
    catalog: Catalog,
    *,
    index: ToolIndex | None,
    show_progress: bool,
    servers_file: Path | None,
) -> BuildReport:
    # One writer at a time, from the manifest check to the manifest written: a second build waits,
    # then finds nothing changed (or builds its own catalog on what the first one left).
    with settings_write_lock(settings):
        return _build_locked(
            settings, path, catalog, index=index, show_progress=show_progress, servers_file=servers_file
        )


def _build_locked(
    settings: CopilotSettings,
    path: Path,
    catalog: Catalog,
    *,
    index: ToolIndex | None,
    show_progress: bool,
    servers_file: Path | None,
) -> BuildReport:
    started = time.perf_counter()
    inputs = build_inputs(settings, path, catalog, servers_file) if index is None else None
    manifest = manifest_path(settings.index_dir)
    if inputs is not None:
        last = unchanged_since_last_build(manifest, inputs, Path(inputs.store))
        if last is not None:
            logger.info("nothing changed since the last build (%s): the index was not opened", last.built_at)
            return BuildReport(
                unchanged=len(catalog.tools),
                total=last.tools,
                model=inputs.model,
                location=inputs.store,
                seconds=round(time.perf_counter() - started, 3),
            )
        forget_manifest(manifest)
    from index.search.tool_index import ToolIndex

    index = index or ToolIndex.open(settings)
    with progress_bar("embedding", enabled=show_progress) as progress:
        report = index.sync(
            catalog.tools,
            catalog=str(path.resolve()),
            catalog_digest=catalog.digest(),
            progress=progress,
            skipped=catalog.skipped_tools(),
        )
    # The index now holds exactly the catalog's records: the copilot's next start describes them
    # without reading the index first (see index.storage.pool_cache).
    keep_pool(pool_path(settings.index_dir), pool_of_records(catalog.tools))
    if inputs is not None and (signature := store_signature(Path(inputs.store))) is not None:
        write_manifest(manifest, inputs, signature, report.total)
    return report


def format_report(report: BuildReport) -> str:
    lines = [
        f"index: {report.location} (model {report.model}{', full rebuild' if report.full_rebuild else ''})",
        f"tools: {report.total} indexed -- {report.added} added, {report.updated} updated, "
        f"{report.removed} removed, {report.unchanged} unchanged",
        f"servers: {report.servers_embedded} embedded, {report.servers_removed} removed",
        f"time: {report.seconds:.2f} s",
    ]
    return "\n".join(lines)


def screen_catalog(
    catalog_path: Path | None,
    settings: CopilotSettings | None = None,
    *,
    catalog: Catalog | None = None,
    trust: TrustSettings | None = None,
) -> dict[str, ReviewResult]:
    """Scan a catalog's tools for poisoning; tools with high findings are held back (nothing is pinned).

    Scan results are remembered by definition (:mod:`index.trust.scan_cache`), so an unchanged
    catalog is screened without scanning it again.
    """
    from index.trust.review import review_by_server
    from index.trust.scan_cache import ScanCache
    from index.trust.settings import TrustSettings

    settings = settings or CopilotSettings.load()
    if catalog is None:
        catalog = load_catalog(resolve_catalog(settings, catalog_path))
    trust = trust or TrustSettings.load(home=settings.home)
    cache = ScanCache.in_home(settings.home)
    results = review_by_server(trust.reviewer(scan_cache=cache), catalog.tools, pin=False)
    cache.save()
    logger.debug("trust scan: %d definition(s) remembered, %d scanned", cache.hits, cache.misses)
    return results


def build_command(args: argparse.Namespace) -> int:
    from index.cli.console import make_console
    from index.trust.cli import print_review_summary
    from index.trust.settings import TrustSettings

    settings = CopilotSettings.load()
    trust = TrustSettings.load(home=settings.home)  # a bad trust setting fails now, not after embedding
    servers = check_servers_file(settings)
    path = resolve_catalog(settings, getattr(args, "catalog", None))
    catalog = load_catalog(path)
    report = _build(settings, path, catalog, index=None, show_progress=True, servers_file=servers.path)
    print(format_report(report))
    print(f"servers: {len(servers.enabled())} enabled in {servers.path}")
    print_review_summary(make_console(), screen_catalog(path, settings, catalog=catalog, trust=trust))
    return 0
