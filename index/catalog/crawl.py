"""Crawl MCP servers into a tool catalog snapshot: start each one, ``initialize``, ``tools/list``
(and ``prompts/list``, ``resources/list``, ``resources/templates/list`` when it declares them).

``python -m index crawl`` runs :func:`crawl_servers` over the enabled servers of a server list and
writes a :class:`~index.catalog.records.Catalog`. The copilot server calls :func:`crawl_servers` too, in the
background, for servers its catalog does not know yet.

Every server is crawled in its own short session (``index.children.connect.open_session``): a clean
environment, its own work and temp dir, stderr appended to ``<log-dir>/<server>.log``. At most
``concurrency`` children are alive at once, each under a hard deadline; a server that fails is
reported (what happened, the last lines of its stderr) and never stops the others.
"""

from __future__ import annotations

import argparse
import logging
import math
import tempfile
from collections.abc import Callable, Iterable, Mapping
from collections.abc import AsyncIterator
from contextlib import AbstractContextManager, asynccontextmanager, nullcontext
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, Field, ValidationError
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from index.children.connect import (
    ChildExitedError,
    ChildStartError,
    CommandNotFoundError,
    InitializeFailedError,
    InitializeTimeoutError,
    RemoteConnectError,
    SelfEntryError,
    open_session,
    read_log_tail,
)
from index.children.process import LOG_CHECK_INTERVAL, ChildProcess, how_it_ended, keep_log_bounded
from index.children.stream_limits import MAX_STDERR_LOG_BYTES
from index.children.listing_limits import LISTING_CUT
from index.children.tool_listing import list_all_tools, skipped_words  # the one bounded listing the pool uses too
from index.errors import ConfigError, CopilotError
from index.catalog.filenames import safe_file_name
from index.catalog.kinds import list_other_kinds
from index.children.errors import connection_lost, error_summary
from index.children.raw_pages import describe_schema_error
from index.catalog.records import Catalog, CatalogServer, ToolRecord, load_catalog, skipped_tools_by_server
from index.catalog.servers import ServerConfig, load_servers
from index.settings import CopilotSettings
from index.cli.suggest import nearest_names
from index.cli.console import make_console
from index.cli.display import printable

logger = logging.getLogger(__name__)

DEFAULT_CONCURRENCY = 4
DEFAULT_TIMEOUT = 120.0
#: Extra seconds past a server's deadline for closing its session and killing its process group.
TEARDOWN_GRACE = 8.0
#: stderr lines kept per failed server (the full log stays in the log dir).
STDERR_TAIL_LINES = 12

# Failure kinds shown in the summary table.
COMMAND_NOT_FOUND = "command not found"
CRASHED = "crashed"
TIMED_OUT = "timed out"
INITIALIZE_FAILED = "initialize failed"
HTTP_ERROR = "HTTP error"
START_FAILED = "could not start"
LIST_FAILED = "tools/list failed"
BAD_RESPONSE = "bad reply"  # to initialize or tools/list: the reason names which
ERROR = "error"
#: Not a failure: the entry is the copilot itself, skipped (listed with the disabled servers).
SELF_ENTRY = "the copilot itself"
SELF_ENTRY_REASON = "this is the copilot itself"


class ServerOutcome(BaseModel):
    """How crawling one server went."""

    server: str
    ok: bool
    tool_count: int = 0
    seconds: float = 0.0
    start_seconds: float | None = Field(
        default=None, description="Seconds from launch to the answer to initialize (None if it never answered)."
    )
    kind: str | None = Field(default=None, description="Failure kind (None when ok), e.g. 'timed out'.")
    reason: str = Field(default="", description="One line: what went wrong.")
    message: str = Field(default="", description="The full error message, with advice.")
    stderr_tail: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    skipped_tools: dict[str, str] = Field(
        default_factory=dict,
        description="Tools left out because their definition is broken: name -> what is wrong (as the catalog "
        "keeps them: machine paths and secrets masked), and the listing's cut at the cap under LISTING_CUT.",
    )
    log_path: Path | None = None


