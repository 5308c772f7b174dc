"""Params checks and "did you mean" suggestions (server.execute.validation)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from server.errors import InvalidParamsError
from server.execute.validation import (
    MAX_PARAMS_DEPTH,
    check_params,
    coerce_params,
    describe_expected,
    describe_type,
    find_problems,
    suggest,
)

ADD_SCHEMA = {
    "type": "object",
    "properties": {
        "a": {"type": "integer", "description": "First number."},
        "b": {"type": "integer"},
        "mode": {"enum": ["fast", "exact"]},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["a", "b"],
}


def _message(schema: dict, params: dict) -> str:
    with pytest.raises(InvalidParamsError) as caught:
        check_params("calc", "add", schema, params)
    return str(caught.value)


def test_valid_params_pass() -> None:
    check_params("calc", "add", ADD_SCHEMA, {"a": 1, "b": 2, "mode": "fast", "tags": ["x"]})
    assert find_problems(ADD_SCHEMA, {"a": 1, "b": 2}) == []


def test_missing_required_parameter_is_named_with_its_type() -> None:
    message = _message(ADD_SCHEMA, {"a": 1})
    assert "missing required parameter 'b' (integer)" in message
    assert "Invalid params for calc/add" in message


def test_unknown_parameter_suggests_the_nearest_expected_name() -> None:
    message = _message(ADD_SCHEMA, {"a": 1, "b": 2, "tag": ["x"]})
    assert "unknown parameter 'tag'. Did you mean 'tags'?" in message


def test_wrong_type_names_parameter_expected_and_given() -> None:
    message = _message(ADD_SCHEMA, {"a": "5", "b": 2})
    assert "'a' should be integer, got string \"5\"" in message


def test_nested_errors_carry_their_path() -> None:
    message = _message(ADD_SCHEMA, {"a": 1, "b": 2, "tags": ["ok", 3]})
    assert "'tags[1]' should be string, got integer 3" in message


def test_enum_violation_lists_allowed_values() -> None:
    message = _message(ADD_SCHEMA, {"a": 1, "b": 2, "mode": "slow"})
    assert '\'mode\' must be one of "fast", "exact"; got "slow"' in message


def test_message_lists_expected_parameters_with_types_and_descriptions() -> None:
    message = _message(ADD_SCHEMA, {})
    assert "Expected parameters: a (integer, required): First number.; b (integer, required)" in message
    assert 'server_name="calc", tool_name="add"' in message


def test_extra_parameters_accepted_when_schema_allows_them() -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "additionalProperties": True}
    assert find_problems(schema, {"q": "x", "anything": 1}) == []


def test_extra_parameters_are_accepted_when_additional_properties_is_a_schema_and_checked_against_it() -> None:
    # A schema object for additionalProperties declares extra names part of the contract: only their values are checked.
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "additionalProperties": {"type": "integer"}}
    assert find_problems(schema, {"q": "x", "anything": 1}) == []
    assert [p.message for p in find_problems(schema, {"q": "x", "anything": "one"})] == [
        "'anything' should be integer, got string \"one\""
    ]


def test_schema_without_properties_accepts_any_object() -> None:
    assert find_problems({"type": "object"}, {"free": "form"}) == []


def test_invalid_schema_does_not_block_the_call() -> None:
    broken = {"type": "object", "properties": {"a": {"type": "no-such-type"}}}
    assert find_problems(broken, {"a": 1}) == []


def test_defs_and_refs_are_followed() -> None:
    schema = {
        "type": "object",
        "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}},
        "properties": {"p": {"$ref": "#/$defs/Point"}},
        "required": ["p"],
    }
    problems = find_problems(schema, {"p": {}})
    assert [p.kind for p in problems] == ["missing"]
    assert "'p'" in problems[0].message and "'x' is a required property" in problems[0].message


def test_params_given_as_json_string_are_parsed() -> None:
    assert coerce_params('{"a": 1}') == {"a": 1}
    assert coerce_params(None) == {}
    assert coerce_params("  ") == {}


@pytest.mark.parametrize("bad", ["[1, 2]", "not json", 5])
def test_params_that_are_not_an_object_are_refused_clearly(bad: object) -> None:
    with pytest.raises(InvalidParamsError) as caught:
        coerce_params(bad)
    assert "'params' must be a JSON object" in str(caught.value)


def _deep(levels: int) -> object:
    value: object = 1
    for _ in range(levels):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("params", "said"),
    [
        ({"n": float("nan")}, "'params' hold NaN at 'n', which JSON cannot carry"),
        ('{"n": [1, -Infinity]}', "'params' hold -Infinity at 'n[1]', which JSON cannot carry"),
        ('{"s": "a\\ud800b"}', "'params' hold a lone UTF-16 surrogate at 's', which UTF-8 cannot carry"),
        ({"a": {"\ud800": 1}}, "'params' hold a lone UTF-16 surrogate in a name at 'a.\ud800'"),
        ({"v": _deep(MAX_PARAMS_DEPTH)}, "'params' nest deeper than the 190 levels the copilot passes on at 'v[0][0]"),
    ],
    ids=["nan", "infinity-in-a-string", "surrogate-in-a-string", "surrogate-in-a-name", "too-deep"],
)
def test_params_json_cannot_carry_to_the_child_are_refused_however_they_came(params: object, said: str) -> None:
    # Before: NaN and Infinity reached the child as null, a string's lone surrogate as "?", and a
    # string's deep nesting ran the call, whose reply the copilot then refused to read.
    with pytest.raises(InvalidParamsError) as caught:
        coerce_params(params)
    assert str(caught.value).startswith(said) and str(caught.value).endswith("; nothing was sent to the tool.")
    assert coerce_params({"v": _deep(MAX_PARAMS_DEPTH - 1), "x": 1.5}) == {"v": _deep(MAX_PARAMS_DEPTH - 1), "x": 1.5}


def test_a_huge_value_is_not_repeated_in_full_by_the_message() -> None:
    schema = {
        "type": "object",
        "properties": {"short": {"type": "string", "maxLength": 10}, "tags": {"type": "array", "maxItems": 2}},
        "additionalProperties": False,
    }
    message = _message(schema, {"short": "x" * 2_000_000, "tags": list(range(200_000)), "k" * 500_000: 1})
    assert len(message) < 3_000
    assert "'short': \"xxxxxxxxx" in message and "… is too long" in message
    assert "'tags': [0, 1, 2, 3" in message and "… is too long" in message


def test_a_value_of_an_allowed_type_failing_inside_one_of_its_forms_is_told_what_is_wrong_there() -> None:
    schema = {
        "type": "object",
        "properties": {
            "q": {
                "oneOf": [
                    {"type": "object", "properties": {"kind": {"const": "a"}, "n": {"type": "integer"}}, "required": ["kind", "n"]},
                    {"type": "object", "properties": {"kind": {"const": "b"}, "m": {"type": "string"}}, "required": ["kind", "m"]},
                ]
            },
            "x": {"oneOf": [{"type": "number"}, {"type": "integer"}]},
            "y": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
        },
    }
    assert "- 'q': 'n' is a required property" in _message(schema, {"q": {"kind": "a"}})  # was "should be object, got object"
    assert "'x' matches more than one of the forms it may take (number or integer), got integer 5" in _message(schema, {"x": 5})
    assert "'y' should be string or integer, got boolean true" in _message(schema, {"y": True})  # its type is what is wrong


def test_the_first_ten_problems_are_listed_and_the_rest_only_counted() -> None:
    names = [f"p{n}" for n in range(12)]
    schema = {"type": "object", "properties": {name: {"type": "integer"} for name in names}, "required": names}
    message = _message(schema, {})
    listed = [line for line in message.splitlines() if line.startswith("- missing required parameter")]
    assert listed == [f"- missing required parameter 'p{n}' (integer)" for n in range(10)]
    assert "- … and 2 more problem(s): 2 missing parameter(s)" in message


def test_the_nesting_hint_needs_every_nested_name_to_be_a_parameter() -> None:
    # A wrapper holding a parameter name beside a foreign one is not certainly the arguments one level too deep.
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a"]}
    assert "nested one level too deep" not in _message(schema, {"arguments": {"a": 1, "z": 2}})
    assert "nested one level too deep, inside 'arguments'" in _message(schema, {"arguments": {"a": 1, "b": 2}})


def test_suggest_prefers_case_insensitive_exact_then_fuzzy() -> None:
    assert suggest("ECHO", ["echo", "add"]) == ["echo"]
    assert suggest("fixtur", ["fixture", "alpha", "beta"])[0] == "fixture"
    assert suggest("zzzz", ["echo", "add"]) == []
    assert suggest("", ["echo"]) == []


def test_describe_type_covers_common_shapes() -> None:
    assert describe_type({"type": "array", "items": {"type": "integer"}}) == "array of integer"
    assert describe_type({"anyOf": [{"type": "string"}, {"type": "null"}]}) == "string"
    assert describe_type({"type": ["string", "number"]}) == "string or number"
    assert describe_type(None) == "any"


def test_describe_expected_for_tool_without_parameters() -> None:
    assert describe_expected({"type": "object"}) == "no parameters"


#: Written the way older servers still write schemas: draft-04's boolean ``exclusiveMinimum``.
DRAFT4_PAGES = {
    "type": "object",
    "properties": {
        "pages": {"type": "array", "items": {"type": "integer", "minimum": 0, "exclusiveMinimum": True}},
    },
    "required": ["pages"],
    "additionalProperties": False,
}


def test_a_draft4_schema_is_validated_as_draft4_not_skipped(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="server.execute.validation"):
        assert find_problems(DRAFT4_PAGES, {"pages": [1, 2]}) == []
        problems = find_problems(DRAFT4_PAGES, {"pages": [0]})
    assert [p.path for p in problems] == ["pages[0]"], problems
    assert "less than or equal to the minimum of 0" in problems[0].message
    assert caplog.records == []


def test_a_declared_draft_wins_over_guessing() -> None:
    # In draft-07, exclusiveMinimum is a number: 0 itself is excluded, 1 passes.
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "properties": {"n": {"exclusiveMinimum": 0}}}
    assert find_problems(schema, {"n": 1}) == []
    assert [p.path for p in find_problems(schema, {"n": 0})] == ["n"]


def test_a_schema_no_draft_accepts_passes_params_and_is_reported_once(caplog: pytest.LogCaptureFixture) -> None:
    broken = {"type": "object", "properties": {"x": {"type": "no-such-type"}}, "title": "broken-for-test"}
    with caplog.at_level("WARNING", logger="server.execute.validation"):
        for _ in range(3):
            assert find_problems(broken, {"x": 1}) == []
    warnings = [r for r in caplog.records if "fits no JSON Schema draft" in r.getMessage()]
    assert len(warnings) == 1, [r.getMessage() for r in caplog.records]


def test_the_schemas_held_for_quick_lookup_are_bounded_by_size(monkeypatch) -> None:  # noqa: ANN001
    # Every restart of a child lists its tools afresh: new schema objects, each held by the lookup
    # by identity until 4,096 of them (a crashing server's 88 KB schema: ~440 MB, never given back).
    import server.execute.validation as validation  # noqa: PLC0415

    monkeypatch.setattr(validation, "_BY_IDENTITY", type(validation._BY_IDENTITY)())
    monkeypatch.setattr(validation, "_by_identity_chars", 0)
    monkeypatch.setattr(validation, "_BY_IDENTITY_CHARS", 50_000)

    def listing() -> dict:  # what each restart's tools/list gives: equal content, a new object
        return {"type": "object", "properties": {f"p{n}": {"type": "string", "description": "x" * 80} for n in range(100)}}

    kept = [listing() for _ in range(40)]  # (kept alive, as a live tool list keeps its schemas)
    validators = {id(validation.validator_for_schema(schema)) for schema in kept}
    assert len(validators) == 1  # one validator for the one content
    assert validation._by_identity_chars <= 50_000 and len(validation._BY_IDENTITY) < 40
    # The most recently used stay: the last schema is found by identity.
    assert validation._BY_IDENTITY[id(kept[-1])][0] is kept[-1]


def test_a_ref_outside_the_schema_is_never_fetched_and_the_params_pass_unchecked(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # jsonschema's default fetched any URL a child's schema named, on the event loop with no timeout.
    asked: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            asked.append(self.path)
            body = b'{"type": "integer"}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    local = tmp_path / "schema.json"
    local.write_text('{"type": "integer"}')
    try:
        for ref in (f"http://127.0.0.1:{server.server_address[1]}/schema.json", local.as_uri()):
            schema = {"type": "object", "properties": {"n": {"$ref": ref}}, "title": ref}
            with caplog.at_level("WARNING"):
                assert find_problems(schema, {"n": "not an integer"}) == []
            assert f"its input schema's $ref '{ref}' is outside the schema" in caplog.text
            assert "Traceback" not in caplog.text
    finally:
        server.shutdown()
        server.server_close()
    assert asked == []
    # A $ref within the schema, and to a draft's metaschema, still resolve.
    inner = {"type": "object", "properties": {"n": {"$ref": "#/$defs/count"}}, "$defs": {"count": {"type": "integer"}}}
    assert [p.message for p in find_problems(inner, {"n": "x"})] == ["'n' should be integer, got string \"x\""]
    meta = {"type": "object", "properties": {"s": {"$ref": "https://json-schema.org/draft/2020-12/schema"}}}
    assert find_problems(meta, {"s": {"type": "string"}}) == [] and find_problems(meta, {"s": {"type": 5}})
