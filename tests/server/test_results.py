"""The size cap on tool results and their trajectory form (server.results)."""

from __future__ import annotations

from mcp_types import CallToolResult, ImageContent, TextContent

from server.results import cap_result, to_log_result


def _text(*texts: str, structured: object = None) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=t) for t in texts], structured_content=structured)


def test_results_under_the_cap_are_returned_unchanged() -> None:
    result = _text("small", structured={"a": 1})
    assert cap_result(result, 1000) is result


def test_text_over_the_cap_is_cut_with_a_note_saying_how_much() -> None:
    capped = cap_result(_text("a" * 1500, "b" * 1000), 2000)
    texts = [block.text for block in capped.content]
    assert texts[0] == "a" * 1500
    assert texts[1] == "b" * 500
    assert "first 2,000 of 2,500 characters" in texts[2] and "500 characters cut" in texts[2]


def test_later_text_blocks_are_dropped_and_counted() -> None:
    capped = cap_result(_text("a" * 3000, "b", "c"), 2000)
    assert [len(b.text) for b in capped.content[:-1]] == [2000]
    assert "2 later text block(s) dropped" in capped.content[-1].text


def test_binary_blocks_and_error_flag_pass_through() -> None:
    image = ImageContent(type="image", data="aGVsbG8=", mime_type="image/png")
    result = CallToolResult(content=[TextContent(type="text", text="x" * 5000), image], is_error=True)
    capped = cap_result(result, 1000)
    assert capped.is_error is True
    assert image in capped.content


def test_oversized_structured_content_is_dropped_with_a_note() -> None:
    capped = cap_result(_text("summary", structured={"rows": ["r" * 100] * 50}), 1000)
    assert capped.structured_content is None
    assert "structured content" in capped.content[-1].text
    assert capped.content[0].text == "summary"


def test_log_form_uses_wire_field_names() -> None:
    image = ImageContent(type="image", data="aGVsbG8=", mime_type="image/png")
    logged = to_log_result(CallToolResult(content=[image], structured_content={"k": 1}, is_error=False))
    assert logged.content == [{"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"}]
    assert logged.structured_content == {"k": 1} and logged.is_error is False
