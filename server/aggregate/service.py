"""The copilot as an aggregating proxy: children's tools, prompts and resources, served to hosts.

:class:`Aggregation` is created with the MCP server (``server.app.build_app``) and installed on
it: it serves ``tools/list`` and ``tools/call`` (``route``/``execute`` plus the exposed child
tools of ``COPILOT_EXPOSE``), ``prompts/list``, ``prompts/get``, ``resources/list``,
``resources/templates/list``, ``resources/read`` and ``completion/complete`` under namespaced
names (:mod:`server.aggregate.names`), paginated, with the allow/deny lists in force; it
advertises exactly those capabilities; and it tells hosts when its lists change, in both protocol
eras (:mod:`server.aggregate.notify`). Its :meth:`running` context lives inside the copilot's and
keeps the index current as children change (:mod:`server.aggregate.live`).

Mistakes get protocol errors a client can act on: an unknown tool or prompt name and a bad
cursor are ``-32602`` (with the nearest names), an unknown resource ``-32002`` (with the nearest
URI), also when it is the child that says it has no such resource; a child's other errors are
passed on with their codes.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import AsyncIterator, Callable, Hashable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp.types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.mcpserver import MCPServer
from mcp.server.subscriptions import InMemorySubscriptionBus
from mcp.shared.exceptions import MCPError
from mcp.shared.uri_template import UriTemplate
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS
from pydantic_core import to_json

from index.errors import CopilotError
from index.catalog.records import ToolRecord
from index.cli.display import printable
from index.trust.scan import Finding, scan_result_text
from server.aggregate.caps import cap_prompt, cap_resource
from server.aggregate.catalog import ChildCatalog
from server.aggregate.exposure import Exposure
from server.aggregate.live import Change, LiveUpdater
from server.aggregate.names import NameTable, parse_resource_uri
from server.aggregate.notify import Broadcaster
from server.aggregate.pages import page
from server.aggregate.subscriptions import ResourceSubscriptions
from server.settings import ServerSettings
from server.execute.validation import did_you_mean, suggest
from server.bounded import cut_text, shown_name
from server.guard import prompt_findings, resource_findings, warning_text

logger = logging.getLogger(__name__)

#: Values one completion may hold (the spec: "must not exceed 100 items").
MAX_COMPLETION_VALUES = 100

#: The copilot's own tools (never handed out as names of child tools).
META_TOOLS = frozenset({"route", "execute", "execute-tool"})
#: JSON-RPC code of "resource not found" (MCP 2025-11-25, resources).
RESOURCE_NOT_FOUND = -32002
#: What children answer ``resources/read`` of a URI they do not have: the spec's code, or -32602
#: (invalid params) saying so, as the Python SDK's servers do ("Unknown resource: …"); any other
#: -32602 (a template argument the child refused, say) stays the child's own error.
_NOT_FOUND_MESSAGE = re.compile(r"unknown resource|resource not found|not found", re.IGNORECASE)


def _says_not_found(error: MCPError) -> bool:
    return error.code == RESOURCE_NOT_FOUND or (
        error.code == INVALID_PARAMS and _NOT_FOUND_MESSAGE.search(error.message or "") is not None
    )
#: ``ttlMs`` of list results for 2026-07-28 clients: listed child items change with the children,
#: and in ``meta`` mode ``route``'s description changes with the pool (the servers file, the
#: index), so neither is cached long (meta was cached 300 s: a client without a listen stream
#: showed a removed server in route's description for five minutes).
_TTL_CHILDREN_MS = 60_000
#: Flagged texts remembered as warned about, at most (then the memory starts again).
_MAX_WARNED = 10_000

SessionKey = Callable[[ServerRequestContext[Any, Any]], tuple[Hashable, Any]]


#: Characters of a child's error message (or its ``data``'s JSON) passed on to the host.
MAX_CHILD_ERROR_CHARS = 2_000


def child_words(text: str, server: str, what: str) -> str:
    """A child's error text as the host gets it: cut to :data:`MAX_CHILD_ERROR_CHARS`, and logged
    when it looks like instructions for the model (it reaches the model as surely as a result)."""
    text = cut_text(text, MAX_CHILD_ERROR_CHARS)
    if findings := scan_result_text(text):
        logger.warning(
            "server '%s': its error for %s looks like instructions for the model: %s",
            printable(server), what, printable(findings[0].line()),
        )
    return text


def _child_error(error: MCPError, what: str, server: str) -> MCPError:
    """A child's JSON-RPC error, passed on with its code (a non-standard code 0 counts as invalid params)."""
    code = error.code if error.code not in (0, None) else INVALID_PARAMS
    data = error.data if len(to_json(error.data)) <= MAX_CHILD_ERROR_CHARS else None
    message = child_words(error.message or "", server, what)
    return MCPError(code, f"server '{server}' answered {what} with an error: {message}", data)


