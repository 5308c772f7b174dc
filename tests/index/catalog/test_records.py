"""Catalog snapshots: unreadable files and failed writes are CatalogErrors naming the file."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from index.children.process import read_log_tail
from index.errors import CatalogError
from index.catalog.records import Catalog, ToolRecord, load_catalog
from index.cli.suggest import nearest_names


def test_gzipped_catalog_round_trips(tmp_path: Path) -> None:
    path = Catalog(tools=[ToolRecord(server="s", name="t")]).save(tmp_path / "catalog.json.gz")
    assert [tool.id for tool in load_catalog(path).tools] == ["s/t"]


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("not-gzip.json.gz", b"plain text", "cannot read the catalog"),
        ("truncated.json.gz", gzip.compress(b'{"tools": []}', mtime=0)[:-6], "cannot read the catalog"),
        ("latin1.json", b'{"source": "caf\xe9"}', "not UTF-8 text"),
        # Read as an empty catalog, any of these would let `build` empty the index.
        ("servers.json", b'{"mcpServers": {"a": {"command": "x"}}}', "this is a servers file; crawl it"),
        ("other.json", b'{"version": 1, "toolz": []}', r"expected a JSON object with a 'tools' list, got keys \['toolz', 'version'\]"),
        ("list.json", b"[]", "expected a JSON object with a 'tools' list, got a JSON list"),
        ("future.json", b'{"version": 99, "tools": []}', "catalog version 99 was written by a newer copilot"),
    ],
    ids=["not-gzip", "truncated-gzip", "not-utf8", "servers-file", "no-tools", "a-list", "newer-version"],
)
def test_corrupt_catalog_is_a_catalog_error(tmp_path: Path, name: str, data: bytes, message: str) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(CatalogError, match=message) as raised:
        load_catalog(path)
    assert str(path) in str(raised.value)


def test_catalog_that_is_a_directory_is_a_catalog_error(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="cannot read the catalog"):
        load_catalog(tmp_path)


def test_failed_save_is_a_catalog_error_naming_the_file(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(CatalogError, match="cannot write the catalog") as raised:
        Catalog().save(blocker / "catalog.json")
    assert str(blocker / "catalog.json") in str(raised.value)


def test_log_tail_after_rotation_reads_the_new_file(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("fresh line one\nfresh line two\n")
    # An offset taken before the log was rotated lies past the end of the new file.
    assert read_log_tail(log, offset=10_000) == ["fresh line one", "fresh line two"]
    assert read_log_tail(log, offset=len("fresh line one\n")) == ["fresh line two"]


def test_nearest_names_suggests_close_names_only() -> None:
    names = ["filesystem", "fetch", "weather"]
    assert nearest_names("filesytem", names)[0] == "filesystem"
    assert nearest_names("zzzzqqqq", names) == []


def test_skipped_tools_are_saved_per_server_and_old_catalogs_without_them_load(tmp_path: Path) -> None:
    old = tmp_path / "old.json"
    old.write_text(
        '{"version": 1, "servers": {"s": {"description": "d", "tool_count": 1}}, '
        '"tools": [{"server": "s", "name": "t"}]}',
        encoding="utf-8",
    )
    loaded = load_catalog(old)
    assert loaded.servers["s"].skipped_tools == {} and loaded.skipped_tools() == {"s": {}}
    without = loaded.digest()

    broken = {"bad": "inputSchema: Field required"}
    loaded.servers["s"].skipped_tools = broken
    again = load_catalog(loaded.save(tmp_path / "new.json"))
    assert again.servers["s"].skipped_tools == broken and again.skipped_tools() == {"s": broken}
    # A build compares digests: a change of the skipped tools alone must reach the index too.
    assert again.digest() != without
    loaded.servers["s"].skipped_tools = {}
    assert loaded.digest() == without
