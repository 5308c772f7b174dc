"""route's description (server.route.description) for pools unlike LiveMCPBench's: many categories,
servers without English words or tools yet, one tool.
"""

from __future__ import annotations

from server.route.description import GUIDANCE, MAX_CATEGORY_CHARS, MAX_MORE_CHARS, PoolServer, describe_pool


def _many_categories(count: int) -> list[PoolServer]:
    return [
        PoolServer(f"srv-{i:03d}", f"Service {i} handles widget{i} records.", f"Category {i:02d}", [f"do_thing_{i}", f"list_widget_{i}"])
        for i in range(count)
    ]


def test_a_pool_of_many_categories_stays_a_few_hundred_tokens() -> None:
    text = describe_pool(_many_categories(300))
    # 300 categories used to give a 300-line description (tens of thousands of characters).
    assert len(text) < 3200, len(text)
    assert text.endswith(GUIDANCE) and text.startswith("Search the tool pool")
    also = [line for line in text.splitlines() if line.startswith("- Also: ")]
    assert len(also) == 1 and len(also[0]) <= MAX_MORE_CHARS
    detailed = [line for line in text.splitlines() if line.startswith("- Category")]
    # Every category is either detailed or counted in the "Also" line.
    shown = len(detailed) + also[0].count(" server)")
    left = int(also[0].rsplit("+", 1)[1].split()[0])
    assert shown + left == 300


def test_a_small_pool_lists_every_category_in_full() -> None:
    text = describe_pool(_many_categories(5))
    assert "- Also:" not in text
    assert sum(line.startswith("- Category") for line in text.splitlines()) == 5


def test_categories_without_keywords_and_singular_counts_read_cleanly() -> None:
    text = describe_pool(
        [PoolServer("bazi", "八字命理与黄历查询。", "Lifestyle", ["getBaziDetail"]), PoolServer("newcomer", "", "", [])]
    )
    assert "The pool has 1 tool on 2 servers" in text
    assert "- Other: newcomer" in text.splitlines()  # not "- Other: ; newcomer"
    assert "The pool has 1 server, by" in describe_pool([PoolServer("solo", "Does one thing.", "Misc", [])])


def test_an_overlong_category_name_is_cut() -> None:
    text = describe_pool([PoolServer("x", "Reads files.", "A" * 500, ["read_file"])])
    assert max(len(line) for line in text.splitlines()) < 200


def test_identifiers_as_long_as_mcp_allows_do_not_stretch_the_first_line() -> None:
    # Tool names of 128 characters (MCP's recommended maximum) make 128-character keywords; the first
    # category line, always kept, reached 1,619 characters with them (3,736 with longer words).
    pool = [PoolServer(f"srv{i}", "", "Big", [f"op{'q' * 120}{i:03d}{j}" for j in range(2)]) for i in range(40)]
    pool += [PoolServer("s-" + "very-long-server-name-" * 8, "does things", "Big", ["read_file"])]
    lines = [line for line in describe_pool(pool).splitlines() if line.startswith("- Big: ")]
    assert len(lines) == 1 and len(lines[0]) <= MAX_CATEGORY_CHARS and "…" in lines[0]


def test_the_also_line_keeps_its_limit_whatever_the_category_names() -> None:
    pool = []
    for index in range(120):
        name = "C" + "x" * (1 + index * 7 % 38) + str(index)
        pool += [PoolServer(f"s{index}-{k}", "does things", name, ["do_thing"]) for k in range(1 + (index < 12) * 30)]
    (also,) = [line for line in describe_pool(pool).splitlines() if line.startswith("- Also: ")]
    assert len(also) <= MAX_MORE_CHARS and also.endswith(" more categories")
