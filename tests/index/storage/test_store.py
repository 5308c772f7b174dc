"""``index.storage.store``: what is read back from an index's build metadata."""

from __future__ import annotations

import logging

import pytest

from index.storage.store import IndexState


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
