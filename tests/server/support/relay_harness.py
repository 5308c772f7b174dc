"""A real MCP host for the relay tests: answers elicitation, sampling and roots, collects logs.

The host is the mcp SDK ``Client`` itself (either era); :class:`Host` holds its callbacks and what
they saw, so one module-scoped client serves many tests. ``relay_entry`` is a servers-file entry
for the relay fixture server (``tests/fixtures/relay_server.py``); :func:`copilot_client` runs a
real copilot over stdio or streamable HTTP and connects one client to it.
"""

from __future__ import annotations

import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio
import mcp_types as types
from mcp import Client

from tests.server.support.copilot_harness import (
    EXECUTE_ONLY,
    HttpCopilot,
    RunningClient,
    copilot_env,
    copy_home,
    http_client_for,
    stdio_client_for,
    write_servers,
)
from tests.support.processes import SLOW_START_SERVER

REPO = Path(__file__).resolve().parents[3]
RELAY_SERVER = REPO / "tests" / "fixtures" / "relay_server.py"
HTTP_TOKEN = "relay-token-0123456789"

Transport = Literal["stdio", "http"]
#: (transport, client mode) of each host; "auto" negotiates 2026-07-28.
HOSTS: list[tuple[Transport, str]] = [("stdio", "legacy"), ("stdio", "auto"), ("http", "legacy"), ("http", "auto")]


def relay_entry(name: str, **extra: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(RELAY_SERVER), "--name", name], **extra}


def slow_relay_entry(name: str, gate: Path) -> dict[str, Any]:
    """The relay fixture server as ``name``, whose start waits until the file ``gate`` exists
    (``tests/fixtures/slow_start_server.py``)."""
    return {"command": sys.executable, "args": [str(SLOW_START_SERVER), str(gate), "--name", name, "--tools", "relay"]}


@dataclass
class Host:
    """The host's side: how it answers, and everything the copilot relayed to it."""

    root: Path
    elicit_answer: str = "accept"
    questions: list[str] = field(default_factory=list)
    prompts: list[str] = field(default_factory=list)
    system_prompts: list[str | None] = field(default_factory=list)
    include_contexts: list[str | None] = field(default_factory=list)
    root_requests: int = 0
    logs: list[types.LoggingMessageNotificationParams] = field(default_factory=list)
    #: Set by each log message while :meth:`wait_for_logs` waits (made there: it needs the event loop).
    _logged: anyio.Event | None = field(default=None, repr=False)

    async def elicitation(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.questions.append(params.message)
        if self.elicit_answer == "accept":
            return types.ElicitResult(action="accept", content={"name": "Ada", "approve": True})
        return types.ElicitResult(action=self.elicit_answer)  # type: ignore[arg-type]

    async def sampling(self, context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        message = params.messages[0].content
        self.prompts.append(getattr(message, "text", ""))
        self.system_prompts.append(params.system_prompt)
        self.include_contexts.append(params.include_context)
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="a short summary"), model="host-model"
        )

    async def roots(self, context: Any) -> types.ListRootsResult:
        self.root_requests += 1
        return types.ListRootsResult(roots=[types.Root(uri=self.root.as_uri(), name="project")])

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append(params)
        if self._logged is not None:
            self._logged.set()

    async def wait_for_logs(self, count: int, timeout: float = 30.0) -> None:
        """Until ``count`` log messages arrived in all (bounded): they may trail the result of the call."""
        with anyio.fail_after(timeout):
            while len(self.logs) < count:
                self._logged = anyio.Event()
                await self._logged.wait()

    def client_options(self) -> dict[str, Any]:
        return {
            "elicitation_callback": self.elicitation,
            "sampling_callback": self.sampling,
            "list_roots_callback": self.roots,
            "logging_callback": self.log,
        }


class Progress:
    """A progress callback that remembers what arrived and fires ``started`` on a "started …" message,
    ``waited`` on the copilot's own progress while a call waits for its server (a negative value)."""

    def __init__(self) -> None:
        self.seen: list[tuple[float, float | None, str | None]] = []
        self.started = anyio.Event()
        self.waited = anyio.Event()

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.seen.append((progress, total, message))
        if message and message.startswith("started"):
            self.started.set()
        if progress < 0:
            self.waited.set()

    def after_waiting(self, why: str) -> list[tuple[float, float | None, str | None]]:
        """What followed the copilot's notes while the call waited for its server, once they are checked:
        at least one, all before the child's own progress, valued -1, -1/2, ..., without a total, each
        message matching ``why`` (a regular expression; ``SECONDS`` stands for the seconds waited)."""
        notes = [seen for seen in self.seen if seen[0] < 0]
        assert notes and self.seen[: len(notes)] == notes, self.seen
        assert [value for value, _, _ in notes] == [-1.0 / n for n in range(1, len(notes) + 1)]
        pattern = re.compile(why.replace("SECONDS", r"\d+"))
        assert all(total is None and pattern.fullmatch(message or "") for _, total, message in notes), notes
        return self.seen[len(notes) :]


def execute_args(server: str, tool: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"server_name": server, "tool_name": tool, "params": params or {}}


@asynccontextmanager
async def copilot_client(
    transport: Transport, servers: Path, env: dict[str, str], workdir: Path, **client_options: Any
) -> AsyncIterator[Client]:
    """A client connected to a real copilot process serving ``servers`` over ``transport``.

    stdio: the client starts the copilot; http: ``python -m server --http`` on a free port, behind
    ``HTTP_TOKEN``. The copilot's stderr goes to ``workdir/copilot.stderr.log``.
    """
    errlog = workdir / "copilot.stderr.log"
    process: HttpCopilot | None = None
    if transport == "stdio":
        running = RunningClient(stdio_client_for(servers, env, errlog, **client_options))
    else:
        args = ["--servers", str(servers), "--http", "--port", "0"]
        process = HttpCopilot(args, {**env, "COPILOT_HTTP_TOKEN": HTTP_TOKEN}, workdir, errlog)
        await process.start()
        assert process.url is not None
        running = RunningClient(http_client_for(process.url, token=HTTP_TOKEN, **client_options))
    try:
        yield await running.start()
    finally:
        try:
            await running.stop()
        finally:
            if process is not None:
                await process.stop()


def host_project(root: Path) -> Path:
    """The folder a test's host gives as its root (``root/project``, made empty)."""
    project = root / "project"
    project.mkdir()
    return project


@asynccontextmanager
async def relay_copilot(
    root: Path,
    built_index: Path,
    entries: dict[str, dict[str, Any]],
    transport: Transport,
    host: Host,
    **client_options: Any,
) -> AsyncIterator[tuple[Client, Path]]:
    """A real copilot serving ``entries`` over ``transport`` from a copy of ``built_index``'s home
    under ``root`` (no indexing), and a client whose callbacks are ``host``'s; yields the client
    and the home. ``COPILOT_*`` settings come as keyword arguments named so; the others go to the client."""
    settings = {name: value for name, value in client_options.items() if name.startswith("COPILOT_")}
    options = {name: value for name, value in client_options.items() if name not in settings}
    home = copy_home(built_index, root / "home")
    servers = write_servers(root / "servers.json", entries)
    env = copilot_env(home, **{**EXECUTE_ONLY, **settings})
    async with copilot_client(transport, servers, env, root, **options, **host.client_options()) as client:
        yield client, home
