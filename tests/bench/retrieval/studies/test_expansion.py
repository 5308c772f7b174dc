"""The document-expansion study (``python -m bench.retrieval.studies.expansion``): its vocabulary and the
words it adds, on a small hand-made vocabulary (the study itself needs LiveMCPBench and the model)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bench.retrieval.studies.expansion import nearest_new_words, vocabulary
from index.search.text import tokenize


def test_the_vocabulary_is_the_whole_lower_case_words(tmp_path: Path) -> None:
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n##ing\nsave\nto\nSpreadsheet\n2024\nfile\nsave\nexcel\n", encoding="utf-8")
    assert vocabulary(vocab) == ["excel", "file", "save"]


def test_the_nearest_words_skip_the_tools_own_words_stopwords_and_repeats() -> None:
    words = ["spreadsheet", "the", "sheet", "sheets", "workbook", "excel", "table"]
    similarity = np.asarray([0.9, 0.95, 0.8, 0.85, 0.7, 0.99, 0.1], dtype=np.float32)
    own = set(tokenize("excel read sheet"))
    # "excel" and "sheet"/"sheets" (one token) are the tool's own, "the" is a stopword
    assert nearest_new_words(similarity, words, own, 2) == ["spreadsheet", "workbook"]
    assert nearest_new_words(similarity, words, own, 10) == ["spreadsheet", "workbook", "table"]
