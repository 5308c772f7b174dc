"""Running the real copilot (``python -m server``) in a subprocess for the app tests.

- ``built_index`` (session-scoped): crawls real fixture servers and builds a real index in a
  temp ``COPILOT_HOME``, once per run (the first worker that needs it builds it for all).
- ``copilot_home`` copies it per copilot process, so processes never share a store.
- :class:`StdioCopilot` / :class:`HttpCopilot` start a copilot and keep one MCP client session
  open in a background task, so a module-scoped fixture can share it across tests.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import socket
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import httpx2
import psutil
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types import CallToolResult, Implementation

from index.catalog.servers import ServerConfig, ServersFile, parse_servers
from index.settings import CopilotSettings
from server.settings import ServerSettings
from server.trajectory.records import parse_event
from tests.support.run_shared import built_once

if TYPE_CHECKING:
    from server.aggregate.service import Aggregation
    from server.copilot import Copilot

REPO = Path(__file__).resolve().parents[3]
FIXTURE_SERVER = REPO / "tests" / "fixtures" / "fixture_server.py"
CHANGING_SERVER = REPO / "tests" / "fixtures" / "hostile" / "changing_server.py"
SCHEMA_BREAKER = REPO / "tests" / "fixtures" / "hostile" / "schema_breaking_server.py"
SHAPESHIFTER = REPO / "tests" / "fixtures" / "hostile" / "shapeshifter_server.py"
POISON_SERVER = REPO / "tests" / "fixtures" / "hostile" / "poison_server.py"
#: Servers whose tools are crawled into the test index ("gamma" is in no test's servers file).
INDEXED_SERVERS: dict[str, list[str]] = {
    "alpha": [],
    "beta": [],
    "crashy": [],
    "slow": ["--tools", "sleep", "echo"],
    "gamma": [],
}
#: Servers of ``changing_server.py`` (prompts, resources, tools that change) crawled into the test index.
INDEXED_CHANGING_SERVERS = ["jotter"]
SECRET_NAME = "COPILOT_TEST_SECRET_TOKEN"
SECRET_VALUE = "s3cr3t-do-not-leak"
START_TIMEOUT = 60.0


def fixture_entry(name: str, mode: str = "healthy", *, tools: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    args = [str(FIXTURE_SERVER), "--name", name, "--mode", mode, *(["--tools", *tools] if tools else [])]
    return {"command": sys.executable, "args": args, **extra}


def changing_entry(name: str, *, tools_file: Path | None = None, **extra: Any) -> dict[str, Any]:
    """A servers-file entry of the changing fixture server (see ``tests/fixtures/hostile/changing_server.py``)."""
    args = [str(CHANGING_SERVER), "--name", name, *(["--tools-file", str(tools_file)] if tools_file else [])]
    return {"command": sys.executable, "args": args, **extra}


def schema_breaker_entry(*flags: str, **extra: Any) -> dict[str, Any]:
    """A servers-file entry of the child with broken tool definitions (``tests/fixtures/hostile/schema_breaking_server.py``)."""
    return {"command": sys.executable, "args": [str(SCHEMA_BREAKER), *flags], **extra}


#: Why the pool and execute refuse the schema-breaking child's ``wrong_type`` (its inputSchema is a string).
BROKEN_WRONG_TYPE = (
    "tool 'wrong_type' of server 'breaker' cannot be used: its definition is broken (inputSchema.type: should be "
    "'object' (got 'string')), so the copilot left it out of the server's tools. Use another tool (route finds "
    "alternatives); the server's author has to fix this one."
)


def shapeshifter_entry(state: Path, change: str, *flags: str, **extra: Any) -> dict[str, Any]:
    """A servers-file entry of the child that changes its definitions ``change`` from its second start
    (``tests/fixtures/hostile/shapeshifter_server.py``; ``state`` counts its starts)."""
    args = [str(SHAPESHIFTER), "--state", str(state), "--change", change, *flags]
    return {"command": sys.executable, "args": args, **extra}


def poison_entry(spec: Path, **extra: Any) -> dict[str, Any]:
    """A servers-file entry of the child serving exactly the JSON ``spec`` (``tests/fixtures/hostile/poison_server.py``)."""
    return {"command": sys.executable, "args": [str(POISON_SERVER), str(spec)], **extra}


def copilot_settings(home: Path, tmp_path: Path, **extra: Any) -> ServerSettings:
    """An in-process copilot's settings: ``home``, no catalog, logs in ``tmp_path``, a 60 s crawl
    timeout, and routes that wait (up to 60 s) for the embedding model: a ranking must not depend
    on whether this process loaded it already (under xdist only one worker built the index); tests
    of the keyword-only answer set ``route_model_wait=0``. ``extra`` adds to or overrides them."""
    defaults: dict[str, Any] = {
        "home": home,
        "catalog": tmp_path / "no-catalog.json",
        "log_dir": tmp_path / "logs",
        "crawl_timeout": 60,
        "route_model_wait": 60,
    }
    return ServerSettings(**{**defaults, **extra})


@asynccontextmanager
async def copilot_with_aggregation(
    settings: ServerSettings, servers: ServersFile
) -> AsyncIterator[tuple[Copilot, Aggregation]]:
    """(copilot, aggregation): ``Copilot.running`` (started now) with the host-facing aggregation,
    wired to each other as ``server.app`` wires them."""
    from server.aggregate.service import Aggregation
    from server.copilot import Copilot

    aggregation = Aggregation(settings, lambda ctx: ("shared", None))
    async with Copilot.running(settings, servers, start_now=True) as copilot, aggregation.running(copilot):
        copilot.aggregation = aggregation
        yield copilot, aggregation


def write_servers(path: Path, entries: dict[str, dict[str, Any]]) -> Path:
    path.write_text(json.dumps({"mcpServers": entries}, indent=1), encoding="utf-8")
    return path


def build_test_index(home: Path) -> None:
    """Crawl the indexed fixture servers and build the index in ``home`` (real crawl, real model)."""
    from index.catalog.crawl import crawl_servers
    from index.search.tool_index import ToolIndex

    entries = {
        name: {"command": sys.executable, "args": [str(FIXTURE_SERVER), "--name", name, *args]}
        for name, args in INDEXED_SERVERS.items()
    }
    entries.update({name: changing_entry(name) for name in INDEXED_CHANGING_SERVERS})
    servers = parse_servers(json.dumps({"mcpServers": entries})).servers

    async def crawl() -> Any:
        return await crawl_servers(
            servers,
            concurrency=3,
            timeout=60,
            log_dir=home / "crawl-logs",
            workdir_root=home / "crawl-work",
            progress=False,
        )

    report = anyio.run(crawl)
    assert not report.failed, [o.message for o in report.failed]
    index = ToolIndex.open(CopilotSettings(home=home))
    index.sync(report.records)


@pytest.fixture(scope="session")
def built_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Built once per run and shared by every worker: tests copy it (``copy_home``), never change it."""
    return built_once(tmp_path_factory, "copilot-index", build_test_index)


