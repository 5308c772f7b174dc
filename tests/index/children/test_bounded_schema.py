"""JSON Schema checks a hostile child or host cannot make run for minutes (index.children.bounded_schema).

Each hostile case here ran for minutes to hours before (hours: the pattern and the branching grow
exponentially with the input); the timeout mark turns such a run into a failure.
"""

from __future__ import annotations

import logging

import pytest
from jsonschema import validators

from index.children.bounded_schema import bounded, canonical
from index.children.tool_listing import schema_validator_class
from server.execute.validation import find_problems

pytestmark = pytest.mark.timeout(60)

DRAFT_04 = "http://json-schema.org/draft-04/schema#"
#: Backtracks exponentially in the length of a run of "a" that ends in another character, in
#: ``re`` and in ``regex`` alike (``regex`` answers ``^(\w+\s?)*$`` at once).
CATASTROPHIC = r"^(a|aa)+$"


def test_a_catastrophic_pattern_lets_the_params_through_unchecked(caplog: pytest.LogCaptureFixture) -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string", "pattern": CATASTROPHIC}}, "title": "evil-1"}
    with caplog.at_level(logging.WARNING):
        assert find_problems(schema, {"q": "a" * 60 + "!"}) == []
    assert "params passed to the child unchecked: the pattern" in caplog.text
    # A pattern that answers in time still checks the params.
    plain = {"type": "object", "properties": {"q": {"type": "string", "pattern": "^[a-z]+$"}}}
    [problem] = find_problems(plain, {"q": "A1"})
    assert "does not match" in problem.message


def test_a_catastrophic_property_pattern_lets_the_params_through_unchecked() -> None:
    schema = {"type": "object", "patternProperties": {CATASTROPHIC: {"type": "integer"}}}
    assert find_problems(schema, {"a" * 60 + "b": "x"}) == []
    assert [p.path for p in find_problems(schema, {"aaa": "x"})] == ["aaa"]  # still checked when it answers


def test_a_schema_that_branches_exponentially_lets_the_params_through_unchecked() -> None:
    """Two ``anyOf`` branches per level through ``$ref``: 2^40 paths for ``{"x": 1}``."""
    levels = 40
    definitions = {f"d{i}": {"anyOf": [{"$ref": f"#/$defs/d{i + 1}"}, {"$ref": f"#/$defs/d{i + 1}"}]} for i in range(levels)}
    definitions[f"d{levels}"] = {"type": "string"}
    schema = {"type": "object", "$defs": definitions, "properties": {"x": {"$ref": "#/$defs/d0"}}, "title": "branching"}
    assert find_problems(schema, {"x": 1}) == []


def test_a_schema_naming_its_draft_stays_bounded_through_a_reference_to_its_root() -> None:
    """jsonschema picks the validator again at a ``$ref`` to a schema naming its draft: it went back
    to its own unbounded one there."""
    schema = {
        "$schema": DRAFT_04,
        "type": "object",
        "properties": {"child": {"$ref": "#"}, "q": {"type": "string", "pattern": CATASTROPHIC}},
    }
    assert find_problems(schema, {"child": {"child": {"q": "a" * 60 + "!"}}}) == []
    assert validators.validator_for(schema) is bounded(validators.Draft4Validator)


def test_a_draft_04_enum_of_many_objects_is_checked_in_linear_time() -> None:
    """Its metaschema's ``uniqueItems`` compared every pair of objects: 8,000 took 86 s."""
    schema = {"$schema": DRAFT_04, "type": "object", "properties": {"x": {"enum": [{"v": i} for i in range(6000)]}}}
    validator_class, problem = schema_validator_class(schema)
    assert problem is None and validator_class is not None
    duplicated = {**schema, "properties": {"x": {"enum": [{"v": 1}, {"v": 2}, {"v": 1.0}]}}}
    assert "has non-unique elements" in (schema_validator_class(duplicated)[1] or "")


def test_unique_items_of_many_unsortable_params_is_checked_in_linear_time() -> None:
    schema = {"type": "object", "properties": {"ids": {"type": "array", "uniqueItems": True}}}
    mixed = [i if i % 2 else str(i) for i in range(200_000)]  # ints and strings do not sort together
    assert find_problems(schema, {"ids": mixed}) == []
    [problem] = find_problems(schema, {"ids": [*mixed[:10], {"a": [1, 2]}, {"a": [1.0, 2]}]})
    assert "non-unique" in problem.message


def test_items_are_equal_as_json_schema_says() -> None:
    assert canonical(1) == canonical(1.0)
    assert canonical(True) != canonical(1) and canonical(False) != canonical(0)
    assert canonical({"a": [1, {"b": None}], "c": "x"}) == canonical({"c": "x", "a": [1.0, {"b": None}]})
    assert canonical([1, 2]) != canonical([2, 1]) and canonical("1") != canonical(1)


@pytest.mark.parametrize(
    ("pattern", "text"),
    # Texts re matches and regex would not: a check that used regex here would report a problem.
    [(r"^[[:alpha:]]+$", "a]"), (r"^(?:secret){e<=1}$", "secret{e<=1}"), (r"^/users/{id}$", "/users/{id}"), (r"^\d{3}$", "123")],
)
def test_patterns_mean_what_they_mean_to_jsonschema(pattern: str, text: str) -> None:
    """``regex`` reads POSIX classes and fuzzy braces that ``re`` takes literally: registered for
    their drafts, the bounded validators answered other users of jsonschema otherwise, and a
    bounded check would have too. Such a pattern is matched by ``re`` outside a bounded check and
    left unchecked inside one."""
    import re  # noqa: PLC0415
    import warnings  # noqa: PLC0415

    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "string", "pattern": pattern}
    bounded(validators.Draft202012Validator)  # registered, as once the copilot has listed a tool
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # re's own warning about "[[" in this very pattern
        expected = re.search(pattern, text) is not None
        assert validators.validator_for(schema)(schema).is_valid(text) is expected
    object_schema = {"type": "object", "properties": {"q": {"type": "string", "pattern": pattern}}}
    assert find_problems(object_schema, {"q": text}) == []  # valid, or (the first three) not checked
    if pattern == r"^\d{3}$":
        assert [p.path for p in find_problems(object_schema, {"q": "12"})] == ["q"]
