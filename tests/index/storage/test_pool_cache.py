"""The pool route's description keeps for the copilot's next start (``index.storage.pool_cache``):
written by a build and read back as written; an unusable file is no pool and no error."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.index.index_support import make_catalog

from index.settings import CopilotSettings
from index.storage.build import build_index
from index.storage.pool_cache import KeptServer, keep_pool, kept_pool, pool_of_records, pool_path

pytestmark = pytest.mark.timeout(300)


def test_a_kept_pool_reads_back_as_written(tmp_path: Path) -> None:
    path = pool_path(tmp_path / "index")
    servers = {"excel": KeptServer(description="Excel workbooks.", category="Office", tools=["excel_read_sheet", "excel_write"])}
    keep_pool(path, servers, "build-1")
    kept = kept_pool(path)
    assert kept is not None and kept.build == "build-1" and kept.servers == servers


@pytest.mark.parametrize(
    "content",
    [b"", b"{not json", b'{"version": 1, "build": "b"}', b'{"version": 99, "build": "b", "servers": {}}', b"\xff\xfe"],
    ids=["empty", "not-json", "no-servers", "other-version", "not-utf8"],
)
def test_an_unusable_file_is_no_pool_and_no_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "route-pool.json"
    path.write_bytes(content)
    assert kept_pool(path) is None
    assert kept_pool(tmp_path / "missing.json") is None


def test_a_pool_that_cannot_be_kept_is_only_logged(tmp_path: Path) -> None:
    blocker = tmp_path / "index"
    blocker.write_text("a file where the index directory should be", encoding="utf-8")
    keep_pool(pool_path(blocker), {"a": KeptServer()})  # no exception
    assert blocker.is_file()


def test_a_build_keeps_the_pool_it_indexed(tmp_path: Path) -> None:
    home = tmp_path / "home"
    catalog = make_catalog()
    build_index(catalog.save(tmp_path / "catalog.json"), CopilotSettings(home=home), show_progress=False)
    kept = kept_pool(pool_path(home / "index"))
    assert kept is not None and kept.build == ""  # the copilot learns the build id when it reads the index
    assert kept.servers == pool_of_records(catalog.tools)
    assert sum(len(server.tools) for server in kept.servers.values()) == len(catalog.tools)