class CrawlReport(BaseModel):
    """Tool records of the servers that answered, and an outcome for every server tried."""

    records: list[ToolRecord] = Field(default_factory=list)
    servers: dict[str, CatalogServer] = Field(default_factory=dict, description="Servers crawled successfully.")
    outcomes: dict[str, ServerOutcome] = Field(default_factory=dict, description="Every server tried, in order.")
    skipped: dict[str, str] = Field(default_factory=dict, description="Disabled servers not tried, with reasons.")

    @property
    def succeeded(self) -> list[str]:
        return [name for name, outcome in self.outcomes.items() if outcome.ok]

    @property
    def failed(self) -> list[ServerOutcome]:
        return [outcome for outcome in self.outcomes.values() if not outcome.ok]

    @property
    def skipped_tools(self) -> dict[str, dict[str, str]]:
        """Per server crawled successfully, the tools left out for a broken definition (maybe none)."""
        return skipped_tools_by_server(self.servers)

    def to_catalog(self, base: Catalog | None = None, *, source: str = "crawl") -> Catalog:
        """A catalog of this crawl, or ``base`` with just the servers crawled now replaced.

        Servers that failed now keep their records from ``base``: a failed re-crawl loses nothing.
        """
        by_server: dict[str, list[ToolRecord]] = {}
        servers: dict[str, CatalogServer] = {}
        if base is not None:
            servers.update(base.servers)
            for record in base.tools:
                by_server.setdefault(record.server, []).append(record)
                servers.setdefault(record.server, CatalogServer())
        for name, info in self.servers.items():
            servers[name] = info
            by_server[name] = []
        for record in self.records:
            by_server[record.server].append(record)
        tools = [record for name in servers for record in by_server.get(name, [])]
        return Catalog(source=source, servers=servers, tools=tools)


# ---------------------------------------------------------------------------------------------
# one server


def log_file_name(server: str) -> str:
    """``time`` -> ``time.log``; an unsafe name is cleaned and suffixed with a hash (as the pool's logs)."""
    return safe_file_name(server) + ".log"


def scrub_machine_paths(value: Any, workdir: Path, config: ServerConfig | None = None) -> Any:
    """``value`` with this machine's paths inside strings replaced: the child's work dir (or its
    configured ``cwd``) becomes ``<workdir>``, the home dir (the copilot's, or the ``HOME`` the entry
    gives the child) ``~`` -- servers often mention their root or cwd in descriptions, and pinned
    definitions must not change with the directory a child runs in."""
    pairs = {(str(workdir.resolve()), "<workdir>"), (str(workdir), "<workdir>")}
    homes = [str(Path.home())]
    if config is not None:
        if config.cwd:
            pairs.add((config.cwd, "<workdir>"))
        if config.env.get("HOME"):
            homes.append(config.env["HOME"])
    for home in homes:
        if len(home) > 1:
            pairs.add((home.rstrip("/") or home, "~"))
    replacements = sorted(pairs, key=lambda pair: -len(pair[0]))

    def scrub(item: Any) -> Any:
        if isinstance(item, str):
            for old, new in replacements:
                item = item.replace(old, new)
            return item
        if isinstance(item, list):
            return [scrub(inner) for inner in item]
        if isinstance(item, dict):
            return {key: scrub(inner) for key, inner in item.items()}
        return item

    return scrub(value)


def tool_record(tool: types.Tool, config: ServerConfig, server_description: str) -> ToolRecord:
    """Convert a listed tool to a catalog record (annotations as camelCase MCP keys)."""
    annotations = tool.annotations.model_dump(by_alias=True, exclude_none=True) if tool.annotations else None
    title = tool.title or (tool.annotations.title if tool.annotations else None)
    return ToolRecord(
        server=config.name,
        name=tool.name,
        title=title,
        description=tool.description or "",
        input_schema=dict(tool.input_schema or {"type": "object", "properties": {}}),
        output_schema=dict(tool.output_schema) if tool.output_schema else None,
        annotations=annotations or None,
        server_description=server_description,
        category=config.category,
    )


def _server_description(config: ServerConfig, initialize_result: types.InitializeResult) -> str:
    """The configured description, else the server's own ``instructions`` (first paragraph)."""
    if config.description:
        return config.description
    instructions = (initialize_result.instructions or "").strip()
    if instructions:
        first = instructions.split("\n\n", 1)[0].strip()
        return first if len(first) <= 300 else first[:299] + "…"
    server_info = initialize_result.server_info
    return (server_info.description or "") if server_info is not None else ""


