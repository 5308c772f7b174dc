"""What a stdio child may send and how long it gets to leave: numbers the pool's settings default
to, in a module that imports nothing (``server.pool.settings`` reads them, so a misspelt setting
is reported before the MCP SDK is imported: 0.6 s instead of 2 s here)."""

from __future__ import annotations

#: Largest single JSON-RPC message accepted from a stdio child. Longer lines are dropped (a pending
#: request gets an error naming the limit) so a child flooding stdout cannot exhaust memory.
DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024
#: Seconds a child gets to exit by itself after its stdin closes, before SIGTERM to its group.
DEFAULT_SHUTDOWN_GRACE = 2.0
#: A child's stderr log is rotated to ``<name>.1`` when it is larger than this at start.
MAX_STDERR_LOG_BYTES = 5 * 1024 * 1024
