"""The host side of one ``execute`` request: its protocol era, what it can answer, how to reach it.

A :class:`HostLink` is built per request from the SDK's request context. It hides the two eras:

- *legacy* (``initialize`` handshake, 2025-11-25 and earlier): the copilot may send requests to the
  host in the middle of the call (elicitation, sampling, roots), related to the ``execute`` request
  so streamable HTTP routes them onto that request's stream;
- *modern* (2026-07-28, per-request ``_meta`` envelope): the server may not send requests; questions
  go back as an ``input_required`` result the host answers by retrying ``execute``
  (:mod:`server.relay.suspended`).

Progress and log messages reach the host on the request's own stream in both eras; the SDK drops
progress when the host sent no ``progressToken`` and, on 2026-07-28, log messages below the level
the request opted into.
"""

from __future__ import annotations

import logging
import uuid
import warnings
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, Final, Literal, get_args

import anyio
import mcp_types as types
from mcp.server.connection import allowed_log_levels
from mcp.server.context import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.shared.jsonrpc_dispatcher import progress_token_from_params
from mcp.shared.message import ServerMessageMetadata
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from server.relay.disconnect import client_gone_event

logger = logging.getLogger(__name__)
# Logging, sampling and roots are deprecated at 2026-07-28 but are what 2025-era hosts and children speak.
warnings.filterwarnings("ignore", category=MCPDeprecationWarning, module=r"server\.relay\.")

Era = Literal["legacy", "modern"]
Ask = Literal["elicitation", "sampling", "roots"]

#: Severity order of MCP log levels (RFC 5424), lowest first.
LOG_LEVELS: Final[tuple[str, ...]] = get_args(types.LoggingLevel)
#: Where a legacy connection's ``logging/setLevel`` choice is kept (``Connection.state``).
LOG_LEVEL_STATE_KEY: Final = "mcp-copilot/log-level"


def level_rank(level: str) -> int:
    return LOG_LEVELS.index(level) if level in LOG_LEVELS else 0


#: Each kind of question a child may ask through the host: its request, and the answers to it.
_ASKS: tuple[tuple[type[Any], tuple[type[Any], ...], Ask], ...] = (
    (types.ElicitRequest, (types.ElicitResult,), "elicitation"),
    (types.CreateMessageRequest, (types.CreateMessageResult, types.CreateMessageResultWithTools), "sampling"),
    (types.ListRootsRequest, (types.ListRootsResult,), "roots"),
)


def request_kind(request: types.InputRequest) -> Ask:
    """The kind of question ``request`` asks."""
    return next((kind for asked, _, kind in _ASKS if isinstance(request, asked)), "roots")


def answer_kind(response: types.InputResponse) -> Ask:
    """The kind of question ``response`` answers."""
    return next((kind for _, answers, kind in _ASKS if isinstance(response, answers)), "sampling")


def _result_type(request: types.InputRequest) -> type[types.InputResponse]:
    if isinstance(request, types.ElicitRequest):
        return types.ElicitResult
    if isinstance(request, types.ListRootsRequest):
        return types.ListRootsResult
    params = request.params
    if params.tools or params.tool_choice is not None:
        return types.CreateMessageResultWithTools
    return types.CreateMessageResult


_CONNECTION_KEY = "mcp-copilot.connection-key"


def _connection_key(connection: Any) -> str:
    """A key for the connection that is never reused (``id()`` is, once the connection is freed)."""
    return connection.state.setdefault(_CONNECTION_KEY, uuid.uuid4().hex)