def _failure(
    config: ServerConfig, error: BaseException, *, phase: str, limit: float, answered: bool = False
) -> tuple[str, str, str, list[str]]:
    """(kind, one-line reason, full message, stderr tail) for an exception from one server.

    ``answered``: the error was the server's own answer while its connection was open (a -32000
    error is then no crash; :func:`index.children.errors.connection_lost`).
    """
    name = config.name
    if isinstance(error, ChildStartError):
        kind = {
            CommandNotFoundError: COMMAND_NOT_FOUND,
            ChildExitedError: CRASHED,
            InitializeTimeoutError: TIMED_OUT,
            InitializeFailedError: INITIALIZE_FAILED,
            RemoteConnectError: HTTP_ERROR,
            SelfEntryError: SELF_ENTRY,
        }.get(type(error), START_FAILED)
        if isinstance(error, ChildExitedError):
            reason = f"{how_it_ended(error.returncode)} before answering initialize"
        elif isinstance(error, InitializeTimeoutError):
            reason = f"no answer to initialize within {limit:g} s"
        else:
            reason = error_summary(str(error), name)
        return kind, reason, str(error), error.stderr_tail
    if isinstance(error, TimeoutError):
        reason = f"no answer to {phase} within {limit:g} s"
        return TIMED_OUT, reason, f"server '{name}': {reason}; raise its 'timeout' or --timeout if it is slow.", []
    if isinstance(error, MCPError):
        if error.code == types.CONNECTION_CLOSED and not answered:
            return CRASHED, f"closed the connection during {phase}", f"server '{name}' closed the connection during {phase}.", []
        reason = f"answered {phase} with error {error.code}: {error.message}"
        return LIST_FAILED, reason, f"server '{name}' {reason}.", []
    if isinstance(error, ValidationError):
        reason = f"its {phase} reply does not follow the MCP schema: {describe_schema_error(error)}"
        return BAD_RESPONSE, reason, f"server '{name}': {reason}: {error}", []
    if isinstance(error, CopilotError):
        return ERROR, error_summary(str(error), name), str(error), []
    reason = f"{type(error).__name__}: {error}"
    return ERROR, reason, f"server '{name}' failed during {phase}: {reason}", []


@asynccontextmanager
async def _bounded_logs() -> AsyncIterator[Callable[[ChildProcess], None]]:
    """``on_spawn`` for a crawled child: its stderr log rotates at the pool's size while it runs."""
    async with anyio.create_task_group() as group:

        def watch(process: ChildProcess) -> None:
            group.start_soon(keep_log_bounded, process, MAX_STDERR_LOG_BYTES, LOG_CHECK_INTERVAL)

        try:
            yield watch
        finally:
            group.cancel_scope.cancel()


