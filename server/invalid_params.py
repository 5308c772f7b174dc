"""A request whose params break its method's schema: ``Invalid request parameters``, saying which
(or, for a request sent before ``initialize``, saying that).

The SDK answers every such request with ``-32602``, ``Invalid request parameters`` and empty
``data`` (no pydantic text on the wire): a host or a person cannot tell that ``arguments`` must be
an object, or that ``name`` is missing. The code and ``data`` stay; the message gains the first
problems, where and what (``tools/call: name: Field required``), in the words the copilot uses for
a child's replies that break the schema (:func:`index.children.raw_pages.describe_schema_error`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from index.children.raw_pages import describe_schema_error
from server.bounded import shown_name

#: The SDK's own message, kept as the start of ours.
SDK_MESSAGE = "Invalid request parameters"


def invalid_params_hint() -> Callable[..., Any]:
    """Server middleware: ``Invalid request parameters`` names the params that break the schema."""

    async def middleware(ctx: ServerRequestContext[Any, Any], call_next: Callable[..., Any]) -> Any:
        try:
            return await call_next(ctx)
        except ValidationError as error:
            if ctx.request_id is None:
                raise
            method = shown_name(ctx.method) if isinstance(ctx.method, str) else "the request"
            raise MCPError(
                code=types.INVALID_PARAMS, message=f"{SDK_MESSAGE}: {method}: {_problems(error)}", data=""
            ) from None
        except MCPError as error:
            # The SDK's gate for a request before the handshake raises the bare message too (with
            # nothing to say which params): it is the order that is wrong, not the params.
            if ctx.request_id is None or not _bare_refusal(error):
                raise
            method = shown_name(ctx.method) if isinstance(ctx.method, str) else "the request"
            raise MCPError(
                code=types.INVALID_PARAMS,
                message=f"{SDK_MESSAGE}: {method} was sent before initialize; send initialize, then "
                "notifications/initialized, then your requests",
                data="",
            ) from None

    return middleware


def _bare_refusal(error: MCPError) -> bool:
    """The SDK's refusal that names nothing: raised in the middleware chain only by its
    before-``initialize`` gate (a params error is a ``ValidationError`` there)."""
    return error.error.code == types.INVALID_PARAMS and error.error.message == SDK_MESSAGE and error.error.data == ""


def _problems(error: ValidationError) -> str:
    """The problems, located in the params (the SDK's model names and union branches left out)."""
    problems = describe_schema_error(error).split("; ")
    return "; ".join(problem.removeprefix("params.") for problem in problems)
