"""Logging of every command line of the project: one line-safe format, and third-party loggers that
must stay quiet.

Log messages quote what children wrote (a tool's name, an initialize error, the last lines of a
crashed server's stderr): :class:`LineSafeFormatter` shows their control characters as escapes and
indents every line after a record's first, so a child can neither drive the terminal that shows the
log (an ``ESC]0;`` title, ``ESC[2J``) nor write a line that passes for one of the copilot's own.

HTTP clients log each request with its full URL at INFO (``httpx``/``httpx2``: ``HTTP Request: POST
http://user:password@host/…?access_token=…``), and the MCP SDK's client logs the endpoint it
connects to at DEBUG (``Connecting to StreamableHTTP endpoint: <url>``): URLs that carry a remote
server's ``${VAR}`` secrets or a model endpoint's credentials. Raising the level of a CLI (``-v``,
``COPILOT_LOG_LEVEL=DEBUG``) must not print them, so these loggers are held at WARNING whatever the
root level is; the project's own loggers name URLs redacted.
"""

from __future__ import annotations

import logging
import sys
from typing import IO

from index.cli.display import printable

#: Loggers held at WARNING: they print URLs with credentials, or drown a CLI's own lines.
NOISY_LOGGERS = (
    "httpx", "httpx2", "httpcore", "urllib3", "mcp.client",
    "mcp.server.lowlevel", "chromadb", "sentence_transformers",
)  # fmt: skip


def quiet_noisy_loggers(level: int | str | None = None) -> None:
    """Hold :data:`NOISY_LOGGERS` at WARNING, or at ``level`` (default: the root's) when that is higher."""
    if level is None:
        level = logging.getLogger().level
    numeric = level if isinstance(level, int) else logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        numeric = logging.WARNING
    for name in NOISY_LOGGERS:
        logging.getLogger(name).setLevel(max(logging.WARNING, numeric))


#: The record format of the command lines (the copilot's own puts the time first).
CLI_LOG_FORMAT = "%(levelname)s %(name)s: %(message)s"


class LineSafeFormatter(logging.Formatter):
    """A formatter whose records are safe to show: control characters written as escapes (``\\x1b``),
    and every line after the first indented, so none can pass for a record of its own."""

    def format(self, record: logging.LogRecord) -> str:
        first, *rest = super().format(record).split("\n")
        lines = [printable(first)]
        lines += [printable(line) if line.startswith((" ", "\t")) else "  " + printable(line) for line in rest]
        return "\n".join(lines)


def log_handler(fmt: str = CLI_LOG_FORMAT, stream: IO[str] | None = None) -> logging.Handler:
    """A handler writing line-safe records of ``fmt`` to ``stream`` (stderr)."""
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(LineSafeFormatter(fmt))
    return handler
