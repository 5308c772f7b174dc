"""``python -m index build``: embed a catalog snapshot into the index, re-embedding only changes."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from index.errors import CatalogError
from index.livemcpbench import default_output
from index.records import load_catalog
from index.settings import DEFAULT_CATALOG, CopilotSettings
from index.tool_index import BuildReport, Progress, ToolIndex

logger = logging.getLogger(__name__)


def resolve_catalog(settings: CopilotSettings, catalog: Path | None) -> Path:
    """The catalog to build from, with an actionable error when the default one is missing."""
    path = catalog or settings.catalog_file()
    if path.exists():
        return path
    if catalog is None and path == DEFAULT_CATALOG:
        imported = default_output(settings)
        hint = f" An imported catalog exists: python -m index build --catalog {imported}" if imported.exists() else ""
        raise CatalogError(
            f"the default catalog {path} does not exist yet. Create it with 'python -m index crawl', or import "
            "LiveMCPBench's snapshot with 'python -m index import-livemcpbench PATH/tools.json' and build from it "
            f"with 'python -m index build --catalog FILE'.{hint}"
        )
    raise CatalogError(
        f"{path}: catalog not found. Create one with 'python -m index crawl' or "
        "'python -m index import-livemcpbench PATH/tools.json'."
    )


@contextmanager
def progress_bar(description: str, enabled: bool = True) -> Iterator[Progress]:
    """A rich progress bar on stderr, shown only once there is something to do."""
    from index.console import make_console
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
    from rich.progress import Progress as RichProgress

    console = make_console(stderr=True)
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


def build_index(
    catalog_path: Path | None = None,
    settings: CopilotSettings | None = None,
    *,
    index: ToolIndex | None = None,
    show_progress: bool = True,
) -> BuildReport:
    settings = settings or CopilotSettings()
    path = resolve_catalog(settings, catalog_path)
    catalog = load_catalog(path)
    index = index or ToolIndex.open(settings)
    with progress_bar("embedding", enabled=show_progress) as progress:
        return index.sync(
            catalog.tools, catalog=str(path.resolve()), catalog_digest=catalog.digest(), progress=progress
        )


def format_report(report: BuildReport) -> str:
    lines = [
        f"index: {report.location} (model {report.model}{', full rebuild' if report.full_rebuild else ''})",
        f"tools: {report.total} indexed -- {report.added} added, {report.updated} updated, "
        f"{report.removed} removed, {report.unchanged} unchanged",
        f"servers: {report.servers_embedded} embedded, {report.servers_removed} removed",
        f"time: {report.seconds:.2f} s",
    ]
    return "\n".join(lines)


def screen_catalog(catalog_path: Path | None, settings: CopilotSettings | None = None) -> dict:
    """Scan a catalog's tools for poisoning; tools with high findings are held back (nothing is pinned)."""
    from index.trust.review import review_by_server
    from index.trust.settings import TrustSettings

    settings = settings or CopilotSettings()
    catalog = load_catalog(resolve_catalog(settings, catalog_path))
    return review_by_server(TrustSettings(home=settings.home).reviewer(), catalog.tools, pin=False)


def build_command(args: argparse.Namespace) -> int:
    from index.console import make_console
    from index.trust.cli import print_review_summary

    report = build_index(getattr(args, "catalog", None), show_progress=True)
    print(format_report(report))
    print_review_summary(make_console(), screen_catalog(getattr(args, "catalog", None)))
    return 0
