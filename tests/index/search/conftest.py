"""Fixtures shared by the search tests: one small real index per test module."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.index.index_support import make_records, open_index


@pytest.fixture(scope="module")
def built_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home with the small test catalog indexed by the real bundled model (searches only read it)."""
    home = tmp_path_factory.mktemp("tool-index")
    report = open_index(home).sync(make_records(), catalog="tests", catalog_digest="abc")
    assert report.added == len(make_records()) and report.total == len(make_records())
    return home