async def crawl_server(
    config: ServerConfig, *, timeout: float, log_dir: Path, workdir: Path
) -> tuple[ServerOutcome, list[ToolRecord], CatalogServer | None]:
    """Crawl one server; never raises for the server's own failures (they are in the outcome)."""
    limit = config.timeout or timeout
    log_path = log_dir / log_file_name(config.name) if config.transport == "stdio" else None
    log_offset = 0
    started = anyio.current_time()
    deadline = started + limit
    warnings: list[str] = []
    skipped: dict[str, str] = {}
    phase = "initialize"
    tools: list[types.Tool] | None = None
    others: list[ToolRecord] = []
    answered = False  # the error below is the server's own answer, read while it was connected
    try:
        # Inside the try: a log that cannot be looked at (its dir unusable) fails this server, not the crawl.
        log_offset = log_path.stat().st_size if log_path is not None and log_path.exists() else 0
        # The hard stop also bounds a start or a teardown that hangs; open_session kills the group.
        with anyio.CancelScope(deadline=deadline + TEARDOWN_GRACE):
            async with _bounded_logs() as watch, open_session(
                config, workdir=workdir, stderr_path=log_path, init_timeout=limit, on_spawn=watch
            ) as connection:
                start_seconds = round(anyio.current_time() - started, 2)
                phase = "tools/list"
                with anyio.fail_after(max(deadline - anyio.current_time(), 0.01)):
                    try:
                        tools = await list_all_tools(connection, warnings, skipped)
                    except MCPError as error:
                        answered = not connection_lost(error, connection.closed)  # read before the teardown
                        raise
                if connection.process is not None:  # where the server's author looks
                    for name, problem in skipped.items():
                        connection.process.note(skipped_words(name, problem))
                initialize_result = connection.initialize_result
                phase = "prompts/resources listing"
                with anyio.move_on_after(max(deadline - anyio.current_time(), 0.01)) as others_scope:
                    try:
                        others = await list_other_kinds(
                            connection.session,
                            initialize_result.capabilities,
                            config,
                            _server_description(config, initialize_result),
                            warnings,
                            connection.closed,
                        )
                    except Exception as error:  # noqa: BLE001 -- its tools are crawled; the rest is a bonus
                        warnings.append(config.redact(f"listing prompts/resources failed ({type(error).__name__}: {error})"))
                if others_scope.cancelled_caught:
                    warnings.append("listing prompts/resources took past the deadline; indexed its tools only")
                junk = connection.process.junk_lines if connection.process is not None else 0
        if tools is None:
            raise TimeoutError
    except Exception as error:  # noqa: BLE001 - every failure of a child is reported, none aborts the crawl
        while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
            error = error.exceptions[0]
        kind, reason, message, tail = _failure(config, error, phase=phase, limit=limit, answered=answered)
        if not tail and log_path is not None:
            tail = read_log_tail(log_path, log_offset, max_lines=STDERR_TAIL_LINES)
        reason, message, tail = config.redact(reason), config.redact(message), [config.redact(x) for x in tail]
        warnings[:] = [config.redact(warning) for warning in warnings]  # some quote the child's own errors
        logger.debug("%s: %s (%s)", printable(config.name), kind, printable(message), exc_info=kind == ERROR)
        outcome = ServerOutcome(
            server=config.name, ok=False, seconds=round(anyio.current_time() - started, 2), kind=kind,
            reason=reason, message=message, stderr_tail=tail[-STDERR_TAIL_LINES:], warnings=warnings,
            log_path=log_path,
        )
        return outcome, [], None

    # Warnings quote the child's own error messages (a prompts/list error echoing its API key).
    warnings[:] = [config.redact(warning) for warning in warnings]
    if junk:
        warnings.append(f"printed {junk} non-protocol line(s) on stdout; ignored (see its log)")
    for name, problem in skipped.items():
        logger.warning("server '%s': %s", printable(config.name), printable(config.redact(skipped_words(name, problem))))
    if not tools:
        warnings.append("listed no tools" if not skipped else "listed no tool with a usable definition")
    description = _server_description(config, initialize_result)
    records = [
        ToolRecord.model_validate(
            scrub_machine_paths(tool_record(tool, config, description).model_dump(), workdir, config)
        )
        for tool in tools
    ]
    tool_count = len(records)
    records += [ToolRecord.model_validate(scrub_machine_paths(r.model_dump(), workdir)) for r in others]
    # Kept in the catalog (a file that travels): named as the records are, the reasons without secrets.
    kept_out = {
        scrub_machine_paths(name, workdir, config): config.redact(scrub_machine_paths(why, workdir, config))
        for name, why in skipped.items()
    }
    info = CatalogServer(
        description=description, category=config.category, launch_hash=config.launch_hash(), tool_count=tool_count,
        start_seconds=start_seconds, skipped_tools=kept_out,
    )
    outcome = ServerOutcome(
        server=config.name, ok=True, tool_count=tool_count, seconds=round(anyio.current_time() - started, 2),
        start_seconds=start_seconds, warnings=warnings, skipped_tools=dict(kept_out), log_path=log_path,
    )
    return outcome, records, info


def _unexpected_failure(config: ServerConfig, error: Exception) -> ServerOutcome:
    """The outcome of a server whose crawl raised past :func:`crawl_server`'s own handling."""
    reason = config.redact(f"{type(error).__name__}: {error}")
    return ServerOutcome(server=config.name, ok=False, kind=ERROR, reason=reason, message=f"server '{config.name}': {reason}")


