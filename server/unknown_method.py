"""A request for a method the copilot does not serve: ``Method not found``, with the nearest one it does.

JSON-RPC's -32601 and its ``data`` (the method asked for) stay as the SDK answers them; only the
message gains the nearest served method when one is close (``tools/lst`` -> ``tools/list``), so a
person reading a client's error sees the typo at once.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any

from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError

_CUTOFF = 0.75
_MAX_SUGGESTED = 100


def nearest_method(method: str, served: list[str]) -> str | None:
    """The served method ``method`` most likely misspells (case aside), else None."""
    by_folded = {name.lower(): name for name in served}
    if method.lower() in by_folded:
        return by_folded[method.lower()]
    if len(method) > _MAX_SUGGESTED:
        return None  # no misspelling of a method name: difflib on 15 MB took 2.5 s on the event loop
    close = difflib.get_close_matches(method.lower(), sorted(by_folded), n=1, cutoff=_CUTOFF)
    return by_folded[close[0]] if close else None


def unknown_method_hint(served: Callable[[], list[str]]) -> Callable[..., Any]:
    """Server middleware: a ``Method not found`` for a misspelt method names the one meant.

    ``served`` lists the request methods being served when the error happens (handlers may be
    replaced after the app is built).
    """

    async def middleware(ctx: ServerRequestContext[Any, Any], call_next: Callable[..., Any]) -> Any:
        try:
            return await call_next(ctx)
        except MCPError as error:
            if error.code != types.METHOD_NOT_FOUND or ctx.request_id is None or not isinstance(ctx.method, str):
                raise
            near = nearest_method(ctx.method, [*served(), "initialize"])
            if near is None or near == ctx.method:
                raise
            raise MCPError(
                code=types.METHOD_NOT_FOUND,
                message=f"Method not found: {ctx.method!r}; did you mean {near!r}?",
                data=error.data,
            ) from None

    return middleware
