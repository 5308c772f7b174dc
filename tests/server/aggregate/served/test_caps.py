"""A rendered prompt's and a read resource's fields beside their messages and contents, within the
caps (server.aggregate.caps): its ``_meta`` and a prompt's description."""

from __future__ import annotations

import mcp.types as types

from server.aggregate.caps import cap_prompt, cap_resource
from server.execute.results import CUT_META_KEY, FIELD_CHARS, ResultLimits


def _message(text: str) -> types.PromptMessage:
    return types.PromptMessage(role="user", content=types.TextContent(type="text", text=text))


def test_a_prompts_and_a_resources_meta_over_the_cap_is_dropped_saying_so() -> None:
    # Before: a child's 3 MB _meta reached the host whole here, while execute dropped it.
    limits = ResultLimits(chars=10_000)
    prompt = types.GetPromptResult(messages=[_message("hi")], _meta={"k": "m" * 20_000})
    capped = cap_prompt(prompt, limits)
    assert "k" not in capped.meta and capped.meta[CUT_META_KEY]["meta"]["dropped"]
    assert "_meta (20,008 characters of JSON" in capped.messages[-1].content.text
    read = types.ReadResourceResult(
        contents=[types.TextResourceContents(uri="note://1", text="body")], _meta={"k": "m" * 20_000}
    )
    capped_read = cap_resource(read, limits, "copilot://notes/note://1")
    assert "k" not in capped_read.meta and capped_read.contents[0].text == "body"
    honest = types.GetPromptResult(messages=[_message("hi")], _meta={"k": "small"})
    assert cap_prompt(honest, limits) is honest


def test_a_prompts_description_is_cut_at_the_field_cap() -> None:
    # Before: 3 MB of description passed, and padded to the scan's budget it hid the messages' instructions.
    prompt = types.GetPromptResult(description="d" * (FIELD_CHARS + 100), messages=[_message("hi")])
    capped = cap_prompt(prompt, ResultLimits())
    assert capped.description == "d" * FIELD_CHARS + "…"
    assert capped.meta[CUT_META_KEY]["description"] == {"total_chars": FIELD_CHARS + 100, "kept_chars": FIELD_CHARS}
    assert [m.content.text for m in capped.messages] == ["hi"]