def crawl_into(home: Path, servers_file: Path, root: Path) -> None:
    """Crawl every server of ``servers_file`` for real and add them to the index in ``home`` (with the
    tools each left out for a broken definition, as the copilot's own indexing keeps them)."""
    import anyio

    from index.catalog.crawl import crawl_servers
    from index.catalog.servers import parse_servers
    from index.settings import CopilotSettings
    from index.search.tool_index import ToolIndex

    servers = parse_servers(servers_file.read_text(encoding="utf-8")).servers

    async def crawl() -> Any:
        return await crawl_servers(
            servers, concurrency=1, timeout=60, log_dir=root / "logs", workdir_root=root / "work", progress=False
        )

    report = anyio.run(crawl)
    assert not report.failed, [o.message for o in report.failed]
    ToolIndex.open(CopilotSettings(home=home)).sync(report.records, servers=list(servers), skipped=report.skipped_tools)


def copy_home(built: Path, target: Path) -> Path:
    shutil.copytree(built, target, ignore=shutil.ignore_patterns("crawl-*"))
    return target


#: Settings of a copilot a test starts to relay or execute: no indexing of new servers, and no
#: embedding model loaded at start-up (seconds of CPU per copilot; a route that searches still loads it).
EXECUTE_ONLY = {"COPILOT_AUTO_INDEX": "false", "COPILOT_WARM_INDEX": "false"}


