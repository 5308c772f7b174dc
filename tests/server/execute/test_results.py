"""The size cap on tool results and their trajectory form (server.execute.results)."""

from __future__ import annotations

import json

from mcp_types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

from server.execute.results import CUT_META_KEY, FIELD_CHARS, ResultLimits, cap_result, to_log_result


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


def _json_size(value: object) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def test_oversized_structured_content_is_shortened_into_valid_json_with_its_keys() -> None:
    structured = {"city": "Paris", "count": 5000, "rows": [f"row {i} " + "r" * 100 for i in range(50)], "ok": True}
    capped = cap_result(_text("summary", structured=structured), 1000)
    kept = capped.structured_content
    assert kept is not None and _json_size(kept) <= 1000
    assert json.loads(json.dumps(kept)) == kept
    assert set(kept) == set(structured) and kept["city"] == "Paris" and kept["count"] == 5000 and kept["ok"] is True
    rows = kept["rows"]
    assert 0 < len(rows) < 50 and rows[:-1] == structured["rows"][: len(rows) - 1]
    assert structured["rows"][len(rows) - 1].startswith(rows[-1].rstrip("…"))
    note = capped.content[-1].text
    assert f"$.rows kept {len(kept['rows'])} of 50 items" in note and "still valid JSON" in note
    assert capped.content[0].text == "summary"
    assert capped.meta[CUT_META_KEY]["structured"]["total_chars"] == _json_size(structured)


def test_long_strings_in_structured_content_are_cut_short_ones_never() -> None:
    structured = {"id": "x" * 40, "body": "b" * 5000}
    capped = cap_result(_text("s", structured=structured), 1000)
    kept = capped.structured_content
    assert kept["id"] == "x" * 40
    assert kept["body"].startswith("bbb") and kept["body"].endswith("…") and _json_size(kept) <= 1000
    assert "$.body cut to" in capped.content[-1].text


def test_structured_content_that_cannot_be_shortened_is_dropped_with_a_note() -> None:
    capped = cap_result(_text("s", structured={"n": 10**2000}), 1000)  # one number: nothing to shorten
    assert capped.structured_content is None
    assert "dropped" in capped.content[-1].text
    many_keys = cap_result(_text("s", structured={f"k{i}": i for i in range(400)}), 1000)
    assert 0 < len(many_keys.structured_content) < 400 and "keys" in many_keys.content[-1].text


def test_blocks_beyond_the_cap_are_dropped_and_counted_by_kind() -> None:
    image = ImageContent(type="image", data="aGVsbG8=", mime_type="image/png")
    result = CallToolResult(content=[TextContent(type="text", text="t")] * 8 + [image] * 4)
    capped = cap_result(result, ResultLimits(chars=1000, blocks=5, binary_bytes=1000))
    assert capped.content[:5] == result.content[:5]
    assert len(capped.content) == 5 + 1  # the five kept, then the note
    note = capped.content[-1].text
    assert "12 content blocks" in note and "first 5" in note and "3 text" in note and "4 image" in note
    assert capped.meta[CUT_META_KEY]["blocks"] == {"total": 12, "kept": 5, "dropped": {"text": 3, "image": 4}}


def test_binary_over_the_byte_cap_is_replaced_in_place_by_a_note() -> None:
    small = ImageContent(type="image", data="a" * 100, mime_type="image/png")
    big = AudioContent(type="audio", data="b" * 5000, mime_type="audio/wav")
    blob = EmbeddedResource(
        type="resource", resource=BlobResourceContents(uri="file:///x.bin", blob="c" * 800, mime_type="application/pdf")
    )
    result = CallToolResult(content=[small, big, blob, TextContent(type="text", text="after")])
    capped = cap_result(result, ResultLimits(chars=1000, blocks=100, binary_bytes=1000))
    assert capped.content[0] is small and capped.content[2] is blob and capped.content[3].text == "after"
    assert "audio (audio/wav) of 5,000 bytes dropped here" in capped.content[1].text
    assert "1 binary block(s)" in capped.content[-1].text and "COPILOT_MAX_RESULT_BYTES" in capped.content[-1].text
    assert capped.meta[CUT_META_KEY]["binary"]["dropped"] == [{"kind": "audio", "mime_type": "audio/wav", "bytes": 5000}]


