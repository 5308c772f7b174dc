"""``evaluation/json_files.py`` (reading through ``index.json_text.read_json_model``): one readable reason for a results file that cannot be used."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from evaluation.json_files import JSONFileError, read_json_model, unreadable


class _Row(BaseModel):
    verdict: str
    n: int


class _File(BaseModel):
    name: str
    rows: list[_Row]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('{"name": "x",\n "rows": [}', "not valid JSON: Expecting value at line 2 column 11"),
        ('{"rows": []}', "field name is missing"),
        ('{"name": "x", "rows": [{"verdict": "ok", "n": "many"}]}', "field rows[0].n: Input should be a valid integer"),
        ('{"rows": [{"n": 1}]}', "field name is missing; and 1 more problem(s)"),
        ("[1, 2]", "expected a JSON object at the top level"),
    ],
)
def test_the_reason_names_the_line_or_the_field(tmp_path: Path, text: str, reason: str) -> None:
    path = tmp_path / "file.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(JSONFileError) as caught:
        read_json_model(path, _File)
    assert str(caught.value).startswith(reason)
    assert unreadable(path, "file.json", caught.value) == f"{path}: file.json is unreadable ({caught.value})"


def test_a_bom_is_no_problem_and_a_missing_file_is_an_os_error(tmp_path: Path) -> None:
    path = tmp_path / "file.json"
    path.write_bytes(b'\xef\xbb\xbf{"name": "x", "rows": []}')
    assert read_json_model(path, _File) == _File(name="x", rows=[])
    with pytest.raises(FileNotFoundError):
        read_json_model(tmp_path / "nope.json", _File)
