"""Logging of every command line of the project: third-party loggers that must stay quiet.

HTTP clients log each request with its full URL at INFO (``httpx``/``httpx2``: ``HTTP Request: POST
http://user:password@host/…?access_token=…``), and the MCP SDK's client logs the endpoint it
connects to at DEBUG (``Connecting to StreamableHTTP endpoint: <url>``): URLs that carry a remote
server's ``${VAR}`` secrets or a model endpoint's credentials. Raising the level of a CLI (``-v``,
``COPILOT_LOG_LEVEL=DEBUG``) must not print them, so these loggers are held at WARNING whatever the
root level is; the project's own loggers name URLs redacted.
"""

from __future__ import annotations

import logging

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
