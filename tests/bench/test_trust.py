"""``python -m bench trust`` reads the project's poisoning corpus, and names what is wrong in another."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.trust import CORPUS, read_corpus
from index.errors import ConfigError


def test_the_shipped_corpus_is_read() -> None:
    # Before: the reader wanted "other_tools" as a list while the corpus maps names to servers, so
    # `python -m bench trust` stopped at case 1 and measured nothing.
    cases = read_corpus(CORPUS)
    assert len(cases) >= 80 and all(isinstance(case["other_tools"], dict) for case in cases)


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ({"tool": {"server": "s", "name": "t"}, "other_tools": []}, 'case 1 needs a "tool" object and an "other_tools" object'),
        ({"tool": {"server": "s", "name": "t"}, "other_tools": {"t": 3}}, 'case 1: "other_tools" maps tool names to server names'),
        ({"tool": {"server": "s"}, "other_tools": {}}, "case 1: tool.name: Field required"),
    ],
)
def test_a_corpus_of_the_wrong_shape_names_the_case(tmp_path: Path, case: dict, message: str) -> None:
    path = tmp_path / "corpus.json"
    path.write_text(json.dumps({"cases": [case]}))
    with pytest.raises(ConfigError, match=message):
        read_corpus(path)
