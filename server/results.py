"""Tool results on their way back to the host: the size cap, error results, log form.

A child's result passes through unchanged -- content blocks, structured content, ``isError``
-- except that text beyond the cap is cut, with a note saying what was cut and how much.
"""

from __future__ import annotations

import json
from typing import Any

from mcp_types import CallToolResult, EmbeddedResource, TextContent, TextResourceContents

from server.trajectory import ExecuteResult


def text_result(text: str, *, is_error: bool = False, structured: dict[str, Any] | None = None) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=structured, is_error=is_error
    )


def _block_text(block: Any) -> str | None:
    if isinstance(block, TextContent):
        return block.text
    if isinstance(block, EmbeddedResource) and isinstance(block.resource, TextResourceContents):
        return block.resource.text
    return None


def _with_text(block: Any, text: str) -> Any:
    if isinstance(block, TextContent):
        return block.model_copy(update={"text": text})
    resource = block.resource.model_copy(update={"text": text})
    return block.model_copy(update={"resource": resource})


def cap_result(result: CallToolResult, max_chars: int) -> CallToolResult:
    """``result`` with at most ``max_chars`` characters of text, plus a note when something was cut.

    Text blocks (and embedded text resources) share the budget in order: the block that
    crosses it is cut, later ones are dropped. Structured content larger than the cap is
    dropped -- its text rendering, cut as above, is still there. Binary blocks pass unchanged.
    """
    total = sum(len(t) for t in (_block_text(b) for b in result.content) if t is not None)
    structured_size = 0
    if result.structured_content is not None:
        structured_size = len(json.dumps(result.structured_content, ensure_ascii=False, default=str))
    if total <= max_chars and structured_size <= max_chars:
        return result

    notes: list[str] = []
    content: list[Any] = list(result.content)
    if total > max_chars:
        budget = max_chars
        content = []
        dropped_blocks = 0
        for block in result.content:
            text = _block_text(block)
            if text is None:
                content.append(block)
            elif budget <= 0:
                dropped_blocks += 1
            elif len(text) <= budget:
                content.append(block)
                budget -= len(text)
            else:
                content.append(_with_text(block, text[:budget]))
                budget = 0
        cut = total - max_chars
        note = (
            f"[copilot: result cut to the first {max_chars:,} of {total:,} characters of text ({cut:,} characters cut"
        )
        if dropped_blocks:
            note += f", {dropped_blocks} later text block(s) dropped"
        note += "). If you need the rest, call the tool again asking for less (a filter, a page, a smaller range).]"
        notes.append(note)
    structured = result.structured_content
    if structured_size > max_chars:
        structured = None
        notes.append(
            f"[copilot: structured content of {structured_size:,} characters dropped (over the "
            f"{max_chars:,}-character cap); the text above carries the result.]"
        )
    content.append(TextContent(type="text", text="\n".join(notes)))
    return result.model_copy(update={"content": content, "structured_content": structured})


def to_log_result(result: CallToolResult) -> ExecuteResult:
    """The trajectory's form of a result (wire field names inside content blocks)."""
    return ExecuteResult(
        content=[block.model_dump(mode="json", by_alias=True, exclude_none=True) for block in result.content],
        structured_content=result.structured_content,
        is_error=bool(result.is_error),
    )
