"""Errors the copilot reports through ``route``/``execute``; each message tells the model what to do."""

from __future__ import annotations

from index.errors import CopilotError
from server.bounded import shown_name


class ExecuteError(CopilotError):
    """Base of errors raised while handling an ``execute`` call.

    ``kind`` is the machine-readable class written to the trajectory log (``error_kind``).
    """

    kind = "execute_error"


class UnknownServerError(ExecuteError):
    kind = "unknown_server"


class UnknownToolError(ExecuteError):
    kind = "unknown_tool"


class InvalidParamsError(ExecuteError):
    """``params`` do not match the tool's input schema (the paper's "Tool Error" class)."""

    kind = "invalid_params"


class ServerUnavailableError(ExecuteError):
    """The child could not be started (disabled, missing command, failed initialize)."""

    kind = "server_unavailable"


def broken_tool_error(server: str, tool: str, problem: str) -> ServerUnavailableError:
    """A call to a tool left out of its server's tools for a broken definition (``problem``): the
    same words whether the pool's listing or the index's record of the crawl knows it."""
    return ServerUnavailableError(
        f"tool '{shown_name(tool)}' of server '{server}' cannot be used: its definition is broken ({problem}), "
        "so the copilot left it out of the server's tools. Use another tool (route finds alternatives); the "
        "server's author has to fix this one."
    )


class ChildCrashedError(ExecuteError):
    """The child exited or broke its stdio stream during a call; it restarts on the next call."""

    kind = "child_crashed"


class ChildTimeoutError(ExecuteError):
    """A call took longer than its timeout; the child is restarted on the next call."""

    kind = "timeout"


class PolicyDeniedError(ExecuteError):
    """Allow/deny lists or read-only mode refuse the call."""

    kind = "policy_denied"


class ConfirmationRequiredError(ExecuteError):
    """A destructive tool needs confirmation; the message carries the confirm token."""

    kind = "confirmation_required"
    #: The token just issued for this call (``None`` when a given token was refused).
    token: str | None = None


class CallCancelledError(ExecuteError):
    """The host cancelled the call, or its client went away; the child's request was cancelled too."""

    kind = "cancelled"


class InputExpiredError(ExecuteError):
    """A 2026-07-28 host retried ``execute`` for a call that no longer waits for its answers."""

    kind = "input_expired"


class ToolBlockedError(ExecuteError):
    """The tool's definition is held back (changed since approved, new, quarantined or poisoned)."""

    kind = "tool_blocked"
