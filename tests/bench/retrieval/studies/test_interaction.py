"""The late-interaction study (``python -m bench.retrieval.studies.interaction``): which word pieces count and
how a tool is scored from its pieces, on hand-made vectors (the study itself needs LiveMCPBench
and the model)."""

from __future__ import annotations

import numpy as np
import pytest

from bench.retrieval.studies.interaction import Pieces, TokenSpace, content_mask


def _unit(*rows: list[float]) -> np.ndarray:
    matrix = np.asarray(rows, dtype=np.float32)
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def test_content_pieces_leave_out_special_pieces_punctuation_and_stopwords() -> None:
    tokens = ["[CLS]", "read", "the", "excel", "##x", ",", "sheet", "[SEP]"]
    assert content_mask(tokens).tolist() == [False, True, False, True, True, False, True, False]


def _space(content_only: bool) -> TokenSpace:
    # tool 0: pieces along x and y; tool 1: one piece along z (and its [CLS], along x)
    tools = [
        Pieces(np.asarray([101, 7, 8, 102]), _unit([1, 1, 1], [1, 0, 0], [0, 1, 0], [1, 1, 1])),
        Pieces(np.asarray([101, 9, 102]), _unit([1, 0, 0], [0, 0, 1], [1, 1, 1])),
    ]
    tokens = [["[CLS]", "excel", "sheet", "[SEP]"], ["[CLS]", "weather", "[SEP]"]]
    return TokenSpace(tools, tokens, content_only=content_only)


def test_each_query_piece_takes_its_best_match_in_each_tool() -> None:
    space = _space(content_only=True)
    query = Pieces(np.asarray([101, 7, 9, 102]), _unit([1, 1, 1], [1, 0, 0], [0, 0, 1], [1, 1, 1]))
    scores = space.scores(query, ["[CLS]", "excel", "weather", "[SEP]"], idf=False)
    # content only: "excel" (x) and "weather" (z); tool 0 matches x fully and z not at all,
    # tool 1 (its [CLS] left out) matches z fully and x not at all
    assert scores.tolist() == pytest.approx([0.5, 0.5])
    with_special = _space(content_only=False).scores(query, ["[CLS]", "excel", "weather", "[SEP]"], idf=False)
    # with every piece, tool 1's [CLS] (x) now matches "excel" too, and both tools' specials match
    assert with_special[1] > with_special[0]


def test_idf_weights_rare_pieces_more() -> None:
    tools = [
        Pieces(np.asarray([7, 8]), _unit([1, 0, 0], [0, 1, 0])),
        Pieces(np.asarray([7, 9]), _unit([1, 0, 0], [0, 0, 1])),
        Pieces(np.asarray([7]), _unit([1, 0, 0])),
    ]
    space = TokenSpace(tools, [["file", "sheet"], ["file", "weather"], ["file"]], content_only=True)
    assert space.idf(7) < space.idf(8) == space.idf(9)
    # the query asks for "file" (every tool has it) and "sheet" (only tool 0)
    query = Pieces(np.asarray([7, 8]), _unit([1, 0, 0], [0, 1, 0]))
    plain = space.scores(query, ["file", "sheet"], idf=False)
    weighted = space.scores(query, ["file", "sheet"], idf=True)
    assert plain.tolist() == pytest.approx([1.0, 0.5, 0.5])
    assert weighted[0] == pytest.approx(1.0)
    assert weighted[1] < plain[1]  # the shared piece counts for less
