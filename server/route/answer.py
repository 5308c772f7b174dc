"""What ``route`` returns: the structured answer (``RouteAnswer``) and its readable text."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field

from index.search.model_loading import LEXICAL_MODES
from index.search.providers import InputLink
from server.bounded import shown_name

#: Longest tool description shown in route's text (the structured answer keeps it whole).
MAX_DESCRIPTION_CHARS = 2000
#: Longest query echoed back: a pasted document echoed whole would flood the model's context.
MAX_ECHO_CHARS = 200


class RoutedTool(BaseModel):
    server: str = Field(description="Pass as execute's server_name.")
    tool: str = Field(description="Pass as execute's tool_name (for a prompt or resource: its name on its server).")
    kind: str = Field(default="tool", description="tool, prompt, resource or resource_template.")
    direct_name: str | None = Field(
        default=None,
        description="A tool: the name it is listed under in this server's tools/list (call it directly); "
        "a prompt: its name for prompts/get.",
    )
    uri: str | None = Field(default=None, description="A resource (template): its URI for resources/read.")
    title: str | None = None
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=dict, description="JSON schema execute's params must match.")
    required: list[str] = Field(default_factory=list, description="Parameters that must be given.")
    score: float = Field(description="Relevance; higher is better.")
    server_running: bool = Field(description="Whether the tool's server is already running (first call is faster).")
    server_start_failed: str | None = Field(
        default=None,
        description="Why the server's last start failed, when no start has succeeded since (it is tried again on "
        "the next call, after a short wait): prefer another server's tool.",
    )
    annotations: dict[str, Any] | None = None
    structured_output: bool = Field(
        default=False,
        description="The tool declares an output schema: its results carry structured content matching it.",
    )
    input_for: list[InputLink] = Field(
        default_factory=list,
        description="Tools in this answer that take an input this tool gives (the parameter; none when their "
        "description names this tool): call this one first.",
    )
    input_from: list[InputLink] = Field(
        default_factory=list,
        description="Tools of this server, not in this answer, that give this tool a required input (the "
        "parameter; none when its description names them): call one first rather than guessing the value.",
    )


class IndexingStatus(BaseModel):
    in_progress: bool = False
    pending_servers: list[str] = Field(default_factory=list, description="Servers being crawled and indexed now.")
    failed_servers: dict[str, str] = Field(
        default_factory=dict, description="Servers that could not be indexed, with why."
    )


def echo_query(query: str) -> str:
    """The query as route's answer repeats it: its beginning and its length when it is long."""
    return shown_name(query, MAX_ECHO_CHARS)


class RouteAnswer(BaseModel):
    query: str = Field(description=f"The query; its first {MAX_ECHO_CHARS} characters and its length when longer.")
    query_chars: int = Field(default=0, description="Length of the query as sent.")
    searched_chars: int | None = Field(
        default=None, description="Set when the query was too long: only this many leading characters were searched."
    )
    tools: list[RoutedTool] = Field(default_factory=list)
    indexing: IndexingStatus = Field(default_factory=IndexingStatus)
    note: str | None = None
    #: "hybrid"; "lexical-startup" while the embedding model is still loading, "lexical-fallback"
    #: when it failed to load (keyword matching only, and only tools sharing a word with the query).
    ranking: str = "hybrid"
    model_error: str | None = Field(default=None, description="Why the embedding model failed to load (lexical-fallback).")
    model_retry_seconds: int | None = Field(
        default=None, description="When a search may next retry loading the embedding model (lexical-fallback)."
    )
    #: True when even the best tool matched poorly: the pool may have no tool for this (in a
    #: keyword-only answer: only common words matched, so these tools are probably not it).
    weak_match: bool = False
    related_servers: list[str] = Field(default_factory=list, description="Servers closest to the query (weak matches).")
    related_categories: list[str] = Field(default_factory=list)
    omitted: int = Field(default=0, description="Hits left out because they scored far below the best one.")
    operations: list[str] = Field(
        default_factory=list, description="The operations the query listed, each searched on its own as well."
    )
    operations_listed: int = Field(
        default=0, description="How many operations the query listed (only the first few are searched on their own)."
    )
    session_servers: list[str] = Field(
        default_factory=list,
        description="Servers this session ran a tool of without error, most recent first: their tools ranked "
        "a little higher.",
    )


