"""Verbose-query reduction for the dense signal: a lab study.

``python -m bench.retrieval.studies.reduction [--home DIR]`` (LiveMCPBench data as for ``bench retrieval``).

A task question tells a story ("I'm planning a trip with my family…") around the operations it
needs, and the pooled query vector averages all of it. Query reduction keeps only the words the
catalog's tools use (any word whose token is in BM25's vocabulary of the tools), in their order, and
embeds that; the reduced vector replaces the query's or is mixed with it. Only the dense signal
changes; nothing is fitted (the mix is reported at fixed shares), each variant compared with the
shipped ranker per query with task-clustered intervals.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Sequence

import numpy as np

from bench.retrieval.lab import QueryParts, Score, Space, parts, with_dense
from bench.retrieval.studies.harness import open_study, print_comparison, shipped_rows, study_rows
from index.catalog.records import ToolRecord
from index.search.ranking import similarities
from index.search.text import tokenize, tool_lexical_text

#: Shares of the reduced vector in the mix (1.0: it replaces the query's vector).
SHARES = (0.3, 0.5, 1.0)
_WORD = re.compile(r"\S+")


def catalog_vocabulary(records: Iterable[ToolRecord]) -> frozenset[str]:
    """BM25's vocabulary of the tools: every token of their lexical texts (the dense text adds only
    its two labels, "parameters" and "English")."""
    return frozenset(token for record in records for token in tokenize(tool_lexical_text(record)))


def reduced(text: str, vocabulary: frozenset[str]) -> str:
    """The words of ``text`` (as written, in order) that have a token in ``vocabulary``; the text
    itself when none has."""
    kept = [word for word in _WORD.findall(text) if any(token in vocabulary for token in tokenize(word))]
    return " ".join(kept) if kept else text


def with_reduced_query(vocabulary: frozenset[str], share: float) -> Score:
    def score(space: Space, q: QueryParts) -> np.ndarray:
        original = space.query_vectors[q.tool]
        mixed = share * space.query_vectors[reduced(q.tool, vocabulary)] + (1.0 - share) * original
        dense = similarities(space.space.tool_vectors, mixed / max(float(np.linalg.norm(mixed)), 1e-9))
        return with_dense(space, q, dense)

    return score


def main(argv: Sequence[str] | None = None) -> int:
    study = open_study(argv, "python -m bench.retrieval.studies.reduction", __doc__.split("\n\n")[0])
    if isinstance(study, int):
        return study
    vocabulary = catalog_vocabulary(study.catalog.tools)
    tool_parts = [parts(q.text).tool for qs in study.sets.values() for q in qs]
    reductions = {text: reduced(text, vocabulary) for text in tool_parts}
    study.space.vectors(reductions.values())
    changed = sum(reductions[text] != text for text in tool_parts)
    print(f"catalog vocabulary: {len(vocabulary)} tokens; {changed} of {len(tool_parts)} queries lose words")
    shipped = shipped_rows(study)
    print_comparison("== shipped ranker (per set: mean of each metric)", shipped, shipped, study.sets)
    for share in SHARES:
        rows = study_rows(study, with_reduced_query(vocabulary, share))
        label = "the reduced query's vector instead" if share == 1.0 else f"{share} x the reduced query's vector mixed in"
        print_comparison(f"== dense with {label}", rows, shipped, study.sets)
    return 0


if __name__ == "__main__":
    sys.exit(main())
