"""``route``'s own arguments read as the model sent them: each wrong one is a :class:`QueryError`
saying what was expected, with an example; a ``top_k`` out of range is brought into it, with a note."""

from __future__ import annotations

from typing import Any

from index.errors import QueryError

DEFAULT_TOP_K = 5
#: Digits of an out-of-range ``top_k`` echoed in the note (``top_k=1e300`` is an int of 301 digits).
_SHOWN_DIGITS = 12


def route_query(query: Any) -> str:
    """The query text; a query that is no string, or is empty, is an error saying what to send."""
    if query is not None and not isinstance(query, str):
        raise QueryError(
            f"query must be a string describing the task, got {type(query).__name__} {str(query)[:60]!r} "
            "(e.g. 'current time in Tokyo')."
        )
    if not query:
        raise QueryError(
            "The query is empty. Describe the task in a few words (e.g. 'current time in Tokyo'), or use "
            "<tool_assistant>\\nserver: <kind of server>\\ntool: <what the tool does>\\n</tool_assistant>."
        )
    return query


def route_top_k(top_k: Any, limit: int) -> tuple[int, str | None]:
    """How many tools to return (``DEFAULT_TOP_K`` when not given), and a note when ``top_k`` was
    outside 1..``limit`` and was brought into it. Anything but an integer is an error."""
    try:
        if isinstance(top_k, bool) or (isinstance(top_k, float) and not top_k.is_integer()):
            raise ValueError(top_k)
        k = int(top_k) if top_k is not None else DEFAULT_TOP_K
    except (TypeError, ValueError, OverflowError):
        raise QueryError(f"top_k must be an integer between 1 and {limit}, got {top_k!r}.") from None
    if 1 <= k <= limit:
        return k, None
    digits = str(abs(k))
    shown = str(k) if len(digits) <= _SHOWN_DIGITS else f"{'-' if k < 0 else ''}{digits[:6]}…({len(digits)} digits)"
    used = min(max(k, 1), limit)
    return used, f"top_k={shown} is outside 1..{limit}; using {used}."


def route_server(server: Any) -> str | None:
    """The one server to search (stripped), or None to search every server."""
    if server is not None and not isinstance(server, str):
        # A list or a number used to be dropped without a word: the answer came from every server.
        raise QueryError(
            f"server must be one server's name as text, got {type(server).__name__} {str(server)[:60]!r}; "
            "leave it out to search every server."
        )
    return (server.strip() or None) if isinstance(server, str) else None