def test_the_byte_cap_is_for_the_whole_result_not_each_binary_block() -> None:
    # Each image fits the cap alone; together they do not: the first is kept, the later ones dropped.
    images = [ImageContent(type="image", data=letter * 600, mime_type="image/png") for letter in "abc"]
    capped = cap_result(CallToolResult(content=images), ResultLimits(chars=1000, blocks=100, binary_bytes=1000))
    assert capped.content[0] is images[0]
    assert [block.type for block in capped.content] == ["image", "text", "text", "text"]
    assert "2 binary block(s)" in capped.content[-1].text
    assert capped.meta[CUT_META_KEY]["binary"]["dropped"] == [{"kind": "image", "mime_type": "image/png", "bytes": 600}] * 2


def test_a_result_meta_from_the_child_is_kept_beside_the_cut_report() -> None:
    result = CallToolResult(content=[TextContent(type="text", text="x" * 50)], _meta={"child/key": 1})
    capped = cap_result(result, ResultLimits(chars=10))
    assert capped.meta["child/key"] == 1 and capped.meta[CUT_META_KEY]["text"]["kept_chars"] == 10


def test_long_fields_besides_the_payload_are_cut_or_dropped_with_a_note() -> None:
    # Before: only text, binary data and structured content were measured, so a child's 6 MB
    # description, URI, MIME type or _meta reached the host whole.
    huge = "d" * (FIELD_CHARS * 3)
    link = ResourceLink(type="resource_link", name="report", uri="file:///r.pdf", description=huge)
    bad_uri = ResourceLink(type="resource_link", name="x", uri="file:///" + huge)
    image = ImageContent(type="image", data="aGVsbG8=", mime_type="image/" + huge)
    text = TextContent(type="text", text="rows", _meta={"k": huge})
    embedded = EmbeddedResource(
        type="resource", resource=TextResourceContents(uri="note://1", text="body", _meta={"k": huge})
    )
    capped = cap_result(CallToolResult(content=[link, bad_uri, image, text, embedded]), ResultLimits())
    kept_link, uri_note, image_note, kept_text, kept_embedded, note = capped.content
    assert kept_link.description == huge[:FIELD_CHARS] + "…" and kept_link.uri == "file:///r.pdf"
    assert uri_note.text == "[copilot: a resource link with a URI of 24,008 characters dropped here]"
    assert image_note.text == "[copilot: an image with a MIME type of 24,006 characters dropped here]"
    assert kept_text.text == "rows" and kept_text.meta is None
    assert kept_embedded.resource.text == "body" and kept_embedded.resource.meta is None
    assert note.text.startswith(f"[copilot: fields of content blocks over {FIELD_CHARS:,} characters were cut: ")
    assert "block 1 description cut to" in note.text and "block 4 _meta (" in note.text
    assert capped.meta[CUT_META_KEY]["fields"]["max_chars"] == FIELD_CHARS
    assert len(capped.model_dump_json(by_alias=True)) < 10 * FIELD_CHARS


def test_a_result_meta_over_the_text_cap_is_dropped_with_a_note() -> None:
    result = CallToolResult(content=[TextContent(type="text", text="ok")], _meta={"k": "m" * 20_000})
    capped = cap_result(result, ResultLimits(chars=10_000))
    assert capped.content[0].text == "ok" and "k" not in capped.meta
    assert capped.content[-1].text == (
        "[copilot: the result's _meta (20,008 characters of JSON, over the 10,000-character cap) was dropped.]"
    )
    assert capped.meta[CUT_META_KEY]["meta"] == {"total_chars": 20_008, "dropped": True}
    honest = CallToolResult(content=[TextContent(type="text", text="ok")], _meta={"k": "m" * 9_000})
    assert cap_result(honest, ResultLimits(chars=10_000)) is honest


def test_log_form_uses_wire_field_names() -> None:
    image = ImageContent(type="image", data="aGVsbG8=", mime_type="image/png")
    logged = to_log_result(CallToolResult(content=[image], structured_content={"k": 1}, is_error=False))
    assert logged.content == [{"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"}]
    assert logged.structured_content == {"k": 1} and logged.is_error is False
