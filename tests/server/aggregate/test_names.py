"""``server.aggregate.names``: exposed names never collide, stay valid, and map back exactly."""

from __future__ import annotations

import itertools
import random

from mcp.shared.tool_name_validation import TOOL_NAME_REGEX

from server.aggregate.names import MAX_NAME_LENGTH, NameTable, parse_resource_uri, resource_uri


def test_plain_names_are_server_double_underscore_name() -> None:
    table = NameTable()
    assert table.name("alpha", "add") == "alpha__add"
    assert table.resolve("alpha__add") == ("alpha", "add")
    assert table.name("alpha", "add") == "alpha__add"  # stable


def test_awkward_pairs_get_valid_unique_names() -> None:
    table = NameTable(reserved=frozenset({"route"}))
    pairs = [
        ("a__b", "c"),  # would read as server 'a', tool 'b__c'
        ("a", "b__c"),
        ("Ant Design Components", "get component"),
        ("服务", "查询天气"),
        ("s" * 80, "t" * 80),
        ("s" * 80, "t" * 81),
        ("x", "route"),
    ]
    names = [table.name(server, tool) for server, tool in pairs]
    assert len(set(names)) == len(names)
    for name, pair in zip(names, pairs, strict=True):
        assert TOOL_NAME_REGEX.fullmatch(name) and len(name) <= MAX_NAME_LENGTH, name
        assert table.resolve(name) == pair
    assert table.name("a", "b__c") == "a__b__c"
    assert table.name("a__b", "c") != "a__b__c"


def test_many_random_pairs_never_collide() -> None:
    rng = random.Random(986)
    alphabet = "ab_-. 1/"
    table = NameTable()
    pairs = {
        ("".join(rng.choices(alphabet, k=rng.randint(1, 8))), "".join(rng.choices(alphabet, k=rng.randint(1, 8))))
        for _ in range(3000)
    }
    names = {pair: table.name(*pair) for pair in sorted(pairs)}
    assert len(set(names.values())) == len(names)
    assert all(table.resolve(name) == pair for pair, name in names.items())


def test_bare_names_are_kept_when_free_and_never_shadow_a_reserved_or_taken_name() -> None:
    table = NameTable(reserved=frozenset({"route"}))
    assert table.name("conformance", "test_simple_text", bare=True) == "test_simple_text"
    assert table.name("other", "test_simple_text", bare=True) == "other__test_simple_text"
    assert table.name("conformance", "route", bare=True) == "conformance__route"


def test_an_unknown_name_resolves_to_nothing() -> None:
    assert NameTable().resolve("alpha__add") is None


def test_resource_uris_round_trip() -> None:
    for server, uri in itertools.product(
        ["notes", "a/b", "Ant Design", "100%"], ["notes://readme", "file:///tmp/x y", "notes://items/{item_id}"]
    ):
        wrapped = resource_uri(server, uri)
        assert wrapped.startswith("copilot://")
        assert parse_resource_uri(wrapped) == (server, uri)
    assert resource_uri("notes", "notes://items/{item_id}") == "copilot://notes/notes://items/{item_id}"
    assert parse_resource_uri("notes://readme") is None
    assert parse_resource_uri("copilot://notes") is None
