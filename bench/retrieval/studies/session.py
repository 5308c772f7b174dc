"""The session prior, cross-validated across tasks: a lab study.

``python -m bench.retrieval.studies.session [--home DIR]`` (LiveMCPBench data as for ``bench retrieval``).

``route`` adds a weight to every tool of the servers its session last ran a tool of without error
(:mod:`index.search.session_prior`). Each dev-set task is replayed as one session, its earlier steps
having run their annotated tools or ``route``'s first answer, alone or itself ranked in the session
(:mod:`bench.retrieval.sessions`); a
task's question starts its session (unchanged by construction); the real agent queries carry the
servers the paper's agent executed without error before each ``route`` call.

Printed: how often a step's tools share a server with the earlier steps', fixed weights, the weight
chosen on the training folds alone (five folds grouped by task, three splits; the objective of the
weight study), each against the shipped ranker per query with task-clustered intervals, and what
trimming costs at the shipped weight.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence

from bench.retrieval.lab import folds_by_task, objective_value, parts, scored, top_indices
from bench.retrieval.sessions import (
    Sessions,
    annotated_ran,
    first_answer_ran,
    fused_scores,
    rank_in_sessions,
    session_lift,
    sessions_of,
    shared_steps,
)
from bench.retrieval.studies.harness import Rows, Study, open_study, print_comparison
from index.search.confidence import judge
from index.settings import CopilotSettings

FIXED = (1.0, 2.0, 3.0)
GRID = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0)
SEEDS = (0, 1, 2)


def chosen_rows(study: Study, grid_rows: Mapping[float, Rows], folds: list[set[str]]) -> tuple[Rows, list[float]]:
    """Each held-out fold's queries ranked with the grid weight best on the other folds' tasks."""
    chosen = []
    for fold in folds:
        def objective(weight: float, fold: set[str] = fold) -> float:
            return objective_value(grid_rows[weight], study.sets, lambda q: q.task_id not in fold)

        chosen.append(max(GRID, key=lambda w: (round(objective(w), 6), -w)))
    fold_of = {task: number for number, fold in enumerate(folds) for task in fold}
    rows = {
        name: [grid_rows[chosen[fold_of[q.task_id]]][name][i] for i, q in enumerate(queries)]
        for name, queries in study.sets.items()
    }
    return rows, chosen


def trimming_losses(study: Study, sessions: Sessions, weight: float) -> dict[str, tuple[int, int]]:
    """Per set: (hits in the top 5 that trimming drops, queries) with the session prior at ``weight``
    (the route path's verdict on the lifted scores; input providers are left out here)."""
    out = {}
    for name, queries in study.sets.items():
        lost = 0
        for query in queries:
            scores, dense, lexical = scored(study.space, parts(query.text))
            lift = session_lift(study.space, sessions.get(query, ()), weight)
            if lift is not None:
                scores = scores + lift
            order = top_indices(scores, 5)
            keep = judge(scores, dense, lexical, order).keep
            names = [study.space.names[i] for i in order]
            lost += any(n in query.relevant for n in names) and not any(n in query.relevant for n in names[:keep])
        out[name] = (lost, len(queries))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    study = open_study(argv, "python -m bench.retrieval.studies.session", __doc__.split("\n\n")[0])
    if isinstance(study, int):
        return study
    fused = {name: fused_scores(study.space, queries) for name, queries in study.sets.items()}

    def rows_at(sessions: Sessions, weight: float) -> Rows:
        return {
            name: rank_in_sessions(study.space, queries, sessions, weight, fused[name]).rows
            for name, queries in study.sets.items()
        }

    shipped = rows_at({}, 0.0)
    print_comparison("== shipped ranker, no session (per set: mean of each metric)", shipped, shipped, study.sets)
    steps = study.sets["agent-steps"]
    annotated = annotated_ran(steps, study.space)
    shared, total = shared_steps(annotated)
    print(f"\nsteps after a task's first sharing a server with an earlier step (annotated tools): {shared} of {total}")
    real = [q.session for q in study.sets["real-agent"]]
    print(f"real agent queries sent after a successful execute: {sum(bool(s) for s in real)} of {len(real)}")
    tasks = sorted({q.task_id for queries in study.sets.values() for q in queries})
    shipped_weight = CopilotSettings.model_fields["session_prior_weight"].default
    first = first_answer_ran(steps, fused["agent-steps"], study.space)
    looped = first_answer_ran(steps, fused["agent-steps"], study.space, shipped_weight)
    stand_ins = (
        ("annotated", annotated),
        ("route's first answer", first),
        (f"route's first answer, itself ranked in the session (weight {shipped_weight:g})", looped),
    )
    for label, ran in stand_ins:
        sessions = sessions_of(study.sets, ran)
        grid_rows = {weight: rows_at(sessions, weight) for weight in GRID}
        print(f"\n## earlier steps ran: {label}")
        for weight in FIXED:
            print_comparison(f"== weight {weight:g}", grid_rows[weight], shipped, study.sets)
        for seed in SEEDS:
            rows, chosen = chosen_rows(study, grid_rows, folds_by_task(tasks, 5, seed))
            print_comparison(f"== weight chosen on the training folds (split {seed}: {chosen})", rows, shipped, study.sets)
        losses, without = trimming_losses(study, sessions, shipped_weight), trimming_losses(study, sessions, 0.0)
        print(f"  trimming at the shipped weight {shipped_weight:g}: top-5 hits dropped " + ", ".join(
            f"{name} {lost} of {count} ({without[name][0]} without the session)" for name, (lost, count) in losses.items()
        ))
    return 0


if __name__ == "__main__":
    sys.exit(main())
