"""Aspect-coverage re-ranking (xQuAD, PM2) of queries that hold several needs: a lab study.

``python -m bench.retrieval.studies.coverage [--home DIR]`` (LiveMCPBench data as for ``bench retrieval``).

A task question usually needs one tool per step ("find news about X, summarize it and save it to
/root/a.md"), and the whole question's ranking fills its head with the dominant need's tools.
Coverage re-ranking splits the query into *aspects*, scores every tool per aspect and fills the
top 10 greedily, each place going to the tool with the best

    (1 - λ) · rel(tool, query) + λ · Σ_a w_a · rel(tool, a) · Π_{placed} (1 - rel(placed, a))

(xQuAD; :func:`pm2` is the proportional variant). ``rel`` is ``exp((z - z_max) / T)`` of a z-scored
ranking score, 1 for each ranking's best tool; ``w_a`` is uniform. Aspects (:func:`aspects`):
a packed query's listed operations; a plain-text query's clauses (sentences, "then", a comma or
"and" before a verb), context clauses ("I'm …", "my …") dropped, each cut to its operation with
the dev set's rules (:func:`bench.retrieval.agent_queries.operation`), plus the file operations
its paths imply (:func:`bench.retrieval.lab.file_operations`). A query with fewer than two
aspects ranks exactly as the shipped ranker. λ and T are chosen by 5-fold cross-validation
grouped by task (the lab's folds and objective), and every set is compared with the shipped
ranker per query with task-clustered intervals.
"""

from __future__ import annotations

import itertools
import os
import re
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

import numpy as np

from bench.retrieval.agent_queries import operation
from bench.retrieval.lab import (
    CV_OBJECTIVE,
    QueryParts,
    Space,
    file_operations,
    folds_by_task,
    parts,
    top_indices,
    with_operations,
    without_paths,
)
from bench.retrieval.metrics import KEYS, query_metrics
from bench.retrieval.sets import Query
from bench.retrieval.studies.harness import SHIPPED_SCORE, open_study, print_comparison, shipped_rows
from index.search.ranking import HYBRID, fuse
from index.search.text import tokenize

#: More aspects than this are left to the whole query (a question rarely has more steps).
MAX_ASPECTS = 5
DEPTH = 10

_VERBS = (
    "save|write|summarize|summarise|plot|draw|convert|generate|create|make|tell|give|provide|draft|read|find|search|get|"
    "fetch|download|analyze|analyse|compare|calculate|compute|list|show|extract|organize|organise|merge|insert|add|"
    "identify|recommend|suggest|estimate|translate|visualize|visualise|explain|check|look|map|plan|take|include|"
    "categorize|export|store|put|open|view|choose|build|run|introduce|help"
)
_CLAUSE_BREAK = re.compile(
    rf"(?<=[.!?])\s+|\n+|\s*;\s*|,\s*(?:and\s+)?then\s+|\s+and\s+then\s+|\s+then\s+|,\s*and\s+(?=(?:{_VERBS})\b)"
    rf"|,\s*(?=(?:also\s+)?(?:{_VERBS})\b)|\s+and\s+(?=(?:{_VERBS})\b)|\balso,?\s+|\bfinally,?\s+",
    re.IGNORECASE,
)
#: A clause that states context, not a need ("I'm planning a trip", "my hotel is in …").
_CONTEXT = re.compile(r"^(?:i|i'm|i’m|i am|i've|my|we|we're|we've|our|there|it|it's|this|that|these|those|upon)\b", re.IGNORECASE)
_WANT = re.compile(r"^(?:i|we)\s+(?:need|want|would like|'d like)\s+(?:you\s+)?(?:to\s+)?", re.IGNORECASE)
#: Pasted data (base64, hashes) is not a clause; a path is kept for the file rule.
_BLOB = re.compile(r"(?<!\S)(?![/~])\S{60,}")
_GENERIC = frozenset(tokenize(
    "tell me help please give show provide want need like could would can you i us my it them this that these those "
    "also then finally brief summary detailed based save write store saved"
))
#: What is left of "save the final report as a Markdown file at /root/x.md" once the file rule read it.
_FILE_WORDS = frozenset(tokenize("file files document markdown report final result resulting summary md information as in at to under"))


def clauses(text: str) -> list[str]:
    return [c.strip(" ,.") for c in _CLAUSE_BREAK.split(_BLOB.sub(" ", text)) if c.strip(" ,.")]


