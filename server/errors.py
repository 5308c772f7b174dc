"""Errors the copilot reports through ``route``/``execute``; each message tells the model what to do."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from index.children.listing_limits import LISTING_CUT, MAX_TOOLS, broken_problem
from index.errors import CopilotError
from server.bounded import shown_name


class ExecuteError(CopilotError):
    """Base of errors raised while handling an ``execute`` call.

    ``kind`` is the machine-readable class written to the trajectory log (``error_kind``).
    ``quotes_child`` marks messages that quote the child (its stderr lines, a line it left
    unfinished on stdout, its own error): text it controls, scanned like its results.
    """

    kind = "execute_error"
    quotes_child = False


class UnknownServerError(ExecuteError):
    kind = "unknown_server"


class UnknownToolError(ExecuteError):
    kind = "unknown_tool"


class InvalidParamsError(ExecuteError):
    """``params`` do not match the tool's input schema (the paper's "Tool Error" class)."""

    kind = "invalid_params"


class ToolPastCapError(UnknownToolError):
    """A tool of a server whose listing was cut at the cap, and not among the tools read before it:
    unknown to the copilot, which says why (``kind`` stays ``unknown_tool``)."""


class ServerUnavailableError(ExecuteError):
    """The child could not be started (disabled, missing command, failed initialize)."""

    kind = "server_unavailable"
    quotes_child = True


def broken_tool_error(server: str, tool: str, problem: str) -> ServerUnavailableError:
    """A call to a tool left out of its server's tools for a broken definition (``problem``): the
    same words whether the pool's listing or the index's record of the crawl knows it."""
    return ServerUnavailableError(
        f"tool '{shown_name(tool)}' of server '{server}' cannot be used: its definition is broken ({problem}), "
        "so the copilot left it out of the server's tools. Use another tool (route finds alternatives); the "
        "server's author has to fix this one."
    )


def past_cap_error(server: str, tool: str, cut: str, kept: Collection[str]) -> ToolPastCapError:
    """A call to a tool not among the ``kept`` ones of a server whose listing was cut at the cap
    (``cut``: the listing's ``LISTING_CUT`` entry), with the nearest kept names."""
    from server.execute.validation import did_you_mean, suggest  # it imports this module

    name = shown_name(tool)
    return ToolPastCapError(
        f"tool '{name}' of server '{server}' cannot be used: {cut}, and '{name}' is not among them, so if the "
        f"server has it, it is past that cut.{did_you_mean(suggest(tool, kept))} Use one of the server's first "
        f"{MAX_TOOLS:,} tools or another server's (route finds alternatives); to reach this one, the server has "
        "to list fewer tools (its author or its configuration)."
    )


def skipped_tool_error(
    server: str, tool: str, skipped: Mapping[str, str], kept: Collection[str]
) -> ServerUnavailableError | ToolPastCapError | None:
    """Why a call to ``tool`` is refused by what ``server``'s listing left out (``skipped``: name ->
    why; ``kept``: the names it kept), or None: a broken definition, or a cut at the cap it is past."""
    if (problem := broken_problem(skipped, tool)) is not None:
        return broken_tool_error(server, tool, problem)
    if (cut := skipped.get(LISTING_CUT)) is not None and tool not in kept:
        return past_cap_error(server, tool, cut, kept)
    return None


class ChildCrashedError(ExecuteError):
    """The child exited or broke its stdio stream during a call; it restarts on the next call."""

    kind = "child_crashed"
    quotes_child = True


class ChildTimeoutError(ExecuteError):
    """A call took longer than its timeout; the child is restarted on the next call."""

    kind = "timeout"
    quotes_child = True


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
