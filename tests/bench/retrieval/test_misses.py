"""``python -m bench retrieval``: a ``--quick`` smoke run keeps the full run's per-query misses.

The benchmark itself needs LiveMCPBench and several embedding models; what is tested here is the
part that decides which file the misses go to, with real (small) query sets and rankings.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.retrieval import MISSES_SETS, RESULTS_DIR, main, misses_path, save_misses
from bench.retrieval.lab import SHIPPED, Ranked
from bench.retrieval.sets import Query, QuerySet


def test_a_quick_run_has_its_own_misses_file() -> None:
    assert misses_path(False) == RESULTS_DIR / "retrieval-misses.jsonl"
    assert misses_path(True) == RESULTS_DIR / "retrieval-misses-quick.jsonl"


def sets_and_results(missed: str) -> tuple[dict[str, QuerySet], dict[str, dict[str, Ranked]]]:
    """Each set: one query the shipped ranker misses (named ``missed``) and one it finds."""
    sets, results = {}, {}
    for name in MISSES_SETS:
        queries = [
            Query(text=missed, relevant=frozenset({"s/right"}), task_id="t1", category="Office", form="step"),
            Query(text="found", relevant=frozenset({"s/right"}), task_id="t2", category="Office", form="step"),
        ]
        sets[name] = QuerySet(name=name, queries=queries)
        ranked = Ranked(names=[["s/wrong", "s/other", "s/right"], ["s/right"]], rows=[{"hit@3": 0.0}, {"hit@3": 1.0}])
        results[name] = {SHIPPED: ranked}
    return sets, results


def missed_queries(path: Path) -> list[str]:
    return [json.loads(line)["query"] for line in path.read_text(encoding="utf-8").splitlines()]


def test_a_quick_run_leaves_the_full_runs_misses_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    full = save_misses(*sets_and_results("missed in the full run"), quick=False, results_dir=tmp_path)
    assert missed_queries(full) == ["missed in the full run"] * len(MISSES_SETS)
    capsys.readouterr()

    quick = save_misses(*sets_and_results("missed in the quick run"), quick=True, results_dir=tmp_path)
    assert quick != full
    assert missed_queries(full) == ["missed in the full run"] * len(MISSES_SETS)  # untouched
    assert missed_queries(quick) == ["missed in the quick run"] * len(MISSES_SETS)
    said = " ".join(capsys.readouterr().out.split())
    assert f"-> {quick}" in said and f"the full run's misses in {full} are left as they are" in said

    # A rerun replaces its own file, not appends to it.
    save_misses(*sets_and_results("missed again"), quick=True, results_dir=tmp_path)
    assert missed_queries(quick) == ["missed again"] * len(MISSES_SETS)


def test_the_help_says_where_a_quick_runs_misses_go(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["--help"])
    assert stopped.value.code == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "its misses go to retrieval-misses-quick.jsonl, leaving the full run's retrieval-misses.jsonl as it is" in said