def _lexical_sentence(answer: RouteAnswer) -> str:
    """Why only keywords ranked these results (or found none), and what to do about it."""
    found = (
        "these results come from keyword matching only"
        if answer.tools
        else "only keyword matching ran, and no tool shares a word with this query"
    )
    if answer.ranking == "lexical-startup":
        then = (
            "if none fits, search again in a few seconds."
            if answer.tools
            else "search again in a few seconds: semantic search then also finds tools described in other words."
        )
        return f"Note: the copilot is still loading its semantic search model, so {found}; {then}"
    retry = answer.model_retry_seconds
    when = (
        "The copilot is retrying to load it in the background."
        if not retry
        else f"The copilot retries loading it on a search in about {retry} s or later."
    )
    return (
        f"Note: semantic search is unavailable because the copilot's embedding model failed to load "
        f"({answer.model_error or 'no reason given'}), so {found}. Use words a tool's name or description "
        f"would contain. {when} To fix it (whoever runs the copilot): make "
        "COPILOT_EMBEDDING_MODEL name a complete local sentence-transformers model directory, or unset it for "
        "the bundled model (then rebuild the index), or reinstall the project if the bundled model fails; "
        "the copilot's log has the details."
    )


def quality_sentences(answer: RouteAnswer) -> list[str]:
    """What the model should know about how good these results are."""
    lines = []
    if answer.searched_chars is not None:
        lines.append(
            f"Note: your query is {answer.query_chars:,} characters long; only its first {answer.searched_chars:,} "
            "were searched and the rest was ignored. Ask for one operation per query in a few words (e.g. "
            "'convert a Word document to PDF'), one route call per sub-step, not the whole task or a document."
        )
    if answer.ranking in LEXICAL_MODES:
        lines.append(_lexical_sentence(answer))
    if answer.weak_match and answer.ranking in LEXICAL_MODES:
        # Semantic search has not judged this request: the pool may well have a tool for it.
        lines.append(
            "Weak match: only words that many tools contain matched this request, so these tools are probably "
            "not what it asks for; do not call one unless its description fits."
        )
    elif answer.weak_match:
        related = ", ".join(answer.related_servers)
        categories = ", ".join(answer.related_categories)
        where = f" Closest servers: {related}" + (f" (categories: {categories})" if categories else "") + "." if related else ""
        lines.append(
            "Weak match: no tool matched this request well, so the pool may have no tool for it." + where
            + " Rephrase as one concrete operation, or do this step without a tool."
        )
    if len(answer.operations) > 1:
        searched = "; ".join(answer.operations)
        count = max(answer.operations_listed, len(answer.operations))
        which = (
            f"{count} operations; the first {len(answer.operations)} ({searched}) were each searched on their own"
            if count > len(answer.operations)
            else f"{count} operations ({searched}); each was searched on its own"
        )
        lines.append(
            f"Your query lists {which} and the tools fitting any of them are ranked together. One route call per "
            "operation gives sharper results."
        )
    if answer.omitted:
        lines.append(f"({answer.omitted} more result(s) scored far below these and were left out.)")
    return lines


def indexing_sentence(status: IndexingStatus) -> str:
    if not status.in_progress:
        return ""
    if not status.pending_servers:
        return (
            "Note: the copilot is comparing its servers with the tool index (it has just started, or the servers "
            "file changed); tools of new or changed servers may not be searchable yet. Search again in a minute if "
            "nothing here fits."
        )
    pending = ", ".join(status.pending_servers[:10])
    more = f" and {len(status.pending_servers) - 10} more" if len(status.pending_servers) > 10 else ""
    return (
        f"Note: background indexing of {len(status.pending_servers)} new or changed server(s) is in progress "
        f"({pending}{more}); their tools are not searchable yet, so results may be incomplete. "
        "Search again in a minute if nothing here fits."
    )


