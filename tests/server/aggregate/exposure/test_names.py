"""``server.aggregate.names``: exposed names never collide, stay valid, and map back exactly."""

from __future__ import annotations

import itertools
import random

from mcp.shared.tool_name_validation import TOOL_NAME_REGEX

from server.aggregate.names import MAX_NAME_LENGTH, NameTable, hashed_name, parse_resource_uri, resource_uri


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


#: A pool with every kind of contest: two unprefixed servers with the same tool, a child's own
#: name shaped like another server's namespaced one, a reserved name, and pairs that need a hash.
POOL: list[tuple[str, str, bool]] = [
    ("one", "echo", True),
    ("two", "echo", True),
    ("three", "echo", False),
    ("main", "alpha__add", True),
    ("alpha", "add", False),
    ("main", "route", True),
    ("main", f"x_{'0' * 10}", True),  # looks like a hashed name: never kept bare
    ("a__b", "c", False),
    ("Ant Design", "get component", True),
    ("s" * 80, "t" * 80, False),
]
EXPECTED = {
    ("one", "echo"): "echo",  # of the unprefixed servers offering it, the one sorting first keeps it
    ("two", "echo"): "two__echo",
    ("three", "echo"): "three__echo",
    ("main", "alpha__add"): "main__alpha__add",
    ("alpha", "add"): "alpha__add",
    ("main", "route"): "main__route",
    ("main", f"x_{'0' * 10}"): f"main__x_{'0' * 10}",
}


def _orders() -> list[list[tuple[str, str, bool]]]:
    """The pool in several fixed orders (no randomness: the same orders every run)."""
    return [POOL, POOL[::-1], POOL[1::2] + POOL[::2], sorted(POOL, key=lambda t: (t[1], t[0]), reverse=True)]


def test_the_same_pool_gives_the_same_names_whatever_the_order() -> None:
    results = []
    for learned in _orders():
        for asked in _orders():
            table = NameTable(reserved=frozenset({"route", "execute"}))
            table.learn(learned)
            names = {(server, name): table.name(server, name, bare=bare) for server, name, bare in asked}
            results.append(names)
            assert len(set(names.values())) == len(names)
            for pair, exposed in names.items():
                assert TOOL_NAME_REGEX.fullmatch(exposed) and len(exposed) <= MAX_NAME_LENGTH, exposed
                assert table.resolve(exposed) == pair
    assert all(result == results[0] for result in results)
    assert {pair: results[0][pair] for pair in EXPECTED} == EXPECTED
    assert "__" not in results[0][("a__b", "c")]  # a hashed name never has a plain name's shape


def test_names_asked_one_by_one_end_the_same_whatever_the_order() -> None:
    """Without a learned pool each pair joins it when named: once all are in, the order is gone."""
    finals = []
    for order in _orders():
        table = NameTable(reserved=frozenset({"route", "execute"}))
        for server, name, bare in order:
            table.name(server, name, bare=bare)
        finals.append({(server, name): table.name(server, name, bare=bare) for server, name, bare in POOL})
    assert all(final == finals[0] for final in finals)


def test_a_name_given_out_before_the_pool_changed_resolves_only_while_it_holds() -> None:
    table = NameTable()
    assert table.name("two", "echo", bare=True) == "echo"  # alone, twin keeps its own name
    assert table.name("one", "echo", bare=True) == "echo"  # a server sorting first offers it too
    assert table.resolve("echo") == ("one", "echo")
    assert table.name("two", "echo", bare=True) == "two__echo"
    table.learn([("two", "echo", True)])  # "one" left the pool
    assert table.resolve("two__echo") is None  # stale: list again
    assert table.name("two", "echo", bare=True) == "echo"
    assert table.resolve("echo") == ("two", "echo")


def test_pairs_sharing_a_hash_are_told_apart_by_rank() -> None:
    first, second = hashed_name("Ant Design", "get component"), hashed_name("Ant Design", "get component", 1)
    assert second == f"{first}-2" and first != second
    long = hashed_name("s" * 80, "t" * 80, 41)
    assert long.endswith("-42") and len(long) <= MAX_NAME_LENGTH and TOOL_NAME_REGEX.fullmatch(long)


def test_names_of_pairs_that_left_the_pool_are_forgotten() -> None:
    # Before: a child renaming its items on each listing grew the table by every name ever given out.
    table = NameTable()
    for listing in range(50):
        pool = [("notes", f"item_{listing}_{n}", False) for n in range(20)]
        table.learn(pool)
        names = [table.name(server, name) for server, name, _ in pool]
    assert len(table._by_name) == 20  # noqa: SLF001 -- what the table holds is the point
    assert table.resolve(names[0]) == ("notes", "item_49_0")
