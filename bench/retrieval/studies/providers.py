"""Input providers lifted below the tools that need them, cross-validated across tasks: a lab study.

``python -m bench.retrieval.studies.providers [--home DIR]`` (LiveMCPBench data as for ``bench retrieval``).

A task's annotated tools include the ones its main tools need first -- ``geocode_address`` before
``find_parking_facilities`` (which takes a latitude), the station-code lookup before
``get-tickets`` -- and nothing in the request names them. :mod:`index.search.providers` reads those
links from the catalog (a tool named in another's description; a handle parameter, an id, code or
coordinate, that another tool of the server describes) and ``route`` lifts the providers of its
``depth`` best tools to ``gap`` below them (:func:`index.search.ranking.with_providers`).

Printed against the ranker without providers (per query, task-clustered 95% intervals): the links
the catalog yields, fixed settings, each rule alone (and the handle rule without the coordinate
words, which were added after reading misses that needed geocoding), and depth and gap chosen on
the training folds alone (five folds grouped by task, objective as the weight study: agent-steps
hit@3 and questions nDCG@10), for three splits; and, for contrast, the links reversed (a tool's
consumers lifted below it).
"""

from __future__ import annotations

import itertools
import sys
from collections import Counter
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from bench.retrieval.lab import CV_OBJECTIVE, fold_means, folds_by_task, fused, objective_value, parts, top_indices
from bench.retrieval.metrics import query_metrics
from bench.retrieval.studies.harness import Rows, Study, open_study, print_comparison
from index.search.providers import Provision, input_providers, provider_positions
from index.search.text import latin_words
from index.search.ranking import HYBRID, PROVIDER_CAP, PROVIDER_DEPTH, PROVIDER_GAP, with_providers

SEEDS = (0, 1, 2)
DEPTHS = (1, 3, 5, 10, 20)
GAPS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0)
FIXED = ((5, 0.1), (PROVIDER_DEPTH, PROVIDER_GAP), (10, 0.5))
#: The handle words for coordinates (the ablation leaves them out).
COORDINATE_WORDS = frozenset({"latitude", "longitude", "lat", "lon", "lng", "coordinate"})

Graph = tuple[tuple[int, ...], ...]


def rule_of(provision: Provision) -> str:
    if provision.parameter is None:
        return "named"
    return "coordinate" if latin_words(provision.parameter) & COORDINATE_WORDS else "handle"


def graph(study: Study, keep: Callable[[Provision], bool] = lambda _: True) -> Graph:
    found = input_providers(study.catalog.tools)
    kept = {consumer: [p for p in provisions if keep(p)] for consumer, provisions in found.items()}
    return provider_positions(study.space.space.ids, kept)


def reversed_links(providers: Graph) -> Graph:
    """Per tool: the tools it provides an input to (the consumers, where ``providers`` has the providers)."""
    consumers: list[list[int]] = [[] for _ in providers]
    for consumer, found in enumerate(providers):
        for provider in found:
            consumers[provider].append(consumer)
    return tuple(tuple(found) for found in consumers)


def lifted_rows(
    study: Study, scores: Mapping[str, list[np.ndarray]], providers: Graph | None, depth: int, gap: float, cap: int = PROVIDER_CAP
) -> Rows:
    """Every query's metrics with the providers of its ``depth`` best tools lifted (None: not lifted)."""
    names = study.space.names
    rows: Rows = {}
    for name, queries in study.sets.items():
        rows[name] = []
        for query, score in zip(queries, scores[name], strict=True):
            final = score if providers is None else with_providers(score, providers, depth=depth, gap=gap, cap=cap)
            rows[name].append(query_metrics([names[i] for i in top_indices(final, 10)], query.relevant))
    return rows