def _schema_text(schema: dict[str, Any]) -> str:
    return json.dumps(schema, ensure_ascii=False, separators=(",", ":"))


def _needs_text(needs: list[InputLink]) -> str:
    return "; ".join(
        f"{need.tool} (its {need.parameter})" if need.parameter else f"{need.tool} (its description names this tool)"
        for need in needs
    )


def _sources_text(sources: list[InputLink]) -> str:
    return "; ".join(
        f"{source.tool} (gives its {source.parameter})" if source.parameter else f"{source.tool} (named in its description)"
        for source in sources
    )


def _other_kind_lines(rank: int, item: RoutedTool) -> list[str]:
    """A prompt or resource hit: what it is and how a host gets it."""
    kind = item.kind.replace("_", " ")
    lines = [f"{rank}. {kind}: {item.tool}  server: {item.server}  (score {item.score:.3f})"]
    description = item.description.strip() or "(no description)"
    lines.append(f"   {description[:MAX_DESCRIPTION_CHARS]}".replace("\n", "\n   "))
    if item.kind == "prompt":
        lines.append(f"   arguments: {', '.join(item.input_schema.get('properties', {})) or '(none)'}")
        lines.append(f"   get it with prompts/get, name: {item.direct_name or item.tool}")
    elif item.kind == "resource_template":
        lines.append(f"   read it with resources/read after filling in the URI template: {item.uri}")
    else:
        lines.append(f"   read it with resources/read, uri: {item.uri}")
    return lines


def render_route(answer: RouteAnswer) -> str:
    lines: list[str] = []
    status_line = indexing_sentence(answer.indexing)
    if not answer.tools:
        lines.append(f'No tools found for "{answer.query}".')
        if answer.note:
            lines.append(answer.note)
        lines.extend(quality_sentences(answer))
        if status_line:
            lines.append(status_line)
        return "\n".join(lines)

    noun = "tool(s)" if all(t.kind == "tool" for t in answer.tools) else "result(s)"
    lines.append(f'Top {len(answer.tools)} {noun} for "{answer.query}":')
    if status_line:
        lines.append(status_line)
    if answer.note:
        lines.append(answer.note)
    lines.extend(quality_sentences(answer))
    for rank, tool in enumerate(answer.tools, 1):
        state = "server running" if tool.server_running else "server starts on first call"
        if tool.server_start_failed is not None:
            state = f"its server failed to start last time: {tool.server_start_failed}"
        lines.append("")
        if tool.kind != "tool":
            lines.extend(_other_kind_lines(rank, tool))
            continue
        lines.append(f"{rank}. server: {tool.server}  tool: {tool.tool}  (score {tool.score:.3f}, {state})")
        if tool.direct_name:
            lines.append(f"   also callable directly as the tool {tool.direct_name}")
        description = tool.description.strip() or "(no description)"
        if len(description) > MAX_DESCRIPTION_CHARS:
            description = description[:MAX_DESCRIPTION_CHARS] + "…"
        lines.append(f"   {description}".replace("\n", "\n   "))
        if tool.input_for:
            lines.append(f"   call it first for: {_needs_text(tool.input_for)}")
        if tool.input_from:
            lines.append(f"   needs first (not in this answer): {_sources_text(tool.input_from)}")
        lines.append(f"   required params: {', '.join(tool.required) if tool.required else '(none)'}")
        lines.append(f"   input schema: {_schema_text(tool.input_schema)}")
        if tool.structured_output:
            lines.append("   returns structured content (the tool declares an output schema)")
    if any(tool.kind == "tool" for tool in answer.tools):
        lines.append("")
        lines.append(
            "To use one, call execute with its exact server_name and tool_name as shown above and params that "
            "match its input schema."
        )
    return "\n".join(lines)
