"""The retrieval bench's page (``bench/results/retrieval.html``): every set in one plot, the tables,
the misses; built here from real (small) query sets and rankings."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import bench.retrieval.report as report_module
from bench.retrieval.lab import SHIPPED, Ranked
from bench.retrieval.metrics import query_metrics
from bench.retrieval.report import comparison_figure, miss_records, report_html, report_path, summaries_of, write_report
from bench.retrieval.sets import Query

RIGHT = frozenset({"write_file"})


def ranked(rankings: list[list[str]], queries: list[Query]) -> Ranked:
    return Ranked(names=rankings, rows=[query_metrics(names, q.relevant) for names, q in zip(rankings, queries, strict=True)])


def small_run() -> tuple[dict[str, list[Query]], dict[str, dict[str, Ranked]]]:
    sets: dict[str, list[Query]] = {}
    results: dict[str, dict[str, Ranked]] = {}
    for name in ("agent-steps", "questions", "real-agent"):
        queries = [
            Query(text="save <b>it</b> to a file", relevant=RIGHT, task_id="t1", category="Office", form="plain"),
            Query(text="write a file", relevant=RIGHT, task_id="t2", category="Office", form="terse"),
            Query(text="store the text", relevant=RIGHT, task_id="t3", category="Office", form="synonym"),
        ]
        sets[name] = queries
        results[name] = {
            "dense": ranked([["a", "b", "c", "write_file"], ["write_file"], ["a", "b", "c"]], queries),
            SHIPPED: ranked([["a", "b", "c", "d", "write_file"], ["write_file"], ["a", "write_file"]], queries),
        }
    return sets, results


def test_every_set_is_a_row_of_panels_with_the_issues_targets_where_they_apply() -> None:
    sets, results = small_run()
    figure = comparison_figure(sets, summaries_of(sets, results))
    panels = figure.get_axes()
    assert [p.get_title() for p in panels[:3]] == ["agent-steps (3 queries): hit@3", "agent-steps (3 queries): prec@3", "agent-steps (3 queries): nDCG@10"]
    assert len(panels) == 9
    targets = {p.get_title(): [line.get_xdata()[0] for line in p.get_lines() if line.get_linestyle() == "--"] for p in panels}
    assert targets["agent-steps (3 queries): hit@3"] == [0.70] and targets["agent-steps (3 queries): prec@3"] == [0.33]
    assert targets["questions (3 queries): nDCG@10"] == [0.50]
    assert targets["real-agent (3 queries): hit@3"] == [] and targets["questions (3 queries): hit@3"] == []
    # the methods read down the first column, the shipped one in its own colour at its own mean
    assert [t.get_text() for t in panels[0].get_yticklabels()] == ["dense", SHIPPED]
    points = [line for line in panels[0].get_lines() if line.get_marker() == "o"]
    assert [(line.get_color(), line.get_xdata()[0]) for line in points] == [
        (report_module.OTHER_COLOR, pytest.approx(1 / 3)), (report_module.SHIPPED_COLOR, pytest.approx(2 / 3))
    ]
    report_module.pyplot().close(figure)


def test_the_page_is_self_contained_and_lists_each_miss_with_what_came_instead(tmp_path: Path) -> None:
    sets, results = small_run()
    misses = tmp_path / "retrieval-misses.jsonl"
    page = report_html(sets, results, summaries_of(sets, results), ["agent-steps", "real-agent"], misses)
    assert page.count("data:image/png;base64,") == 1
    assert not re.search(r"(src|href)=['\"]?(https?:)?//", page)  # nothing fetched
    assert "<b>it</b>" not in page and "save &lt;b&gt;it&lt;/b&gt; to a file" in page  # a query is text, not markup
    assert page.count("Misses: ") == 2 and "Misses: questions" not in page
    # the shipped ranker misses the first query (write_file 5th), not the others
    assert "1 queries with no relevant tool in the shipped ranker&#x27;s top 3" in page
    assert "<td>a, b, c</td><td>5</td>" in page
    for name in ("agent-steps", "questions", "real-agent"):
        assert f"<h2>{name} (3 queries from 3 tasks)</h2>" in page
    assert "0.667 (" in page  # the shipped hit@3 with its interval


def test_a_long_list_of_misses_is_cut_and_says_where_the_rest_are(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sets, results = small_run()
    monkeypatch.setattr(report_module, "MAX_LISTED", 1)
    results["agent-steps"][SHIPPED] = ranked([["a"], ["b"], ["c"]], sets["agent-steps"])
    page = report_html(sets, results, summaries_of(sets, results), ["agent-steps"], tmp_path / "retrieval-misses.jsonl")
    assert "3 queries with no relevant tool" in page and "the first 1 shown, all of them in retrieval-misses.jsonl" in page
    assert "not in the top 10" in page
    assert [m["query"] for m in miss_records(sets["agent-steps"], results["agent-steps"][SHIPPED], "agent-steps")] == [
        q.text for q in sets["agent-steps"]
    ]


def test_a_quick_run_writes_its_own_page_and_the_same_rankings_write_the_same_page(tmp_path: Path) -> None:
    sets, results = small_run()
    summaries = summaries_of(sets, results)
    full = write_report(sets, results, summaries, ["agent-steps"], tmp_path / "m.jsonl", quick=False, results_dir=tmp_path)
    quick = write_report(sets, results, summaries, ["agent-steps"], tmp_path / "m.jsonl", quick=True, results_dir=tmp_path)
    assert (full, quick) == (report_path(False, tmp_path), report_path(True, tmp_path)) and full != quick
    first = full.read_bytes()
    write_report(sets, results, summaries, ["agent-steps"], tmp_path / "m.jsonl", quick=False, results_dir=tmp_path)
    assert full.read_bytes() == first