def cross_validated(
    study: Study, table: Sequence[Rows], grid: Sequence[tuple[int, float]], seed: int
) -> tuple[Rows, list[tuple[int, float]], dict[str, list[float]]]:
    """Each held-out fold's rows under the grid point its training folds chose, the choices, and
    each objective metric's mean on each held-out fold (for the fold-to-fold spread)."""
    chosen: Rows = {name: [{} for _ in queries] for name, queries in study.sets.items()}
    picks = []
    tasks = {q.task_id for queries in study.sets.values() for q in queries}
    folds = folds_by_task(tasks, 5, seed)
    for held_out in folds:
        best = max(
            range(len(grid)),
            key=lambda p: (round(objective_value(table[p], study.sets, lambda q: q.task_id not in held_out), 6), -p),
        )
        picks.append(grid[best])
        for name, queries in study.sets.items():
            for i, query in enumerate(queries):
                if query.task_id in held_out:
                    chosen[name][i] = table[best][name][i]
    return chosen, picks, fold_means(chosen, study.sets, folds)


def main(argv: Sequence[str] | None = None) -> int:
    study = open_study(argv, "python -m bench.retrieval.studies.providers", __doc__.splitlines()[0])
    if isinstance(study, int):
        return study
    provisions = [p for found in input_providers(study.catalog.tools).values() for p in found]
    rules = Counter(rule_of(p) for p in provisions)
    consumers = len({p.consumer for p in provisions})
    print(
        f"input providers in the catalog: {len(provisions)} links for {consumers} of {len(study.catalog.tools)} tools "
        f"(named {rules['named']}, handle {rules['handle']}, coordinate {rules['coordinate']})"
    )
    score = fused(HYBRID)
    scores = {name: [score(study.space, parts(q.text)) for q in queries] for name, queries in study.sets.items()}
    before = lifted_rows(study, scores, None, 0, 0.0)
    print_comparison("the ranker without input providers (baseline)", before, before, study.sets)
    every = graph(study)
    for depth, gap in FIXED:
        label = f"providers lifted, depth {depth}, gap {gap:g}" + (" (shipped)" if (depth, gap) == (PROVIDER_DEPTH, PROVIDER_GAP) else "")
        print_comparison(label, lifted_rows(study, scores, every, depth, gap), before, study.sets)
    for cap in (1, 2, len(study.catalog.tools)):
        rows = lifted_rows(study, scores, every, PROVIDER_DEPTH, PROVIDER_GAP, cap)
        print_comparison(f"at most {cap} providers per tool (shipped: {PROVIDER_CAP})", rows, before, study.sets)
    ablations: dict[str, Callable[[Provision], bool]] = {
        "named only": lambda p: rule_of(p) == "named",
        "handles only (coordinates included)": lambda p: rule_of(p) != "named",
        "without the coordinate words": lambda p: rule_of(p) != "coordinate",
    }
    for label, keep in ablations.items():
        rows = lifted_rows(study, scores, graph(study, keep), PROVIDER_DEPTH, PROVIDER_GAP)
        print_comparison(f"{label}, depth {PROVIDER_DEPTH}, gap {PROVIDER_GAP:g}", rows, before, study.sets)
    consumers = reversed_links(every)
    print_comparison(
        f"consumers lifted instead (the links reversed), depth {PROVIDER_DEPTH}, gap {PROVIDER_GAP:g}",
        lifted_rows(study, scores, consumers, PROVIDER_DEPTH, PROVIDER_GAP), before, study.sets,
    )
    grid = list(itertools.product(DEPTHS, GAPS))
    print(f"\ncross-validated: depth x gap over {len(grid)} points, chosen on the training folds", file=sys.stderr, flush=True)
    table = [lifted_rows(study, scores, every, depth, gap) for depth, gap in grid]
    for seed in SEEDS:
        rows, picks, per_fold = cross_validated(study, table, grid, seed)
        chosen = ", ".join(f"({depth}, {gap:g})" for depth, gap in picks)
        print_comparison(f"depth and gap chosen per fold (split {seed}: {chosen}), held out", rows, before, study.sets)
        spread = "; ".join(
            f"{name} {CV_OBJECTIVE[name]} sd {np.std(values, ddof=1):.3f} ({min(values):.3f}-{max(values):.3f})"
            for name, values in per_fold.items()
        )
        print(f"  fold to fold: {spread}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
