"""Errors raised while starting, reaching or initializing a child MCP server.

All derive from :class:`~index.errors.CrawlError`, so the crawler catches them as crawl failures;
the copilot's pool turns them into ``server_unavailable`` errors. Messages say what to do.
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp.types as types
from mcp.shared.exceptions import MCPError

from index.errors import CrawlError


class ChildStartError(CrawlError):
    """A child server could not be started, reached or initialized."""

    def __init__(self, message: str, *, server: str = "", stderr_tail: list[str] | None = None) -> None:
        super().__init__(message)
        self.server = server
        self.stderr_tail = list(stderr_tail or [])


class CommandNotFoundError(ChildStartError):
    """The stdio command is not installed / not on PATH."""


class ChildExitedError(ChildStartError):
    """The child exited (or closed stdout) before answering ``initialize``."""

    def __init__(self, message: str, *, returncode: int | None = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.returncode = returncode


class InitializeTimeoutError(ChildStartError):
    """The child did not answer ``initialize`` in time."""


class InitializeFailedError(ChildStartError):
    """The child answered ``initialize`` with an error or an unsupported protocol version."""


class SelfEntryError(ChildStartError):
    """The child answered ``initialize`` as the copilot itself: a server list holds the copilot's own entry."""


class RemoteConnectError(ChildStartError):
    """A remote (``url``) server could not be reached or answered with an HTTP error."""


def error_summary(message: str, server: str) -> str:
    """A child error's first line without the stderr tail and the ``server 'x':`` prefix: what a
    summary row or a route answer shows beside the server's name."""
    line = message.strip().splitlines()[0] if message.strip() else ""
    for marker in (" Last stderr lines:", " It wrote nothing to stderr."):
        line = line.split(marker, 1)[0]
    prefix = f"server '{server}'"
    if line.startswith(prefix):
        line = line[len(prefix) :].lstrip(":").strip()
    return line


def format_tail(lines: list[str]) -> str:
    if not lines:
        return " It wrote nothing to stderr."
    return " Last stderr lines:\n  " + "\n  ".join(lines)


def connection_lost(error: MCPError, closed: anyio.Event | None) -> bool:
    """Whether ``error`` is the word that the child's transport ended, not a JSON-RPC error of its own.

    The SDK (and :mod:`index.children.direct`) fail every pending request with ``CONNECTION_CLOSED``
    (-32000) once the transport's ``closed`` event is set; -32000 is also the usual code of a
    server's own generic error, which is passed on as such (its child is alive and keeps its state).
    ``closed`` is ``None`` where no transport is known: the code alone decides.
    """
    return error.code == types.CONNECTION_CLOSED and (closed is None or closed.is_set())
