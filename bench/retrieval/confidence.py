"""Weak-match flags and trimmed tails at the shipped thresholds (:mod:`index.search.confidence`),
on every set and cross-validated across tasks: the hybrid's verdicts, and the keyword-only ones
``route`` gives while the embedding model loads."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from bench.retrieval.lab import Space, folds_by_task, parts, scored, top_indices
from bench.retrieval.sets import Query, QuerySet
from index.search.confidence import TRIM_FLOOR, TRIM_MARGIN, WEAK_DENSE, WEAK_KEYWORD_SHARE, WEAK_LEXICAL, judge, weak_keywords
from index.search.ranking import keyword_scores


def weak_and_trim(space: Space, sets: dict[str, QuerySet], off: QuerySet, report: dict) -> None:
    """Weak-match flags and trimmed tails at the shipped thresholds, plus their cross-validation."""

    def verdicts(queries: Sequence[Query]) -> list[tuple[bool, int, bool, bool, float]]:
        """(weak, kept of top 5, relevant in top 5, relevant in kept, best dense) per query."""
        out = []
        for query in queries:
            scores, dense, lexical = scored(space, parts(query.text))
            order = top_indices(scores, 5)
            verdict = judge(scores, dense, lexical, order)
            names = [space.names[i] for i in order]
            out.append((verdict.weak, verdict.keep, any(n in query.relevant for n in names),
                        any(n in query.relevant for n in names[: verdict.keep]), float(np.max(dense))))
        return out

    print(f"\n== weak matches and trimmed tails (shipped thresholds: weak if best dense < {WEAK_DENSE} and best BM25 < {WEAK_LEXICAL}; "
          f"drop hits below {TRIM_FLOOR} and more than {TRIM_MARGIN} under the best)")
    report["weak_trim"] = {}
    rows_of = {}
    for name in ("agent-steps", "questions", "real-agent"):
        rows = rows_of[name] = verdicts(sets[name].queries)
        weak = sum(r[0] for r in rows) / len(rows)
        lost = sum(r[2] and not r[3] for r in rows)
        kept = sum(r[1] for r in rows) / len(rows)
        print(f"  {name:<12} flagged weak {weak:6.1%} (false alarms: every query has a tool)   hit@5 {sum(r[2] for r in rows) / len(rows):.3f} -> "
              f"{sum(r[3] for r in rows) / len(rows):.3f} after trimming ({lost} lost)   tools returned of 5: {kept:.2f}")
        report["weak_trim"][name] = {"weak": weak, "lost": lost, "kept": kept}
    off_rows = verdicts(off.queries)
    if off_rows:
        print(f"  off-catalog  flagged weak {sum(r[0] for r in off_rows) / len(off_rows):6.1%} (should be high)   tools returned of 5: {sum(r[1] for r in off_rows) / len(off_rows):.2f}")
        report["weak_trim"]["off-catalog"] = {"weak": sum(r[0] for r in off_rows) / len(off_rows)}
    # Cross-validation of the weak threshold: on each fold's training tasks, the largest threshold
    # whose false-alarm rate on agent-steps stays under 5%; measured on the held-out tasks.
    steps = sets["agent-steps"].queries
    best_dense = [row[4] for row in rows_of["agent-steps"]]
    off_dense = [row[4] for row in off_rows]
    lines = []
    for number, held_out in enumerate(folds_by_task({q.task_id for q in steps})):
        train = sorted(d for d, q in zip(best_dense, steps, strict=True) if q.task_id not in held_out)
        threshold = train[int(0.05 * len(train))]
        test = [d for d, q in zip(best_dense, steps, strict=True) if q.task_id in held_out]
        false_alarm = sum(d < threshold for d in test) / len(test)
        recall = sum(d < threshold for d in off_dense) / max(len(off_dense), 1)
        lines.append(f"fold {number}: threshold {threshold:.3f}, held-out false alarms {false_alarm:.1%}, off-catalog flagged {recall:.0%}")
    print("  weak threshold by 5-fold CV (5% false alarms on training tasks): " + "; ".join(lines))
    weak_keywords_report(space, sets, off, report)


def weak_keywords_report(space: Space, sets: dict[str, QuerySet], off: QuerySet, report: dict) -> None:
    """Keyword-only answers (route while the model loads): how often the shipped share flags them,
    whether flagged first hits are wrong, and the share cross-validated across tasks."""
    lexical = space.space.lexical
    rare = lexical.one_rare_word_score

    def answers(queries: Sequence[Query]) -> list[tuple[str, float, bool]]:
        """(task, best BM25, first hit relevant) per query the keywords answer at all."""
        out = []
        for query in queries:
            q = parts(query.text)
            scores = keyword_scores(lexical, q.tool, q.operations)
            first = top_indices(scores, 1)[0]
            if scores[first] > 0:  # no word in common: route answers nothing (and flags nothing)
                out.append((query.task_id, float(scores[first]), space.names[first] in query.relevant))
        return out

    def flagged_share(rows: Sequence[tuple[str, float, bool]], share: float, right: bool | None = None) -> float:
        chosen = [best for _task, best, ok in rows if right is None or ok == right]
        return sum(weak_keywords(best, rare, share=share) for best in chosen) / max(len(chosen), 1)

    print(f"\n== weak keyword-only answers (route while the model loads; shipped: best BM25 below {WEAK_KEYWORD_SHARE} x one "
          f"rare word's score, {WEAK_KEYWORD_SHARE * rare:.2f} at {lexical.size} tools)")
    report["weak_keywords"] = {}
    rows_of = {}
    for name, queries in (("agent-steps", sets["agent-steps"].queries), ("questions", sets["questions"].queries),
                          ("real-agent", sets["real-agent"].queries), ("off-catalog", off.queries)):
        rows = rows_of[name] = answers(queries)
        flagged = [ok for _task, best, ok in rows if weak_keywords(best, rare)]
        kept = [ok for _task, best, ok in rows if not weak_keywords(best, rare)]
        right = (lambda oks: f"{sum(oks) / len(oks):.0%}" if oks else "-")
        weak = flagged_share(rows, WEAK_KEYWORD_SHARE)
        print(f"  {name:<12} answered {len(rows)}/{len(queries)}, flagged weak {weak:6.1%}; "
              f"first hit relevant: {right(flagged)} of flagged, {right(kept)} of the rest")
        report["weak_keywords"][name] = {"answered": len(rows), "weak": weak, "relevant_flagged": sum(flagged), "flagged": len(flagged)}
    steps = rows_of["agent-steps"]
    lines = []
    for number, held_out in enumerate(folds_by_task({task for task, _best, _ok in steps})):
        train = sorted(best / rare for task, best, ok in steps if ok and task not in held_out)
        if not train:
            lines.append(f"fold {number}: no right first hit to fit on")
            continue
        share = train[int(0.05 * len(train))]  # the largest flagging at most 5% of right first hits
        test = [row for row in steps if row[0] in held_out]
        lines.append(f"fold {number}: share {share:.2f}, held-out right first hits flagged {flagged_share(test, share, True):.1%}, "
                     f"wrong ones {flagged_share(test, share, False):.0%}, off-catalog {flagged_share(rows_of['off-catalog'], share):.0%}")
    print("  share by 5-fold CV (at most 5% of right first hits flagged on training tasks): " + "; ".join(lines))