def copilot_env(home: Path, **settings: str) -> dict[str, str]:
    """The copilot's environment: ours minus any COPILOT_* setting, plus a secret and ``settings``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("COPILOT_")}
    env.update(
        {
            "COPILOT_HOME": str(home),
            "COPILOT_CATALOG": str(home / "no-catalog.json"),
            SECRET_NAME: SECRET_VALUE,
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update(settings)
    return env


def descendants(process: psutil.Process) -> list[psutil.Process]:
    try:
        return process.children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def alive(processes: list[psutil.Process]) -> list[psutil.Process]:
    return [p for p in processes if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


def find_copilot(marker: str) -> psutil.Process:
    """The copilot subprocess of this test process whose command line contains ``marker``."""
    for child in psutil.Process().children(recursive=True):
        try:
            cmdline = child.cmdline()
        except psutil.Error:
            continue
        if "server" in cmdline and any(marker in part for part in cmdline):
            return child
    raise AssertionError(f"no copilot process with {marker!r} in its command line")


async def wait_exited(process: psutil.Process, timeout: float) -> None:
    """Wait (bounded) for ``process`` to exit, without blocking the event loop."""
    await anyio.to_thread.run_sync(lambda: process.wait(timeout=timeout))


def text_of(result: CallToolResult) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


def read_events(path: Path) -> list[Any]:
    return [parse_event(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


async def raw_stdio_answers(
    servers: Path,
    env: dict[str, str],
    cwd: Path,
    frames: list[bytes],
    *,
    one_by_one: bool = False,
    expect: set[Any] | None = None,
    timeout: float = 90,
) -> dict[Any, dict[str, Any]]:
    """``frames`` written to a real copilot's stdin as they are (no SDK client), its answers by id.

    All frames are written at once, then the answers to ``expect`` (default: the ids of the frames
    that parse as JSON) are awaited; with ``one_by_one``, each frame with an id first waits for its
    answer. The copilot's stderr goes to ``cwd/copilot.stderr.log``.
    """
    expected = [_frame_id(frame) for frame in frames]
    answers: dict[Any, dict[str, Any]] = {}
    buffer = b""
    with (cwd / "copilot.stderr.log").open("wb") as stderr:
        process = await anyio.open_process(
            [sys.executable, "-m", "server", "--servers", str(servers)], env=env, cwd=str(cwd), stderr=stderr
        )
        async with process:
            assert process.stdin is not None and process.stdout is not None

            async def until_answered(ids: set[Any]) -> None:
                nonlocal buffer
                while not ids <= answers.keys():
                    buffer += await process.stdout.receive()  # type: ignore[union-attr]
                    *lines, buffer = buffer.split(b"\n")
                    for message in map(json.loads, lines):
                        answers[message.get("id")] = message

            with anyio.fail_after(timeout):
                for frame, request_id in zip(frames, expected, strict=True):
                    await process.stdin.send(frame)
                    if one_by_one and request_id is not None:
                        await until_answered({request_id})
                await until_answered(expect if expect is not None else {i for i in expected if i is not None})
                await process.stdin.aclose()
                await process.wait()
    return answers


def _frame_id(frame: bytes) -> Any:
    try:
        return json.loads(frame).get("id")
    except ValueError:
        return None


@dataclass
class RunningClient:
    """An MCP client session kept open by a background task (so fixtures can outlive one test)."""

    connect: Callable[[AsyncExitStack], Any]
    client: Client | None = None
    _ready: asyncio.Event = field(default_factory=asyncio.Event)
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    _task: asyncio.Task[None] | None = None
    _error: BaseException | None = None

    async def start(self) -> Client:
        self._task = asyncio.create_task(self._run())
        with anyio.fail_after(START_TIMEOUT):
            await self._ready.wait()
        if self._error is not None:
            raise self._error
        assert self.client is not None
        return self.client

    async def _run(self) -> None:
        try:
            async with AsyncExitStack() as stack:
                self.client = await self.connect(stack)
                self._ready.set()
                await self._stop.wait()
        except BaseException as error:  # noqa: BLE001 -- surfaced by start()/stop()
            self._error = error
            self._ready.set()

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            with anyio.fail_after(30):
                await self._task


def stdio_client_for(
    servers: Path,
    env: dict[str, str],
    errlog: Path,
    *,
    extra_args: list[str] | None = None,
    client_name: str = "copilot-tests",
    **client_options: Any,
) -> Callable[[AsyncExitStack], Any]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "server", "--servers", str(servers), *(extra_args or [])],
        env=env,
        cwd=str(servers.parent),
    )

    async def connect(stack: AsyncExitStack) -> Client:
        log = stack.enter_context(errlog.open("a", encoding="utf-8"))
        client = Client(
            stdio_client(params, errlog=log),
            client_info=Implementation(name=client_name, version="1.0"),
            **client_options,
        )
        return await stack.enter_async_context(client)

    return connect


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


_SERVING = re.compile(rb"serving MCP over streamable HTTP on (http://\S+)\r?\n")


@dataclass
class HttpCopilot:
    """A copilot serving HTTP in a subprocess; ``started`` fires when it reports that it serves.

    Pass ``--port 0``: the copilot binds a free port itself and ``url`` is read from its log, so no
    other process can take the port between choosing and binding it.
    """

    args: list[str]
    env: dict[str, str]
    cwd: Path
    stderr_path: Path
    process: anyio.abc.Process | None = None
    started: asyncio.Event = field(default_factory=asyncio.Event)
    start_up_done: asyncio.Event = field(default_factory=asyncio.Event)
    url: str | None = None
    _drain: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.process = await anyio.open_process(
            [sys.executable, "-m", "server", *self.args], env=self.env, cwd=str(self.cwd), stdin=None, stdout=None
        )
        self._drain = asyncio.create_task(self._drain_stderr())
        with anyio.fail_after(START_TIMEOUT):
            await self.started.wait()
        if self.process.returncode is not None or self.url is None:
            raise AssertionError(f"copilot exited early or never said where it serves; see {self.stderr_path}")

    async def _drain_stderr(self) -> None:
        # Keep reading so the copilot never blocks on a full pipe; the readiness line sets `started`.
        assert self.process is not None and self.process.stderr is not None
        with self.stderr_path.open("ab") as log:
            buffer = b""
            async for chunk in self.process.stderr:
                log.write(chunk)
                log.flush()
                buffer = (buffer + chunk)[-4096:]
                serving = _SERVING.search(buffer)
                if serving and self.url is None:
                    self.url = serving.group(1).decode()
                    self.started.set()
                if b"start-up work done" in buffer:
                    self.start_up_done.set()
        self.started.set()

    async def stop(self) -> int | None:
        assert self.process is not None
        if self.process.returncode is None:
            self.process.terminate()
        with anyio.fail_after(30):
            code = await self.process.wait()
        if self._drain is not None:
            await self._drain
        return code


def raw_mcp_headers(token: str) -> dict[str, str]:
    """Headers of a hand-made MCP POST (raw HTTP tests): both answer forms accepted, the bearer token."""
    return {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "Authorization": f"Bearer {token}",
    }


def raw_initialize(client_name: str, version: str = "2025-06-18") -> dict[str, Any]:
    """A hand-made handshake-era ``initialize`` request (raw HTTP tests)."""
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": client_name, "version": "0"}},
    }


async def start_http_copilot(
    root: Path, token: str, entries: dict[str, dict[str, Any]] | None = None, **settings: str
) -> HttpCopilot:
    """A started copilot serving streamable HTTP behind ``token`` on a port it chose (``url`` set),
    ``entries`` (default: an ``alpha`` fixture child) as its servers, in ``root`` (home, logs, the
    servers file, ``stderr.log``); no indexing, no model warm-up; ``settings`` add or override
    ``COPILOT_*`` variables."""
    servers = write_servers(root / "servers.json", entries if entries is not None else {"alpha": fixture_entry("alpha")})
    variables = {
        "COPILOT_LOG_DIR": str(root / "logs"),
        "COPILOT_HTTP_TOKEN": token,
        **EXECUTE_ONLY,
        **settings,
    }
    copilot = HttpCopilot(
        ["--servers", str(servers), "--http", "--port", "0"], copilot_env(root / "home", **variables), root, root / "stderr.log"
    )
    await copilot.start()
    assert copilot.url is not None
    return copilot


async def open_raw_session(
    http: httpx2.AsyncClient, url: str, token: str, *, client_name: str = "raw", version: str = "2025-06-18"
) -> dict[str, str]:
    """The headers of a handshake-era session opened by hand (``initialize``, then ``initialized``)."""
    opened = await http.post(url, json=raw_initialize(client_name, version), headers=raw_mcp_headers(token))
    assert opened.status_code == 200, opened.text
    headers = {
        **raw_mcp_headers(token),
        "mcp-session-id": opened.headers["mcp-session-id"],
        "mcp-protocol-version": version,
    }
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await http.post(url, json=initialized, headers=headers)).status_code == 202
    return headers


def http_client_for(url: str, *, token: str | None, client_name: str = "copilot-http-tests", **options: Any):
    async def connect(stack: AsyncExitStack) -> Client:
        headers = {"Authorization": f"Bearer {token}"} if token else None
        http = await stack.enter_async_context(create_mcp_http_client(headers=headers))
        client = Client(
            streamable_http_client(url, http_client=http),
            client_info=Implementation(name=client_name, version="2.0"),
            **options,
        )
        return await stack.enter_async_context(client)

    return connect


def server_configs(path: Path) -> dict[str, ServerConfig]:
    return parse_servers(path.read_text(encoding="utf-8"), source=str(path)).servers