def aspects(q: QueryParts, *, files: bool = True) -> list[str]:
    """The needs of a query: a packed query's operations, a plain text's clauses and file operations."""
    if q.operations:
        return list(q.operations)[:MAX_ASPECTS]
    if q.server is not None:  # one <tool_assistant> operation
        return []
    found: list[str] = []
    for clause in clauses(q.whole):
        clause = _WANT.sub("", clause)
        if _CONTEXT.match(clause):
            continue
        implied = file_operations(clause) if files else []
        found.extend(implied)
        cut = operation(without_paths(clause))
        words = [w for w in tokenize(cut) if w not in _GENERIC and not (implied and w in _FILE_WORDS)]
        if words:
            found.append(cut)
    return list(dict.fromkeys(found))[:MAX_ASPECTS]


# -- greedy selection ---------------------------------------------------------------------------------


def relevance(scores: np.ndarray, temperature: float) -> np.ndarray:
    """Scores (one row per ranking) as ``exp((z - z_max) / T)``: 1 for each row's best tool."""
    rows = np.atleast_2d(scores).astype(np.float64)
    spread = rows.std(axis=1, keepdims=True)
    z = np.where(spread > 1e-9, (rows - rows.mean(axis=1, keepdims=True)) / np.maximum(spread, 1e-9), 0.0)
    return np.exp((z - z.max(axis=1, keepdims=True)) / temperature)


def xquad(first: np.ndarray, per_aspect: np.ndarray, lam: float, temperature: float, depth: int = DEPTH) -> list[int]:
    """The top ``depth`` tools chosen greedily (ties to the lower index, as the shipped ranking breaks them)."""
    whole = relevance(first, temperature)[0]
    aspect = relevance(per_aspect, temperature)
    weights = np.full(aspect.shape[0], 1.0 / aspect.shape[0])
    uncovered = np.ones(aspect.shape[0])
    chosen: list[int] = []
    for _ in range(min(depth, first.size)):
        score = (1 - lam) * whole + lam * ((weights * uncovered) @ aspect)
        score[chosen] = -np.inf
        best = int(np.argmax(score))
        chosen.append(best)
        uncovered *= 1 - aspect[:, best]
    return chosen


def pm2(first: np.ndarray, per_aspect: np.ndarray, lam: float, temperature: float, mix: float, depth: int = DEPTH) -> list[int]:
    """PM2 (proportional seats per aspect, Sainte-Laguë quotients), mixed ``mix`` with the whole query's relevance."""
    whole = relevance(first, temperature)[0]
    aspect = relevance(per_aspect, temperature)
    seats = np.full(aspect.shape[0], depth / aspect.shape[0])
    taken = np.zeros(aspect.shape[0])
    chosen: list[int] = []
    for _ in range(min(depth, first.size)):
        quotient = seats / (2 * taken + 1)
        lead = int(np.argmax(quotient))
        rest = quotient.copy()
        rest[lead] = 0.0
        diverse = (lam * quotient[lead] * aspect[lead] + (1 - lam) * (rest @ aspect)) / quotient.max()
        score = (1 - mix) * whole + mix * diverse
        score[chosen] = -np.inf
        best = int(np.argmax(score))
        chosen.append(best)
        taken += aspect[:, best] / max(float(aspect[:, best].sum()), 1e-9)
    return chosen


# -- the study ----------------------------------------------------------------------------------------

Relevance = Literal["lexical", "embedded"]


@dataclass
class Scored:
    """One query: the shipped ranker's scores and, with two aspects or more, each aspect's."""

    shipped: np.ndarray
    per_aspect: np.ndarray | None = None

    def top(self, depth: int = DEPTH) -> list[int]:
        return top_indices(self.shipped, depth)


def score_query(space: Space, q: QueryParts, found: list[str], relevance_: Relevance) -> Scored:
    """Per aspect: ``lexical`` = its BM25 with the whole query's dense and server signals (~0.1 ms
    each, as listed operations are searched); ``embedded`` = every signal on the aspect (~4 ms each).
    The aspects are scored as the lab scores listed operations (:func:`bench.retrieval.lab.with_operations`)."""
    scored = Scored(SHIPPED_SCORE(space, q))
    if len(found) < 2:
        return scored
    per = with_operations(space, replace(q, operations=tuple(found)), relevance_)[1:]
    scored.per_aspect = np.stack([fuse(signals, HYBRID) for signals in per])
    return scored


