"""Messages of the params check and the result caps, on their own (server.execute.validation, server.execute.results,
server.execute.arguments): what each says must match what was cut or what is wrong, nothing else."""

from __future__ import annotations

import pytest
from mcp_types import CallToolResult, ImageContent, TextContent

from server.app import EXECUTE_SCHEMA
from server.execute.arguments import unknown_arguments_message
from server.errors import InvalidParamsError
from server.execute.results import CUT_META_KEY, ResultLimits, cap_result
from server.execute.validation import check_params, describe_expected


def _message(schema: dict, params: dict) -> str:
    with pytest.raises(InvalidParamsError) as caught:
        check_params("calc", "add", schema, params)
    return str(caught.value)


def test_binary_the_block_cap_dropped_is_not_reported_again_as_cut_by_the_byte_cap() -> None:
    image = ImageContent(type="image", data="A" * 5000, mime_type="image/png")
    result = CallToolResult(content=[TextContent(type="text", text="a"), TextContent(type="text", text="b"), image])
    capped = cap_result(result, ResultLimits(chars=1000, blocks=2, binary_bytes=1000))
    notes = capped.content[-1].text
    assert "1 image dropped" in notes
    assert "binary block(s)" not in notes
    assert capped.meta[CUT_META_KEY] == {"blocks": {"total": 3, "kept": 2, "dropped": {"image": 1}}}


def test_notes_standing_in_for_dropped_images_are_not_counted_or_cut_as_the_tools_text() -> None:
    image = ImageContent(type="image", data="A" * 5000, mime_type="image/png")
    result = CallToolResult(
        content=[TextContent(type="text", text="a" * 1500), image, TextContent(type="text", text="b" * 10)]
    )
    capped = cap_result(result, ResultLimits(chars=1000, blocks=100, binary_bytes=1000))
    assert capped.content[1].text == "[copilot: image (image/png) of 5,000 bytes dropped here: over the cap]"
    assert "first 1,000 of 1,510 characters" in capped.content[-1].text
    assert capped.meta[CUT_META_KEY]["text"] == {"total_chars": 1510, "kept_chars": 1000, "dropped_blocks": 1}


def test_a_tool_with_very_many_parameters_gets_a_bounded_description() -> None:
    schema = {"type": "object", "properties": {f"p{n}": {"type": "string", "description": "x" * 200} for n in range(300)}}
    text = describe_expected(schema)
    assert "p39 (string, optional)" in text and "p40 " not in text
    assert text.endswith("… and 260 more (route's answer has the full input schema)")
    assert len(text) < 10_000


def test_a_wrongly_typed_null_names_its_type_once() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}}
    message = _message(schema, {"a": True, "b": None})
    assert "- 'a' should be integer, got boolean true\n" in message
    assert "- 'b' should be string, got null\n" in message


def test_a_nested_wrapper_with_foreign_names_gets_no_nesting_hint() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    assert "nested one level too deep" not in _message(schema, {"arguments": {"z": 1}})
    assert "nested one level too deep, inside 'arguments'" in _message(schema, {"arguments": {"a": 1}})


@pytest.mark.parametrize("name", ["tool_input", "arguments", "Tool-Args", "parameters", "kwargs"])
def test_names_models_give_the_tools_arguments_point_to_params(name: str) -> None:
    message = unknown_arguments_message("execute", [name], EXECUTE_SCHEMA)
    assert message.startswith(f"execute has no argument '{name}' (did you mean 'params'?).")
