"""A child's ``prompts/get`` and ``resources/read`` answers within the caps ``execute`` applies.

A rendered prompt or a resource reaches the host's model as surely as a tool result, so the same
``COPILOT_MAX_RESULT_CHARS`` / ``_BLOCKS`` / ``_BYTES`` bound it (:func:`server.execute.results.cap_result`,
reused by seeing a prompt's messages and a resource's contents as content blocks). What was cut is
said in a last message (a prompt) or a last text content (a resource) and under ``_meta``
:data:`~server.execute.results.CUT_META_KEY`, with advice that fits a prompt or a resource.
"""

from __future__ import annotations

import mcp.types as types

from server.execute.results import CUT_META_KEY, FIELD_CHARS, ResultLimits, Wording, cap_result

PROMPT_WORDING = Wording(
    noun="prompt",
    fewer="Get it with arguments that ask for less if you need the rest.",
    less="If you need the rest, get the prompt again with arguments that ask for less.",
    smaller="Get it with arguments that ask for a smaller version.",
)
RESOURCE_WORDING = Wording(
    noun="resource",
    fewer="Read a narrower resource (a template filled in more narrowly) if you need the rest.",
    less="If you need the rest, read a narrower resource, or ask a tool of its server for the part you need.",
    smaller="Ask a tool of its server for a smaller version or for a file path.",
)
#: Where a block remembers its message's role while the caps see it as a content block.
_ROLE_KEY = "mcp-copilot/role"


def cap_prompt(result: types.GetPromptResult, limits: ResultLimits) -> types.GetPromptResult:
    """``result`` with its messages' content within ``limits`` (the roles kept; notes as user messages)."""
    blocks = [
        message.content.model_copy(update={"meta": {**(message.content.meta or {}), _ROLE_KEY: message.role}})
        for message in result.messages
    ]
    wrapped = types.CallToolResult(content=blocks, _meta=result.meta)
    capped = cap_result(wrapped, limits, PROMPT_WORDING)
    description = result.description
    if description is not None and len(description) > FIELD_CHARS:
        # Beside the messages a model reads it too; a block's description is held to the same length.
        description = description[:FIELD_CHARS] + "…"
    if capped is wrapped:
        if description == result.description:
            return result
        return result.model_copy(update={"description": description, "meta": _description_cut(result.meta, result)})
    messages = []
    for block in capped.content:
        meta = dict(block.meta or {})
        role = meta.pop(_ROLE_KEY, "user")  # the copilot's own notes speak as the user, as the prompt's text does
        messages.append(types.PromptMessage(role=role, content=block.model_copy(update={"meta": meta or None})))
    meta = capped.meta if description == result.description else _description_cut(capped.meta, result)
    return result.model_copy(update={"messages": messages, "description": description, "meta": meta})


def cap_resource(result: types.ReadResourceResult, limits: ResultLimits, uri: str) -> types.ReadResourceResult:
    """``result`` with its contents within ``limits``; the notes are text contents of ``uri``."""
    embedded = [types.EmbeddedResource(type="resource", resource=item) for item in result.contents]
    wrapped = types.CallToolResult(content=embedded, _meta=result.meta)
    capped = cap_result(wrapped, limits, RESOURCE_WORDING)
    if capped is wrapped:
        return result
    contents: list[types.TextResourceContents | types.BlobResourceContents] = [
        block.resource
        if isinstance(block, types.EmbeddedResource)
        else types.TextResourceContents(uri=uri, mime_type="text/plain", text=block.text)
        for block in capped.content
    ]
    # The capped result's _meta: the child's (unless over the cap) and what was cut.
    return result.model_copy(update={"contents": contents, "meta": capped.meta})


def _description_cut(base: dict | None, result: types.GetPromptResult) -> dict:
    """``base`` (the prompt's ``_meta`` as capped) also saying that its description was cut."""
    meta = dict(base or {})
    cut = dict(meta.get(CUT_META_KEY) or {})
    cut["description"] = {"total_chars": len(result.description or ""), "kept_chars": FIELD_CHARS}
    meta[CUT_META_KEY] = cut
    return meta
