"""The read copy of the store (``index/read-copy.<collection>.npz``): a reader of an unchanged store needs no
Chroma, and any write -- by this process or another -- is seen as before."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from index.search import tool_index
from index.storage.read_copy import copy_path, load_read_copy
from index.storage.store import ChromaStore
from tests.index.index_support import make_records, open_index

QUERY = "convert a word document to pdf"


def _hits(index) -> list[tuple[str, str, float]]:
    return [(hit.server, hit.tool, round(hit.score, 4)) for hit in index.search(QUERY, top_k=5)]


@pytest.fixture
def built(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    open_index(home).sync(make_records(), catalog="tests", catalog_digest="abc")
    return home


def _no_chroma(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: ChromaStore) -> None:
        raise AssertionError("the store was opened through Chroma")

    monkeypatch.setattr(ChromaStore, "_connect", refuse)


def test_a_reader_of_an_unchanged_store_loads_the_copy_without_chroma(built: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = open_index(built)
    expected = _hits(first)
    assert copy_path(first.settings).is_file()
    _no_chroma(monkeypatch)
    second = open_index(built)
    assert _hits(second) == expected
    assert second.records() == first.records() and second.server_names() == first.server_names()
    assert second.state().build_id == first.state().build_id and second.tool_count == len(make_records())


def test_a_build_leaves_the_copy_for_its_first_reader(built: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The first copilot start after `index build` imported Chroma to read what the build had just written.
    _no_chroma(monkeypatch)
    reader = open_index(built)
    assert len(reader.records()) == len(make_records())
    assert [(hit.server, hit.tool) for hit in reader.search(QUERY, top_k=1)] == [("word-document-server", "convert_to_pdf")]


def test_a_write_makes_the_copy_stale_for_every_reader(built: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reader = open_index(built)
    assert len(reader.records()) == len(make_records())
    stale = copy_path(reader.settings).read_bytes()
    records = make_records()
    records[0] = records[0].model_copy(update={"description": "Seven-day weather forecast for a city."})
    writer = open_index(built)
    writer.sync([*records, records[1].model_copy(update={"name": "get_pollen_count", "description": "Pollen levels."})])

    monkeypatch.setattr(tool_index, "STALE_CHECK_SECONDS", 0.0)  # the long-lived reader looks now
    assert reader.find("weather/get_pollen_count") is not None
    assert reader.find("weather/get_weather_forecast").description == "Seven-day weather forecast for a city."
    fresh = open_index(built)
    assert len(fresh.records()) == len(make_records()) + 1
    signature = fresh._store.signature()
    assert signature is not None and load_read_copy(fresh.settings, signature) is not None  # kept anew
    # The copy made before the write does not describe the store any more: it is passed over.
    copy_path(fresh.settings).write_bytes(stale)
    assert load_read_copy(fresh.settings, signature) is None
    assert len(open_index(built).records()) == len(make_records()) + 1


@pytest.mark.parametrize("damage", ["garbage", "truncated", "other collection"])
def test_a_damaged_or_foreign_copy_is_passed_over_and_replaced(built: Path, damage: str) -> None:
    first = open_index(built)
    expected = _hits(first)
    path = copy_path(first.settings)
    if damage == "garbage":
        path.write_bytes(b"not a zip file at all")
    elif damage == "truncated":
        path.write_bytes(path.read_bytes()[:4000])
    else:  # another collection's copy in its place (the signature covers the whole store)
        other = open_index(built, collection="other")
        other.sync(make_records()[:3])
        assert len(other.records()) == 3
        other_copy = copy_path(other.settings)
        assert other_copy != path
        path.write_bytes(other_copy.read_bytes())
    assert _hits(open_index(built)) == expected
    signature = first._store.signature()
    assert signature is not None
    kept = load_read_copy(first.settings, signature)
    assert kept is not None and np.array_equal(kept.tools.vectors, first._current(required=True).space.tool_vectors)


def test_a_removed_store_is_not_answered_from_its_copy(built: Path) -> None:
    import shutil

    index = open_index(built)
    assert index.tool_count == len(make_records())
    shutil.rmtree(index.settings.chroma_dir)
    assert copy_path(index.settings).is_file()
    assert open_index(built).state() is None