@dataclass
class HostLink:
    """One ``execute`` request's way back to its host (see the module docstring)."""

    session: ServerSession
    era: Era
    request_id: types.RequestId | None
    capabilities: types.ClientCapabilities | None
    #: Identifies the host's connection (legacy) -- calls of one host share it.
    connection_key: Hashable
    wants_progress: bool = False
    #: Lowest level forwarded to a legacy host (its ``logging/setLevel``, or the copilot's default).
    log_level: str = "warning"
    #: Levels a 2026-07-28 host opted into on this request (``io.modelcontextprotocol/logLevel``).
    modern_log_levels: frozenset[str] = frozenset()
    #: Set when the HTTP client that sent this request went away (legacy streamable HTTP).
    client_gone: anyio.Event | None = None
    client_name: str | None = None
    #: The legacy host's connection (the SDK's), for state that must end with it.
    connection: Any = None

    @classmethod
    def from_context(cls, rc: ServerRequestContext[Any, Any], default_log_level: str) -> HostLink:
        session = rc.session
        era: Era = "modern" if rc.protocol_version in MODERN_PROTOCOL_VERSIONS else "legacy"
        connection = getattr(session, "_connection", None)
        level = default_log_level
        if connection is not None and era == "legacy":
            level = connection.state.get(LOG_LEVEL_STATE_KEY, default_log_level)
        params = session.client_params
        return cls(
            session=session,
            era=era,
            request_id=rc.request_id,
            capabilities=session.client_capabilities,
            connection_key=_connection_key(connection) if connection is not None and era == "legacy" else "modern",
            wants_progress=progress_token_from_params(rc.params) is not None,
            log_level=level,
            modern_log_levels=allowed_log_levels(rc.protocol_version, rc.meta) if era == "modern" else frozenset(),
            client_gone=client_gone_event(rc.request),
            client_name=params.client_info.name if params is not None and params.client_info is not None else None,
            connection=connection if era == "legacy" else None,
        )

    # -- what the host can answer -------------------------------------------------------------
    def can_answer(self, request: types.InputRequest) -> bool:
        """Whether the host declared the capability ``request`` needs (form/url elicitation, sampling[.tools], roots)."""
        caps = self.capabilities
        if caps is None:
            return False
        if isinstance(request, types.ElicitRequest):
            elicitation = caps.elicitation
            if elicitation is None:
                return False
            if isinstance(request.params, types.ElicitRequestURLParams):
                return elicitation.url is not None
            # A bare `elicitation: {}` (before modes existed) means form support.
            return elicitation.form is not None or elicitation.url is None
        if isinstance(request, types.CreateMessageRequest):
            sampling = caps.sampling
            wants_tools = bool(request.params.tools) or request.params.tool_choice is not None
            return sampling is not None and (not wants_tools or sampling.tools is not None)
        return caps.roots is not None

    @property
    def answers_anything(self) -> bool:
        caps = self.capabilities
        return caps is not None and (caps.elicitation is not None or caps.sampling is not None or caps.roots is not None)

    @property
    def describe(self) -> str:
        return f"the MCP host{f' ({self.client_name})' if self.client_name else ''}"

    # -- messages to the host -----------------------------------------------------------------
    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        if not self.wants_progress:
            return  # this request (a round of a 2026-07-28 call) gave no progress token
        await self.session.report_progress(progress, total, message)

    def takes_log(self, level: str) -> bool:
        """Whether a log message at ``level`` reaches this host (its chosen or opted-into level)."""
        if self.era == "legacy":
            return level_rank(level) >= level_rank(self.log_level)
        return level in self.modern_log_levels

    async def log(self, level: types.LoggingLevel, data: Any, logger_name: str | None) -> None:
        if not self.takes_log(level):
            return
        try:
            await self.session.send_log_message(  # pyright: ignore[reportDeprecated]
                level, data, logger=logger_name, related_request_id=self.request_id
            )
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            logger.debug("host went away; child log message dropped")

    async def ask(self, request: types.InputRequest) -> types.InputResponse | types.ErrorData:
        """Send ``request`` to a legacy host now (related to the ``execute`` request) and return its answer."""
        try:
            return await self.session.send_request(
                request,
                _result_type(request),
                metadata=ServerMessageMetadata(related_request_id=self.request_id),
            )
        except MCPError as error:
            return error.error
        except ValidationError:
            return types.ErrorData(
                code=types.INTERNAL_ERROR,
                message=f"{self.describe} answered {request.method} with a result that is not valid MCP.",
            )