def _copilot_error(error: Exception, what: str) -> MCPError:
    """A copilot-side failure (child did not start, crashed, timed out) as a protocol error."""
    return MCPError(INTERNAL_ERROR, f"{what} failed: {error}")


class Aggregation:
    """See the module docstring. ``session_key(ctx)`` gives a request's (session key, connection)."""

    def __init__(self, settings: ServerSettings, session_key: SessionKey) -> None:
        self.settings = settings
        self._session_key = session_key
        self.bus = InMemorySubscriptionBus()
        self.broadcaster = Broadcaster(self.bus)
        self.names = NameTable(reserved=META_TOOLS)
        self.copilot: Any = None
        self.catalog: ChildCatalog | None = None
        self.exposure: Exposure | None = None
        self.live: LiveUpdater | None = None
        self.subscriptions: ResourceSubscriptions | None = None
        self._app: MCPServer[Any] | None = None
        #: Flagged prompt and resource texts already warned about (a host may get one on every turn).
        self._warned: set[tuple[str, str, str, str]] = set()

    # -- life cycle -----------------------------------------------------------------------------
    @asynccontextmanager
    async def running(self, copilot: Any) -> AsyncIterator[Aggregation]:
        """Serve ``copilot``'s children; re-index changed servers in the background meanwhile."""
        self.copilot = copilot
        self.catalog = ChildCatalog(
            copilot.index,
            self.names,
            routable_servers=copilot.routable_servers,
            allowed=copilot.policy.tool_allowed,
            # Tools the trust guard holds back (changed since approved, quarantined) are not exposed.
            tool_usable=lambda server, tool: getattr(copilot, "guard", None) is None
            or copilot.guard.blocked(server, tool) is None,
            # Prompts and resource templates held back by their pins, and prompts and resources whose
            # definitions carry instructions, are withheld likewise.
            item_usable=lambda record: self._withheld(record) is None,
            unprefixed=self.settings.expose_unprefixed,
        )
        self.exposure = Exposure(self.settings.expose, self.catalog, max_tools=self.settings.expose_max_tools)
        guard = getattr(copilot, "guard", None)
        self.live = LiveUpdater(
            copilot.index,
            copilot.pool,
            lambda: copilot.servers,
            self._index_changed,
            review_items=guard.review_items if guard is not None else None,
        )
        copilot.pool.subscribe(self.live)
        # Records the copilot rewrites itself (approved definitions) reach hosts as the live updater's do.
        copilot.index_change_listeners.append(self._index_changed)
        async with anyio.create_task_group() as group:
            self.subscriptions = ResourceSubscriptions(copilot.pool.request, self.broadcaster, group)
            copilot.pool.subscribe(self.subscriptions)
            group.start_soon(self.live.run, name="live index updates")
            try:
                yield self
            finally:
                copilot.index_change_listeners.remove(self._index_changed)
                group.cancel_scope.cancel()

    async def _index_changed(self, server: str, changes: set[Change]) -> None:
        assert self.exposure is not None
        if "tools" in changes:
            # route's description names the pool's tools: it follows (and tells hosts when it changed).
            await self.copilot.refresh_route_description(reload_index=True)
            if self.exposure.mode == "all":
                await self.broadcaster.changed("tools")
            elif self.exposure.mode == "routed" and (keys := self.exposure.sessions_with(server)):
                await self.broadcaster.changed("tools", keys)
        for kind in ("prompts", "resources"):
            if kind in changes:
                await self.broadcaster.changed(kind)  # type: ignore[arg-type]

    # -- installing on the MCP server -----------------------------------------------------------
    def install(self, app: MCPServer[Any]) -> None:
        """Take over the list/get/read methods of ``app`` and advertise what is real."""
        self._app = app
        lowlevel = app._lowlevel_server  # the SDK offers no public way to replace handlers
        lowlevel.add_request_handler("tools/list", types.PaginatedRequestParams, self._list_tools)
        lowlevel.add_request_handler("tools/call", types.CallToolRequestParams, self._call_tool)
        lowlevel.add_request_handler("prompts/list", types.PaginatedRequestParams, self._list_prompts)
        lowlevel.add_request_handler("prompts/get", types.GetPromptRequestParams, self._get_prompt)
        lowlevel.add_request_handler("resources/list", types.PaginatedRequestParams, self._list_resources)
        lowlevel.add_request_handler(
            "resources/templates/list", types.PaginatedRequestParams, self._list_resource_templates
        )
        lowlevel.add_request_handler("resources/read", types.ReadResourceRequestParams, self._read_resource)
        lowlevel.add_request_handler("completion/complete", types.CompleteRequestParams, self._complete)
        lowlevel.add_request_handler("resources/subscribe", types.SubscribeRequestParams, self._subscribe)
        lowlevel.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, self._unsubscribe)
        listen = lowlevel.get_request_handler("subscriptions/listen")
        if listen is not None:
            lowlevel.add_request_handler(
                "subscriptions/listen", types.SubscriptionsListenRequestParams, self._listening(listen.handler)
            )
        app.middleware.append(self._track_sessions)
        original = lowlevel.get_capabilities
        def capabilities(
            notification_options: NotificationOptions | None = None,
            experimental_capabilities: dict[str, dict[str, Any]] | None = None,
            extensions: dict[str, dict[str, Any]] | None = None,
            *,
            protocol_version: str | None = None,
        ) -> types.ServerCapabilities:
            # The tool list changes in every mode: route's description follows the pool (and in
            # routed/all modes the children's tools come and go).
            options = NotificationOptions(prompts_changed=True, resources_changed=True, tools_changed=True)
            result = original(options, experimental_capabilities, extensions, protocol_version=protocol_version)
            if result.tools is not None:
                result.tools.list_changed = True
            return result

        lowlevel.get_capabilities = capabilities  # type: ignore[method-assign]

    async def _track_sessions(self, ctx: ServerRequestContext[Any, Any], call_next: Callable[..., Any]) -> Any:
        result = await call_next(ctx)
        key, connection = self._session_key(ctx)
        if connection is not None:
            try:
                if not self.broadcaster.knows(key):
                    self.broadcaster.register(key, connection)
                    connection.exit_stack.callback(self._forget_session, key)
            except Exception:  # noqa: BLE001 -- bookkeeping must never fail a request
                logger.debug("could not track a session", exc_info=True)
        return result

    def _forget_session(self, key: Hashable) -> None:
        if self.exposure is not None:
            self.exposure.forget(key)
        if self.subscriptions is not None:
            self.subscriptions.forget(key)

    def _key(self, ctx: ServerRequestContext[Any, Any]) -> Hashable:
        return self._session_key(ctx)[0]

    def _ready(self) -> tuple[ChildCatalog, Exposure]:
        if self.catalog is None or self.exposure is None:
            raise MCPError(INTERNAL_ERROR, "the copilot is still starting; try again in a moment")
        return self.catalog, self.exposure

    # -- tools ----------------------------------------------------------------------------------
    async def _list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams
    ) -> types.ListToolsResult:
        assert self._app is not None
        _, exposure = self._ready()
        tools = [*await self._app.list_tools(), *await exposure.tools(self._key(ctx))]
        items, cursor = page(tools, params.cursor, self.settings.list_page_size, lambda tool: tool.name)
        ttl = {"meta": _TTL_CHILDREN_MS, "routed": 0, "all": _TTL_CHILDREN_MS}[exposure.mode]
        return types.ListToolsResult(tools=items, next_cursor=cursor, ttl_ms=ttl)

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        assert self._app is not None
        if params.name in META_TOOLS:
            return await self._app._handle_call_tool(ctx, params)
        _, exposure = self._ready()
        pair = await exposure.resolve(self._key(ctx), params.name)
        if pair is None:
            listed = [tool.name for tool in await exposure.tools(self._key(ctx))]
            hint = did_you_mean(suggest(params.name, [*META_TOOLS, *listed]))
            raise MCPError(
                INVALID_PARAMS,
                f"Unknown tool: {params.name}.{hint} This server's tools are route and execute"
                + (" and the tools in tools/list" if exposure.mode != "meta" else "")
                + "; search with route, then call execute.",
            )
        server, tool = pair
        # The same path as execute: validation, policies, confirmation, trajectory logging.
        arguments = {"server_name": server, "tool_name": tool, "params": dict(params.arguments or {})}
        as_execute = params.model_copy(update={"name": "execute", "arguments": arguments})
        # The raw params too: execute checks the argument names the request itself carries.
        raw = {**(ctx.params or {}), "name": "execute", "arguments": arguments}
        return await self._app._handle_call_tool(dataclasses.replace(ctx, params=raw), as_execute)

    def annotate_route(self, ctx: ServerRequestContext[Any, Any]) -> RouteAnnotator:
        """What ``route`` adds to its answer for this request's session (see :class:`RouteAnnotator`)."""
        return RouteAnnotator(self, self._key(ctx))

    # -- prompts --------------------------------------------------------------------------------
    async def _list_prompts(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams
    ) -> types.ListPromptsResult:
        catalog, _ = self._ready()
        prompts = [catalog.prompt(record) for record in await catalog.records({"prompt"})]
        items, cursor = page(prompts, params.cursor, self.settings.list_page_size, lambda prompt: prompt.name)
        return types.ListPromptsResult(prompts=items, next_cursor=cursor, ttl_ms=_TTL_CHILDREN_MS)

    async def _resolve_prompt(self, name: str) -> tuple[str, str]:
        catalog, _ = self._ready()
        pair = await catalog.resolve_name(name)
        if pair is None:  # names are deterministic: one listing gives out every current name
            records = await catalog.records({"prompt"})
            known = [catalog.learned_name(r.server, r.name) for r in records]
            pair = await catalog.resolve_name(name)
            if pair is None:
                hint = did_you_mean(suggest(name, known))
                raise MCPError(
                    INVALID_PARAMS, f"Unknown prompt: {name}.{hint} List the prompts with prompts/list.", {"name": name}
                )
        if not catalog.visible(*pair):
            raise MCPError(
                INVALID_PARAMS,
                f"Prompt {name} may not be used: its server is disabled or excluded by the copilot's allow/deny "
                "settings.",
                {"name": name},
            )
        records = await catalog.records({"prompt"}, visible_only=False)
        record = next((r for r in records if (r.server, r.name) == pair), None)
        if record is None:
            # The name is one of the server's tools or resources (one name table serves them all), or a
            # prompt held back for approval (never indexed): neither may reach the child as a prompt.
            raise MCPError(
                INVALID_PARAMS,
                f"Unknown prompt: {name}: {pair[0]} lists no usable prompt of that name (a new or changed one may be "
                "waiting for approval: python -m index trust). List the prompts with prompts/list.",
                {"name": name},
            )
        if why := self._withheld(record):
            raise MCPError(INVALID_PARAMS, why, {"name": name})
        return pair

    def _withheld(self, record: ToolRecord) -> str | None:
        guard = getattr(self.copilot, "guard", None)
        return guard.withheld(record) if guard is not None else None

    async def _get_prompt(
        self, ctx: ServerRequestContext[Any, Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        server, prompt = await self._resolve_prompt(params.name)
        request = types.GetPromptRequest(
            params=types.GetPromptRequestParams(name=prompt, arguments=dict(params.arguments or {}) or None)
        )
        result: types.GetPromptResult = await self._forward(ctx, server, request, types.GetPromptResult)
        findings = await prompt_findings(result)  # the whole text is scanned, then cut to the caps
        result = cap_prompt(result, self.copilot.limits)
        if (note := self._flagged(server, "prompt", prompt, findings)) is not None:
            message = types.PromptMessage(role="user", content=types.TextContent(type="text", text=note))
            result = result.model_copy(update={"messages": [message, *result.messages]})
        return result

    # -- resources ------------------------------------------------------------------------------
    async def _list_resources(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams
    ) -> types.ListResourcesResult:
        catalog, _ = self._ready()
        resources = [catalog.resource(record) for record in await catalog.records({"resource"})]
        items, cursor = page(resources, params.cursor, self.settings.list_page_size, lambda resource: str(resource.uri))
        return types.ListResourcesResult(resources=items, next_cursor=cursor, ttl_ms=_TTL_CHILDREN_MS)

    async def _list_resource_templates(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams
    ) -> types.ListResourceTemplatesResult:
        catalog, _ = self._ready()
        templates = [catalog.resource_template(record) for record in await catalog.records({"resource_template"})]
        items, cursor = page(
            templates, params.cursor, self.settings.list_page_size, lambda template: template.uri_template
        )
        return types.ListResourceTemplatesResult(resource_templates=items, next_cursor=cursor, ttl_ms=_TTL_CHILDREN_MS)

    async def _resolve_resource(self, uri: str) -> tuple[str, str, ToolRecord | None]:
        """(server, the child's URI, its record if indexed) of a URI the copilot listed, else ``-32002``."""
        catalog, _ = self._ready()
        parsed = parse_resource_uri(uri)
        # Every record, not only visible ones: a denied resource must be found to be refused.
        records = await catalog.records({"resource", "resource_template"}, visible_only=False)
        if parsed is None:  # a bare URI: only what an unprefixed server lists under its own URI
            original = uri
            candidates = [
                r for r in records if r.uri and catalog.bare(r.server) and catalog.learned_uri(r.server, r.uri) == r.uri
            ]
        else:
            server, original = parsed
            candidates = [r for r in records if r.server == server]
        candidates.sort(key=lambda r: not catalog.visible(r.server, r.name))  # a usable match first
        for record in candidates:
            if record.kind == "resource" and record.uri == original:
                return record.server, original, record
        for record in candidates:
            # A template named as listed (a completion's reference): a template with an operator
            # ("{?x,y}", "{/x*}", "{#x}") does not match its own text, so matching alone refused it.
            if record.kind == "resource_template" and record.uri == original:
                return record.server, original, record
        matching = [
            record for record in candidates
            if record.kind == "resource_template" and record.uri and _template_matches(record.uri, original)
        ]
        if matching:
            # The template itself (a completion's reference), else the most specific one: with
            # unprefixed servers another server's broad "good://{+rest}" must not take the reads of
            # "good://t/{id}" that a server listed (a usable match still first).
            matching.sort(
                key=lambda r: (not catalog.visible(r.server, r.name), r.uri != original, -len((r.uri or "").split("{", 1)[0]))
            )
            record = matching[0]
            return record.server, original, record
        if parsed is not None and catalog.visible(parsed[0], original):
            if (why := self._held_template(parsed[0], original)) is not None:
                raise MCPError(RESOURCE_NOT_FOUND, why, {"uri": uri})
            return parsed[0], original, None  # not (yet) indexed: the child decides whether it exists
        raise await self._not_found(uri)

    def _held_template(self, server: str, uri: str) -> str | None:
        """Why ``uri`` may not be read though no record has it: a resource template of ``server``
        waiting for approval matches it (held back, so never indexed), or the server waits whole."""
        guard = getattr(self.copilot, "guard", None)
        if guard is None:
            return None
        for verdict in guard.reviewer.held():
            if verdict.server != server:
                continue
            if verdict.tool == "*" or (verdict.kind == "resource_template" and _template_matches(verdict.tool, uri)):
                return verdict.message()
        return None

    async def _not_found(self, uri: str, detail: str = "") -> MCPError:
        """``-32002`` for ``uri``, naming the nearest URI (or template) the host can use, if any."""
        catalog, _ = self._ready()
        records = await catalog.records({"resource", "resource_template"})
        known = [catalog.learned_uri(r.server, r.uri) for r in records if r.uri]
        hint = did_you_mean(suggest(uri, known, limit=1))
        return MCPError(
            RESOURCE_NOT_FOUND,
            f"Resource not found: {uri}.{detail}{hint} List resources with resources/list (or templates with "
            "resources/templates/list) and pass a URI exactly as listed.",
            {"uri": uri},
        )

    async def _resource_target(self, uri: str) -> tuple[str, str]:
        """(server, the child's URI) of a resource the host may use, else ``-32002``."""
        server, original, record = await self._resolve_resource(uri)
        self._check_usable(uri, server, original, record)
        return server, original

    def _check_usable(self, uri: str, server: str, original: str, record: ToolRecord | None) -> None:
        """``-32002`` unless the resolved resource ``uri`` is one the host may use."""
        catalog, _ = self._ready()
        if not catalog.visible(server, record.name if record is not None else original):
            raise MCPError(
                RESOURCE_NOT_FOUND,
                f"Resource {uri} may not be used: its server is disabled or excluded by the copilot's allow/deny "
                "settings.",
                {"uri": uri},
            )
        if record is not None and (why := self._withheld(record)):
            raise MCPError(RESOURCE_NOT_FOUND, why, {"uri": uri})

    async def _read_resource(
        self, ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        catalog, _ = self._ready()
        uri = str(params.uri)
        server, original = await self._resource_target(uri)
        request = types.ReadResourceRequest(params=types.ReadResourceRequestParams(uri=original))
        try:
            result: types.ReadResourceResult = await self._request(ctx, server, request, types.ReadResourceResult)
        except MCPError as error:
            if _says_not_found(error):
                # The child has no such resource: the spec's code, and the host's URI, not the child's.
                said = child_words(error.message or "", server, "resources/read")
                raise await self._not_found(uri, f" Server '{server}' says: {said}") from None
            raise _child_error(error, "resources/read", server) from None
        except CopilotError as error:
            raise _copilot_error(error, f"resources/read on server '{server}'") from None

        def host(child_uri: str) -> str:  # the URI read as the host spelled it; any other as the catalog lists it
            return uri if child_uri == original else catalog.host_uri(server, child_uri)

        findings = await resource_findings(result)  # the whole text is scanned, then cut to the caps
        contents: list[Any] = [item.model_copy(update={"uri": host(str(item.uri))}) for item in result.contents]
        capped = cap_resource(types.ReadResourceResult(contents=contents, meta=result.meta), self.copilot.limits, uri)
        contents = list(capped.contents)
        if (note := self._flagged(server, "resource", original, findings)) is not None:
            contents.insert(0, types.TextResourceContents(uri=uri, mime_type="text/plain", text=note))
        return types.ReadResourceResult(contents=contents, meta=capped.meta, ttl_ms=0)

    def _flagged(self, server: str, kind: str, name: str, findings: list[Finding]) -> str | None:
        """Log and count a child's rendered prompt or resource text that carries injection markers
        (as ``execute`` flags a tool result); the note to put before it with ``COPILOT_RESULT_WARNING``."""
        if not findings:
            return None
        lines = "; ".join(finding.line() for finding in findings[:3])
        key = (kind, server, name, lines)
        if key in self._warned:  # the same text again: once at WARNING is enough for whoever reads the log
            level = logging.DEBUG
        else:
            level = logging.WARNING
            if len(self._warned) >= _MAX_WARNED:  # a child making up new texts forever costs no memory
                self._warned.clear()
            self._warned.add(key)
        logger.log(
            level, "%s '%s/%s' carries text that looks like instructions for the model: %s", kind, server, shown_name(name), lines
        )
        self.copilot.telemetry.metrics.flagged(server)
        if not self.copilot.settings.result_warning:
            return None
        return warning_text(findings, kind, f"server '{server}'")

    # -- subscriptions --------------------------------------------------------------------------
    async def _subscribe(self, ctx: ServerRequestContext[Any, Any], params: types.SubscribeRequestParams) -> types.EmptyResult:
        uri = str(params.uri)
        server, original = await self._resource_target(uri)
        assert self.subscriptions is not None
        try:
            await self.subscriptions.subscribe(self._key(ctx), uri, server, original)
        except MCPError as error:
            raise _child_error(error, "resources/subscribe", server) from None
        except CopilotError as error:
            raise _copilot_error(error, f"resources/subscribe on server '{server}'") from None
        return types.EmptyResult()

    async def _unsubscribe(
        self, ctx: ServerRequestContext[Any, Any], params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        assert self.subscriptions is not None
        await self.subscriptions.unsubscribe(self._key(ctx), str(params.uri))
        return types.EmptyResult()

    def _listening(self, inner: Callable[..., Any]) -> Callable[..., Any]:
        """Wrap the SDK's ``subscriptions/listen``: subscribe at the children for the URIs asked."""

        async def listen(ctx: ServerRequestContext[Any, Any], params: types.SubscriptionsListenRequestParams) -> Any:
            key = ("listen", object())
            subscriptions = self.subscriptions
            for uri in params.notifications.resource_subscriptions or []:
                try:
                    server, original = await self._resource_target(uri)
                    if subscriptions is not None:
                        await subscriptions.subscribe(key, uri, server, original)
                except Exception as error:  # noqa: BLE001 -- such a URI simply never fires
                    logger.info("listen stream: cannot subscribe to %s: %s", uri, error)
            try:
                return await inner(ctx, params)
            finally:
                if subscriptions is not None:
                    subscriptions.forget(key)

        return listen

    # -- completion -----------------------------------------------------------------------------
    async def _complete(
        self, ctx: ServerRequestContext[Any, Any], params: types.CompleteRequestParams
    ) -> types.CompleteResult:
        ref = params.ref
        if isinstance(ref, types.PromptReference):
            server, prompt = await self._resolve_prompt(ref.name)
            child_ref: types.PromptReference | types.ResourceTemplateReference = ref.model_copy(update={"name": prompt})
        else:
            server, original, record = await self._resolve_resource(str(ref.uri))
            if record is None or record.kind != "resource_template":
                # Completion is for a listed template's arguments: any other URI is the child's to
                # interpret, and none it never listed (nor one held back) may reach it.
                raise MCPError(
                    INVALID_PARAMS,
                    f"Unknown resource template: {ref.uri}. Complete the arguments of a template exactly as "
                    "resources/templates/list lists it.",
                    {"uri": str(ref.uri)},
                )
            self._check_usable(str(ref.uri), server, original, record)
            child_ref = ref.model_copy(update={"uri": original})
        capabilities = self.copilot.pool.capabilities(server)
        if capabilities is not None and capabilities.completions is None:
            return types.CompleteResult(completion=types.Completion(values=[]))
        # Fresh params: the host's _meta (its progress token) is not the child's to see.
        request = types.CompleteRequest(
            params=types.CompleteRequestParams(ref=child_ref, argument=params.argument, context=params.context)
        )
        result: types.CompleteResult = await self._forward(ctx, server, request, types.CompleteResult)
        return _within_completion_limit(result, server)

    # -- forwarding -----------------------------------------------------------------------------
    async def _request(
        self, ctx: ServerRequestContext[Any, Any], server: str, request: Any, result_type: type[Any]
    ) -> Any:
        """The host's ``request`` sent to ``server``'s child, relayed as ``execute`` relays a call: the
        wait for the child's start reported as progress, then the child's own progress, log messages
        and questions (a 2025-11-25 host answers them) passed to this host; what the relay held back
        goes before the answer.

        The child session's ``get_prompt``/``read_resource``/``complete`` take no progress callback, so
        the request is sent as they would send it. Before, a child's progress for a host's token was
        dropped, and its questions refused (it could not be told whose they were).
        """
        hub = self.copilot.relay
        relay = hub.call(server, hub.host(ctx))

        def operation(session: Any) -> Any:
            return session.send_request(request, result_type, progress_callback=relay.progress)

        try:
            result = await self.copilot.pool.request(server, request.method, operation, relay=relay)
        except Exception:
            await relay.finish()
            raise
        await relay.finish()
        return result

    async def _forward(
        self, ctx: ServerRequestContext[Any, Any], server: str, request: Any, result_type: type[Any]
    ) -> Any:
        """:meth:`_request`, with the child's and the copilot's failures as protocol errors."""
        try:
            return await self._request(ctx, server, request, result_type)
        except MCPError as error:
            raise _child_error(error, request.method, server) from None
        except CopilotError as error:
            raise _copilot_error(error, f"{request.method} on server '{server}'") from None

def _within_completion_limit(result: types.CompleteResult, server: str) -> types.CompleteResult:
    """A child's completion held to the spec's :data:`MAX_COMPLETION_VALUES` values: the first ones,
    with ``hasMore`` and a ``total`` that counts them all."""
    completion = result.completion
    if len(completion.values) <= MAX_COMPLETION_VALUES:
        return result
    logger.info(
        "server '%s' offered %d completion values; passing the first %d", server, len(completion.values), MAX_COMPLETION_VALUES
    )
    total = max(completion.total or 0, len(completion.values))
    cut = completion.model_copy(update={"values": completion.values[:MAX_COMPLETION_VALUES], "total": total, "has_more": True})
    return result.model_copy(update={"completion": cut})


def _template_matches(template: str, uri: str) -> bool:
    try:
        return UriTemplate.parse(template).match(uri) is not None
    except Exception:  # noqa: BLE001 -- a malformed template of a child matches nothing
        return False


class RouteAnnotator:
    """Fills in how to use each of ``route``'s hits directly, and exposes routed tools.

    ``annotate(answer)`` runs inside ``Copilot._route``; ``finish()`` after it, to send the
    session its ``tools/list_changed`` when routed mode added tools.
    """

    def __init__(self, aggregation: Aggregation, key: Hashable) -> None:
        self._aggregation = aggregation
        self._key = key
        self._changed = False

    def annotate(self, answer: Any) -> None:
        catalog, exposure = self._aggregation._ready()
        routed: list[tuple[str, str]] = []
        if any(hit.kind != "tool" or exposure.mode != "meta" for hit in answer.tools):
            catalog.ensure_current()  # once, not per hit
        for hit in answer.tools:
            if hit.kind == "tool":
                if exposure.mode != "meta":
                    hit.direct_name = catalog.learned_name(hit.server, hit.tool)
                    routed.append((hit.server, hit.tool))
            elif hit.kind == "prompt":
                hit.direct_name = catalog.learned_name(hit.server, hit.tool)
            elif hit.uri:
                hit.uri = catalog.learned_uri(hit.server, hit.uri)
        self._changed = exposure.add_routed(self._key, routed)

    async def finish(self) -> None:
        if self._changed:
            await self._aggregation.broadcaster.changed("tools", [self._key])
