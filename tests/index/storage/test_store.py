"""``index.storage.store``: what is read back from an index's build metadata, and a store that cannot be opened."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from tests.index.index_support import make_records, open_index

from index.settings import CopilotSettings
from index.storage.store import ChromaStore, IndexState, IndexStoreError, open_failure_message


def test_damaged_skipped_tools_read_as_none_and_are_reported_once_per_damage(caplog: pytest.LogCaptureFixture) -> None:
    # The copilot reads the state every few seconds: the same damage was warned about at every read.
    caplog.set_level(logging.WARNING, logger="index.storage.store")
    for _ in range(3):
        state = IndexState.model_validate({"model": "m", "document_version": 1, "skipped_tools": '{"s": [1'})
        assert state.skipped_tools == {}
    other = IndexState.model_validate({"model": "m", "document_version": 1, "skipped_tools": '{"s": {"t": 5}}'})
    assert other.skipped_tools == {}
    warned = [record.getMessage() for record in caplog.records]
    assert warned == ["index build metadata: unreadable skipped_tools; treating them as none"] * 2
    fine = IndexState.model_validate({"model": "m", "document_version": 1, "skipped_tools": '{"s": {"t": "why"}}'})
    assert fine.skipped_tools == {"s": {"t": "why"}}


def test_a_store_that_cannot_be_opened_says_why_every_time(tmp_path: Path) -> None:
    # Chroma kept the half-built system of the failed open: the next one (the copilot's second
    # route) failed with "'RustBindingsAPI' object has no attribute 'bindings'".
    settings = CopilotSettings(home=tmp_path / "home")
    chroma = settings.index_dir / "chroma"
    chroma.mkdir(parents=True)
    (chroma / "chroma.sqlite3").write_bytes(b"not a database at all " * 100)
    for _ in range(2):
        with pytest.raises(IndexStoreError) as raised:
            ChromaStore(settings).client()
        assert "file is not a database" in str(raised.value) and f"remove {chroma} and build it again" in str(raised.value)


@pytest.mark.parametrize(
    ("error", "advice"),
    [
        ("error returned from database: (code: 8) attempt to write a readonly database", "give this user write access"),
        ("error returned from database: (code: 13) database or disk is full", "free some space"),
        ("disk I/O error: No space left on device", "free some space"),
        ("error returned from database: (code: 26) file is not a database", "remove"),
    ],
)
def test_only_damaged_files_are_met_with_advice_to_remove_the_index(error: str, advice: str) -> None:
    """A read-only index or a full disk was told "remove it and build it again": a good index lost."""
    message = open_failure_message(Path("/home/u/index/chroma"), error, "python -m index build")
    assert advice in message.lower() and error in message
    assert ("remove /home/u/index/chroma" in message) == (advice == "remove")


def test_an_index_never_built_is_answered_without_opening_chroma(tmp_path: Path) -> None:
    # A copilot with no index read its state at every start through Chroma (~1 s of CPU to load),
    # which also wrote an empty store into its home.
    store = ChromaStore(CopilotSettings(home=tmp_path))
    assert store.read_state() is None and store.tools() is None and store.servers() is None
    assert not (tmp_path / "index").exists()
    # A build by another store of the home (another process, as well) is seen by the next read.
    open_index(tmp_path).sync(make_records()[:3], catalog="tests", catalog_digest="abc")
    state = store.read_state()
    assert state is not None and state.catalog_digest == "abc"
    tools = store.tools()
    assert tools is not None and tools.count() == 3