# ---------------------------------------------------------------------------------------------
# many servers


def _shown(text: str) -> str:
    """Server names and what children said, for a rich console: controls made visible, then markup escaped."""
    return escape(printable(text))


class _Display:
    """The progress bar on stderr (or nothing, for background crawls)."""

    def __init__(self, total: int, console: Console | None) -> None:
        self.console = console
        self.running: list[str] = []
        self.progress: Progress | None = None
        if console is not None:
            self.progress = Progress(
                SpinnerColumn(),
                TextColumn("[bold]crawl[/]"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("{task.description}"),
                console=console,
                transient=False,
            )
            self.task = self.progress.add_task("", total=total)

    def __enter__(self) -> _Display:
        if self.progress is not None:
            self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.update(self.task, description="")
            self.progress.stop()

    def _describe(self) -> str:
        shown = ", ".join(self.running[:3]) + (f" +{len(self.running) - 3}" if len(self.running) > 3 else "")
        return _shown(shown)

    def started(self, name: str) -> None:
        self.running.append(name)
        if self.progress is not None:
            self.progress.update(self.task, description=self._describe())

    def finished(self, outcome: ServerOutcome) -> None:
        self.running.remove(outcome.server)
        if self.progress is None:
            return
        if outcome.kind == SELF_ENTRY:
            line = f"[yellow]skipped[/] {_shown(outcome.server)}: {_shown(outcome.reason)}"
        elif outcome.ok:
            count = len(outcome.skipped_tools) - (LISTING_CUT in outcome.skipped_tools)
            skipped = f", [yellow]{count} skipped[/] for broken definitions" if count else ""
            if LISTING_CUT in outcome.skipped_tools:
                skipped += ", [yellow]more listed past the cap[/]"
            line = (
                f"[green]ok[/]     {_shown(outcome.server)}: {outcome.tool_count} tools{skipped} "
                f"(started in {outcome.start_seconds or 0:.1f} s, {outcome.seconds:.1f} s in all)"
            )
        else:
            line = f"[red]failed[/] {_shown(outcome.server)}: {_shown(outcome.kind or '')} - {_shown(outcome.reason)}"
        self.progress.console.print(line, highlight=False)
        self.progress.update(self.task, advance=1, description=self._describe())


async def crawl_servers(
    servers: Mapping[str, ServerConfig],
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
    timeout: float = DEFAULT_TIMEOUT,
    log_dir: Path,
    workdir_root: Path | None = None,
    progress: bool | Console = True,
    on_result: Callable[[ServerOutcome], None] | None = None,
) -> CrawlReport:
    """Crawl the enabled ``servers`` (disabled ones are listed in ``report.skipped``).

    ``workdir_root`` holds one work dir per child (a temporary dir, removed afterwards, when not
    given). ``progress`` shows a rich progress bar on stderr (or on the given console).
    ``on_result`` is called as each server finishes.
    """
    if concurrency < 1:
        raise ConfigError(f"concurrency must be at least 1 (got {concurrency}).")
    if not timeout > 0 or math.isinf(timeout):
        raise ConfigError(f"timeout must be a positive number of seconds (got {timeout}).")
    report = CrawlReport()
    enabled = {}
    for name, config in servers.items():
        if config.is_enabled:
            enabled[name] = config
        else:
            report.skipped[name] = config.reason or "disabled in the server list"
    try:
        log_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ConfigError(f"{log_dir}: cannot be the log directory of the crawled children ({error.strerror or error}).") from None
    console = progress if isinstance(progress, Console) else (make_console(stderr=True) if progress else None)
    results: dict[str, tuple[ServerOutcome, list[ToolRecord], CatalogServer | None]] = {}
    limiter = anyio.CapacityLimiter(concurrency)

    work_context: AbstractContextManager[str | Path] = (
        nullcontext(workdir_root) if workdir_root is not None else tempfile.TemporaryDirectory(prefix="mcp-crawl-")
    )
    with work_context as work, _Display(len(enabled), console) as display:

        async def crawl_one(name: str, config: ServerConfig) -> None:
            async with limiter:
                display.started(name)
                workdir = Path(work) / log_file_name(name).removesuffix(".log")
                try:
                    result = await crawl_server(config, timeout=timeout, log_dir=log_dir, workdir=workdir)
                except Exception as error:  # noqa: BLE001 -- a fault of ours with one server must not end the others' crawls
                    logger.debug("crawling %s failed", printable(name), exc_info=True)
                    result = _unexpected_failure(config, error), [], None
                results[name] = result
                display.finished(result[0])
                if on_result is not None:
                    on_result(result[0])

        async with anyio.create_task_group() as group:
            for name, config in enabled.items():
                group.start_soon(crawl_one, name, config)

    for name in enabled:  # the server list's order, not completion order
        outcome, records, info = results[name]
        if outcome.kind == SELF_ENTRY:
            report.skipped[name] = f"{SELF_ENTRY_REASON}: {outcome.reason}"
            continue
        report.outcomes[name] = outcome
        report.records.extend(records)
        if info is not None:
            report.servers[name] = info
    return report


# ---------------------------------------------------------------------------------------------
# CLI


def count_kinds(records: Iterable[ToolRecord]) -> str:
    """``"20 tools"``, or ``"20 tools, 2 prompts, 3 resources"`` when there are others."""
    counts = {"tools": 0, "prompts": 0, "resources": 0}
    for record in records:
        counts["tools" if record.kind == "tool" else "prompts" if record.kind == "prompt" else "resources"] += 1
    return ", ".join(f"{n} {what}" for what, n in counts.items() if n or what == "tools")


def print_summary(report: CrawlReport, console: Console) -> None:
    """A table of the servers that failed and why, then one line of totals."""
    if report.failed:
        table = Table(title="servers that could not be crawled", title_justify="left", show_lines=True)
        table.add_column("server", style="bold", no_wrap=True)
        table.add_column("failure", style="red", no_wrap=True)
        table.add_column("why", overflow="fold")
        table.add_column("last stderr lines", style="dim", overflow="fold")
        for outcome in report.failed:
            tail = "\n".join(_shown(line) for line in outcome.stderr_tail[-4:])
            table.add_row(_shown(outcome.server), outcome.kind or "", _shown(outcome.reason), tail)
        console.print(table)
    warned = [outcome for outcome in report.outcomes.values() if outcome.ok and outcome.warnings]
    for outcome in warned:
        console.print(f"[yellow]note[/] {_shown(outcome.server)}: {_shown('; '.join(outcome.warnings))}", highlight=False)
    _print_skipped_tools(report, console)
    itself = [name for name, reason in report.skipped.items() if reason.startswith(SELF_ENTRY_REASON)]
    disabled = [name for name in report.skipped if name not in itself]
    if disabled:
        console.print(f"skipped {len(disabled)} disabled server(s): {_shown(', '.join(disabled))}", highlight=False)
    if itself:
        console.print(f"skipped {len(itself)} entry(ies) that are the copilot itself: {_shown(', '.join(itself))}", highlight=False)
    _print_start_times(report, console)
    console.print(
        f"crawled {len(report.succeeded)} of {len(report.outcomes)} server(s), {count_kinds(report.records)}; "
        f"{len(report.failed)} failed",
        highlight=False,
    )


def _print_skipped_tools(report: CrawlReport, console: Console) -> None:
    """Every tool left out for a broken definition, by server (their servers' other tools are indexed),
    then every server whose listing was cut at the cap."""
    # From the catalog's entries: what is printed is what is kept (paths and secrets masked).
    entries = [(server, name, why) for server, info in report.servers.items() for name, why in info.skipped_tools.items()]
    skipped = [(server, name, why) for server, name, why in entries if name != LISTING_CUT]
    if skipped:
        console.print(
            f"[yellow]skipped {len(skipped)} tool(s)[/] whose definition is broken (the other tools of their servers "
            "are indexed; the server's author can fix them):",
            highlight=False,
        )
        for server, name, why in skipped:
            console.print(f"  {_shown(server)}/{_shown(name)}: {_shown(why)}", highlight=False)
    for server, _, why in (entry for entry in entries if entry[1] == LISTING_CUT):
        console.print(f"[yellow]cut[/] {_shown(server)}: {_shown(why)}", highlight=False)


#: Servers that take at least this long to answer initialize are listed after a crawl.
SLOW_START_SECONDS = 5.0


def _print_start_times(report: CrawlReport, console: Console) -> None:
    """Start times (launch to initialize answered): the median, and every slow starter by name."""
    starts = sorted(
        ((o.start_seconds, o.server) for o in report.outcomes.values() if o.ok and o.start_seconds is not None),
        reverse=True,
    )
    if not starts:
        return
    median = starts[len(starts) // 2][0]
    slow = [f"{_shown(server)} {seconds:.1f} s" for seconds, server in starts if seconds >= SLOW_START_SECONDS]
    line = f"start times (launch to initialize): median {median:.1f} s, slowest {starts[0][0]:.1f} s"
    if slow:
        line += f"; {len(slow)} slow to start (>= {SLOW_START_SECONDS:g} s): " + ", ".join(slow)
    console.print(line, highlight=False)


def _suggest(name: str, choices: Iterable[str]) -> str:
    matches = nearest_names(name, choices)
    return f" Did you mean: {', '.join(matches)}?" if matches else ""


def _earlier_records(out: Path, servers: Mapping[str, ServerConfig], console: Console) -> Catalog | None:
    """A full crawl's base: the catalog it replaces, less the servers gone from the server list, so
    that a server failing now (a timeout, a network hiccup) keeps its earlier records. A catalog
    that cannot be read is replaced, as the crawl is there to write a new one."""
    if not out.exists():
        return None
    try:
        earlier = load_catalog(out)
    except CopilotError as error:
        console.print(f"note: {_shown(str(error))} It is replaced by this crawl.", highlight=False)
        return None
    listed = set(servers)
    return Catalog(
        source=earlier.source,
        servers={name: info for name, info in earlier.servers.items() if name in listed},
        tools=[record for record in earlier.tools if record.server in listed],
    )


def select_servers(servers: Mapping[str, ServerConfig], only: list[str] | None, source: str) -> dict[str, ServerConfig]:
    """The servers named by ``--only`` (all when None); unknown names fail with suggestions."""
    if not only:
        return dict(servers)
    unknown = [name for name in only if name not in servers]
    if unknown:
        hints = " ".join(f"'{name}' is not in {source}.{_suggest(name, servers)}" for name in unknown)
        raise ConfigError(f"{hints} Names are the keys under 'mcpServers'.")
    return {name: servers[name] for name in dict.fromkeys(only)}


def review_crawl(records: list[ToolRecord], console: Console) -> None:
    """Pin what the crawl saw and scan it: held-back tools and medium findings are printed."""
    from index.trust.cli import print_review_summary, print_scan_notes
    from index.trust.review import review_by_server
    from index.trust.settings import TrustSettings

    try:
        results = review_by_server(TrustSettings.load().reviewer(), records, pin=True)
    except CopilotError as error:
        console.print(f"[yellow]warning[/]: tools were not checked against their pins: {_shown(str(error))}")
        return
    print_review_summary(console, results)
    print_scan_notes(console, records)


def check_catalog_target(out: Path, flag: str) -> None:
    """Fail now, not at the write after the crawl, when ``out`` cannot be a catalog file."""
    if out.is_dir():
        raise ConfigError(f"{flag} {out}: is a directory; give the catalog file to write, e.g. {out / 'catalog.json'}.")
    for parent in out.parents:
        if parent.exists():  # a path through a file does not exist: the first one that does is what is in the way
            if not parent.is_dir():
                raise ConfigError(f"{flag} {out}: {parent} is a file, not a directory; give a catalog path inside a directory.")
            return


def make_log_dir(log_dir: Path, flag: str | None, home: Path) -> None:
    """Create the children's log dir; one that cannot be is named by ``flag`` (by COPILOT_HOME when None)."""
    try:
        log_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        if log_dir.is_file():
            reason = "it is a file, not a directory"
        elif isinstance(error, (FileExistsError, NotADirectoryError)):
            reason = "a file is in the way"
        else:
            reason = error.strerror or str(error)
        if flag is not None:
            raise ConfigError(f"{flag} {log_dir}: cannot use it for the children's logs ({reason}); give a writable directory.") from None
        raise ConfigError(
            f"cannot use {log_dir} for the children's logs ({reason}); COPILOT_HOME ({home}) must be a writable "
            "directory: fix it or set COPILOT_HOME elsewhere (or pass --log-dir DIR)."
        ) from None


def print_kept(catalog: Catalog, report: CrawlReport, selected: Mapping[str, ServerConfig], console: Console) -> None:
    """What the written catalog keeps from the earlier one, by why: a failure now, a server skipped
    (disabled), or one ``--only`` did not name -- the last are no failure, and only counted."""
    kept = {record.server for record in catalog.tools} - set(report.servers)
    in_order = [name for name in catalog.servers if name in kept]
    failed = [name for name in in_order if name in report.outcomes]
    not_tried = [name for name in in_order if name in selected and name not in report.outcomes]
    unnamed = [name for name in in_order if name not in selected]
    if failed:
        console.print(
            f"kept the earlier records of {len(failed)} server(s) whose crawl failed now: {_shown(', '.join(failed))}",
            highlight=False,
        )
    if not_tried:
        console.print(
            f"kept the earlier records of {len(not_tried)} skipped server(s), not crawled now: {_shown(', '.join(not_tried))}",
            highlight=False,
        )
    if unnamed:
        console.print(f"kept the records of {len(unnamed)} other server(s) as they were (not named by --only)", highlight=False)


def crawl_command(args: argparse.Namespace) -> int:
    """``python -m index crawl``: returns 0 when at least one server was crawled."""
    settings = CopilotSettings.load()
    servers_path = Path(args.servers) if args.servers else settings.servers_file()
    loaded = load_servers(servers_path)
    selected = select_servers(loaded.servers, args.only, str(servers_path))
    out = Path(args.out) if args.out else settings.crawl_output()
    log_dir = Path(args.log_dir) if args.log_dir else settings.home / "crawl-logs"
    # Both checked before any child starts: a crawl takes minutes, and its catalog must be writable at the end.
    check_catalog_target(out, "--out" if args.out else "the catalog (COPILOT_CATALOG)")
    make_log_dir(log_dir, "--log-dir" if args.log_dir else None, settings.home)
    console = make_console(stderr=True)
    # Read the catalog to merge into before starting anything: a broken one must not be overwritten.
    # An installed package's first crawl into COPILOT_HOME builds on the bundled snapshot, which it
    # replaces from then on: with nothing to merge into, `--only X` left a catalog of X alone.
    earlier = out if out.exists() or args.out else settings.catalog_file()
    base = load_catalog(earlier) if args.only and earlier.exists() else None
    if not args.only:
        base = _earlier_records(earlier, loaded.servers, console)
    if not any(config.is_enabled for config in selected.values()):
        reasons = "; ".join(f"{name}: {config.reason or 'disabled'}" for name, config in selected.items())
        console.print(f"error: no enabled server to crawl ({_shown(reasons) or 'the server list is empty'}).")
        return 1
    report = anyio.run(
        partial(
            crawl_servers, selected, concurrency=args.concurrency, timeout=args.timeout, log_dir=log_dir, progress=console
        )
    )
    print_summary(report, console)
    review_crawl(report.records, console)
    if not report.succeeded:
        console.print(f"error: no server could be crawled; {_shown(str(out))} was left unchanged. Logs: {_shown(str(log_dir))}")
        return 1
    catalog = report.to_catalog(base, source=f"crawl of {servers_path.name}")
    if not args.only:  # in the server list's order, whatever the earlier catalog's was
        rank = {name: i for i, name in enumerate(loaded.servers)}
        catalog.servers = dict(sorted(catalog.servers.items(), key=lambda item: rank.get(item[0], len(rank))))
        catalog.tools.sort(key=lambda record: rank.get(record.server, len(rank)))
    print_kept(catalog, report, selected, console)
    catalog.save(out)
    console.print(
        f"wrote {_shown(str(out))}: {count_kinds(catalog.tools)} from {len(catalog.servers)} servers; "
        f"each child's stderr is in {_shown(str(log_dir))}/<server>.log",
        highlight=False,
    )
    return 0

