"""Document expansion for BM25 with the model's own vocabulary: a lab study.

``python -m bench.retrieval.studies.expansion [--home DIR]`` (LiveMCPBench data as for ``bench retrieval``).

BM25 misses a step phrased in other words (the dev set's ``synonym`` form, and the questions'
everyday wording); the usual remedy is to expand each *document* with words a query might use
instead (doc2query). Without a model that writes queries, the nearest words will do: every
whole-word entry of the embedding model's own vocabulary (lower-case letters, three or more) is
embedded once, and each tool's BM25 text gets the ``k`` words closest to the tool's vector that it
does not already contain. Only the BM25 index changes; dense and server signals and the fusion
are the shipped ones. Nothing is fitted: ``k`` is reported at 5, 10 and 20, each compared with
the shipped ranker per query with task-clustered intervals.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from bench.retrieval.studies.harness import SHIPPED_SCORE, open_study, print_comparison, shipped_rows, study_rows
from index.models.model_names import bundled_model_path
from index.search.lexical import LexicalIndex
from index.search.text import tokenize, tool_lexical_text

EXPANSIONS = (5, 10, 20)
_WORD = re.compile(r"[a-z]{3,}")


def vocabulary(vocab_file: Path) -> list[str]:
    """The whole words of a WordPiece vocabulary (no ``##`` pieces, digits or one- and two-letter words), sorted."""
    lines = vocab_file.read_text(encoding="utf-8").splitlines()
    return sorted({word.strip() for word in lines if _WORD.fullmatch(word.strip())})


def nearest_new_words(
    similarity: np.ndarray, words: Sequence[str], own_tokens: set[str], k: int
) -> list[str]:
    """The ``k`` words most similar to a tool (``similarity``: one value per word) whose BM25 token
    is neither in the tool's own text (``own_tokens``) nor a stopword (no token at all)."""
    chosen: list[str] = []
    taken = set(own_tokens)
    for index in np.argsort(-similarity, kind="stable"):
        tokens = tokenize(words[index])
        if not tokens or tokens[0] in taken:
            continue
        chosen.append(words[index])
        taken.add(tokens[0])
        if len(chosen) == k:
            break
    return chosen


def main(argv: Sequence[str] | None = None) -> int:
    study = open_study(argv, "python -m bench.retrieval.studies.expansion", __doc__.split("\n\n")[0])
    if isinstance(study, int):
        return study
    words = vocabulary(bundled_model_path() / "vocab.txt")  # open_study loaded this model
    print(f"embedding {len(words)} vocabulary words (cached after the first run)", file=sys.stderr)
    similarity = study.space.space.tool_vectors @ study.cache.get(study.encoder, words).T
    records = sorted(study.catalog.tools, key=lambda r: r.id)  # the space's order
    own = [tokenize(tool_lexical_text(record)) for record in records]
    shipped = shipped_rows(study)
    print_comparison("== shipped ranker (per set: mean of each metric)", shipped, shipped, study.sets)
    for k in EXPANSIONS:
        expanded = [
            tokens + tokenize(" ".join(nearest_new_words(similarity[i], words, set(tokens), k)))
            for i, tokens in enumerate(own)
        ]
        space = replace(study.space, space=replace(study.space.space, lexical=LexicalIndex(expanded)))
        rows = study_rows(study, SHIPPED_SCORE, space=space)
        print_comparison(f"== BM25 text + the {k} nearest vocabulary words", rows, shipped, study.sets)
    return 0


if __name__ == "__main__":
    sys.exit(main())