Reranker = Callable[[Scored, dict[str, float]], list[int]]


def rerank_xquad(s: Scored, p: dict[str, float]) -> list[int]:
    return s.top() if s.per_aspect is None else xquad(s.shipped, s.per_aspect, p["lam"], p["T"])


def rerank_pm2(s: Scored, p: dict[str, float]) -> list[int]:
    return s.top() if s.per_aspect is None else pm2(s.shipped, s.per_aspect, p["lam"], p["T"], p["mix"])


XQUAD_GRID = [{"lam": lam, "T": t} for lam, t in itertools.product((0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9), (0.25, 0.5, 1.0, 2.0))]
PM2_GRID = [{"lam": lam, "T": t, "mix": mix} for lam, t, mix in itertools.product((0.3, 0.6, 0.9), (0.5, 1.0), (0.0, 0.2, 0.4, 0.6))]


@dataclass
class CrossValidated:
    chosen: list[dict[str, float]]  # per fold
    held_out: list[dict[str, dict[str, float]]]  # per fold: set -> metric -> mean over its held-out tasks
    rows: dict[str, list[dict[str, float]]]  # per set, per query: metrics under its fold's choice


def cross_validate(
    scored: dict[str, list[Scored]], sets: dict[str, Sequence[Query]], names: list[str], rerank: Reranker,
    grid: list[dict[str, float]], k: int = 5,
) -> CrossValidated:
    """Parameters chosen on k-1 folds of tasks (objective: mean of agent-steps hit@3 and questions
    nDCG@10), every query of the held-out fold's tasks ranked with them."""
    table = {
        name: [[query_metrics([names[i] for i in rerank(s, p)], q.relevant) for s, q in zip(scored[name], sets[name], strict=True)] for p in grid]
        for name in sets
    }
    tasks = {q.task_id for name in CV_OBJECTIVE for q in sets[name]}
    result = CrossValidated([], [], {name: [{} for _ in sets[name]] for name in sets})
    for held_out in folds_by_task(tasks, k):

        def objective(point: int) -> float:
            values = []
            for name, metric in CV_OBJECTIVE.items():
                chosen = [r[metric] for r, q in zip(table[name][point], sets[name], strict=True) if q.task_id not in held_out]
                values.append(sum(chosen) / max(len(chosen), 1))
            return sum(values) / len(values)

        best = max(range(len(grid)), key=lambda point: (round(objective(point), 6), -point))
        result.chosen.append(grid[best])
        fold: dict[str, dict[str, float]] = {}
        for name in sets:
            kept = [i for i, q in enumerate(sets[name]) if q.task_id in held_out]
            for i in kept:
                result.rows[name][i] = table[name][best][i]
            fold[name] = {key: statistics.fmean(table[name][best][i][key] for i in kept) if kept else float("nan") for key in KEYS}
        result.held_out.append(fold)
    return result


def _print_folds(result: CrossValidated) -> None:
    for number, (chosen, fold) in enumerate(zip(result.chosen, result.held_out, strict=True)):
        params = " ".join(f"{k} {v:g}" for k, v in chosen.items())
        print(f"  fold {number}: chose {params}   held-out agent-steps hit@3 {fold['agent-steps']['hit@3']:.3f} "
              f"prec@3 {fold['agent-steps']['prec@3']:.3f}   questions nDCG@10 {fold['questions']['nDCG@10']:.3f}")
    for name, key in (("agent-steps", "hit@3"), ("agent-steps", "prec@3"), ("questions", "nDCG@10")):
        values = [f[name][key] for f in result.held_out]
        print(f"  held-out {name} {key} by fold: mean {statistics.fmean(values):.3f}, sd {statistics.stdev(values):.3f}, "
              f"range {min(values):.3f}-{max(values):.3f}")


def oracle_aspects(annotations: Path, questions: Sequence[Query]) -> dict[str, list[str]]:
    """Each task's annotated steps cut to operations: aspects no rule can read from the question (a ceiling)."""
    from bench.retrieval.agent_queries import read_tasks

    steps = {t.task_id: [op for op in (operation(s) for s in t.steps) if op] for t in read_tasks(annotations)}
    return {q.task_id: steps.get(q.task_id, [])[:8] for q in questions}


