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
        ("servers.json", b'{"mcpServers": {"a": {"command": "x"}}}', "but a servers file; crawl it"),
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


@pytest.mark.parametrize(
    ("data", "message"),
    [
        # Every catalog has a 'servers' mapping: that alone made these "a servers file".
        (b'{"version": 1, "servers": {}, "tools": {"a": 1}}', "('tools' must be a list of tool records, got an object)"),
        (b'{"servers": {"a": {}}, "tools": "none"}', "('tools' must be a list of tool records, got a string)"),
        (
            b'{"servers": {"time": {}}, "tools": [{"server": "time", "name": "now"}, {"server": "time", "name": "at", "input_schema": 3}]}',
            "(tools.1.input_schema: Input should be a valid dictionary) in the record of time/at.",
        ),
        (b'{"servers": {"time": {"tool_count": "many"}}, "tools": []}', "(servers.time.tool_count: Input should be a valid integer"),
        (b'{"servers": {}, "tools": [{"name": "x"}, 5]}', "(tools.0.server: Field required); and 1 more problem(s)."),
    ],
    ids=["tools-an-object", "tools-a-string", "a-bad-tool", "a-bad-server", "several"],
)
def test_a_malformed_catalog_says_which_field_of_which_entry(tmp_path: Path, data: bytes, message: str) -> None:
    path = tmp_path / "catalog.json"
    path.write_bytes(data)
    with pytest.raises(CatalogError) as raised:
        load_catalog(path)
    assert str(raised.value).startswith(f"{path}: not a catalog snapshot {message}")
    assert "servers file" not in str(raised.value)


def test_a_servers_file_in_vs_codes_form_is_told_apart_from_a_catalog(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_bytes(b'{"servers": {"time": {"command": "uvx", "args": ["mcp-server-time"]}}}')
    with pytest.raises(CatalogError, match=f"but a servers file; crawl it into a catalog with python -m index crawl --servers {path} "):
        load_catalog(path)


def test_a_missing_catalog_suggests_commands_that_write_it(tmp_path: Path) -> None:
    path = tmp_path / "mine.json"
    with pytest.raises(CatalogError) as raised:
        load_catalog(path)
    message = str(raised.value)
    assert f"-m index crawl --out {path} -- or: " in message
    assert message.endswith(f"-m index import-livemcpbench PATH/tools.json --out {path}")


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


def test_writers_saving_one_catalog_at_once_each_succeed(tmp_path: Path) -> None:
    # They shared one temporary name: all but one failed with "No such file or directory" (8
    # imports to one --out at once lost 4 to 7 of them).
    import threading  # noqa: PLC0415

    catalog = Catalog(source="tests", tools=[ToolRecord(server="s", name=f"t{i}", description="d" * 200) for i in range(300)])
    start = threading.Barrier(8)
    errors: list[CatalogError] = []

    def save_often() -> None:
        start.wait(timeout=60)
        for _ in range(30):
            try:
                catalog.save(tmp_path / "catalog.json")
            except CatalogError as error:
                errors.append(error)

    threads = [threading.Thread(target=save_often) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == [] and len(load_catalog(tmp_path / "catalog.json").tools) == 300
    assert [path.name for path in tmp_path.iterdir()] == ["catalog.json"]  # no temporary file left behind
