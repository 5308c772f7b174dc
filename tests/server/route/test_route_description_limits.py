"""route's description (server.route.description) for pools unlike LiveMCPBench's: many categories,
servers without English words or tools yet, one tool.
"""

from __future__ import annotations

from server.route.description import GUIDANCE, MAX_MORE_CHARS, PoolServer, describe_pool


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
    assert len(also) == 1 and len(also[0]) <= MAX_MORE_CHARS + 40
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