def _latency(space: Space, sets: dict[str, Sequence[Query]]) -> None:
    """Per multi-aspect query, interleaved: what route pays today (its texts embedded, the shipped
    scoring) and what coverage re-ranking would add (aspects, their BM25 and xQuAD; or embedding each)."""
    encoder = space.encoder
    print(f"\n== latency per query with two or more aspects, p50 / p95 ms (load average {os.getloadavg()[0]:.1f})")
    for name in ("questions", "real-agent"):
        base: list[float] = []
        lexical: list[float] = []
        embedded: list[float] = []
        for query in sets[name]:
            q = parts(query.text)
            found = aspects(q)
            if len(found) < 2:
                continue
            started = time.perf_counter()
            for text in dict.fromkeys([q.tool, q.server_text]):
                encoder.queries([text])
            SHIPPED_SCORE(space, q)
            base.append(time.perf_counter() - started)
            started = time.perf_counter()
            rerank_xquad(score_query(space, q, aspects(q), "lexical"), {"lam": 0.5, "T": 1.0})
            lexical.append(time.perf_counter() - started)
            started = time.perf_counter()
            for text in found:
                encoder.queries([text])
            embedded.append(time.perf_counter() - started)

        def ms(values: list[float]) -> str:
            return f"{np.percentile(values, 50) * 1000:.1f} / {np.percentile(values, 95) * 1000:.1f}"

        print(f"  {name:<11} ({len(base)} queries) shipped: embedding + scoring {ms(base)}   added by aspects, "
              f"BM25 each + xQuAD {ms(lexical)}   added by embedding each aspect {ms(embedded)}")


def main(argv: Sequence[str] | None = None) -> int:
    from bench.retrieval import DEFAULT_ANNOTATIONS

    study = open_study(argv, "python -m bench.retrieval.studies.coverage", __doc__.split("\n\n")[0])
    if isinstance(study, int):
        return study
    sets, space, cache, encoder = study.sets, study.space, study.cache, study.encoder
    oracle = oracle_aspects(DEFAULT_ANNOTATIONS, sets["questions"])

    variants: dict[str, dict[str, list[list[str]]]] = {
        "clauses + file operations": {n: [aspects(parts(q.text)) for q in qs] for n, qs in sets.items()},
        "clauses only": {n: [aspects(parts(q.text), files=False) for q in qs] for n, qs in sets.items()},
        "oracle: annotated steps (ceiling, not deployable)": {
            n: [oracle[q.task_id] if n == "questions" else aspects(parts(q.text)) for q in qs] for n, qs in sets.items()
        },
    }
    texts = sorted({a for found in variants.values() for per_set in found.values() for f in per_set for a in f if len(f) > 1})
    space.query_vectors.update(zip(texts, cache.get(encoder, texts, queries=True), strict=True))
    for name, per_set in variants.items():
        multi = ", ".join(f"{n} {sum(len(f) > 1 for f in found)}/{len(found)}" for n, found in per_set.items())
        print(f"aspects '{name}': queries with two or more: {multi}")

    # First: after the cross-validation's numpy work, BLAS threads left spinning slow the model ~10x.
    _latency(space, sets)
    shipped = shipped_rows(study, DEPTH)
    print_comparison("== shipped ranker (per set: mean of each metric)", shipped, shipped, sets)
    print("\nevery variant below: mean (paired difference with the shipped ranker, task-clustered 95% CI), "
          "parameters chosen by 5-fold CV grouped by task")
    methods = {"xQuAD": (rerank_xquad, XQUAD_GRID), "PM2": (rerank_pm2, PM2_GRID)}
    runs = [("xQuAD", aspect_name, relevance_) for aspect_name in variants for relevance_ in ("lexical", "embedded")]
    runs += [("PM2", "clauses + file operations", relevance_) for relevance_ in ("lexical", "embedded")]
    for method, aspect_name, relevance_ in runs:
        rerank, grid = methods[method]
        scored = {
            n: [score_query(space, parts(q.text), f, relevance_) for q, f in zip(qs, variants[aspect_name][n], strict=True)]  # type: ignore[arg-type]
            for n, qs in sets.items()
        }
        result = cross_validate(scored, sets, space.names, rerank, grid)
        print_comparison(f"== {method}, aspects: {aspect_name}, relevance per aspect: {relevance_}", result.rows, shipped, sets)
        _print_folds(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
